"""The plan's GPUs claimed through DRA, device by device: one ResourceClaim and one Deployment per replica.

One ``ResourceClaimTemplate`` for a whole Deployment (``alternatives/dra.yaml``) lets kube-scheduler's DRA
allocator pick *any* devices that meet its constraints, so a measured placement could differ from the plan
with nothing wrong. To check the plan at GPU level, ``gpuplace deploy --gpu-api dra`` instead claims each
replica's planned devices by their published ``uuid`` (found in the nodes' ResourceSlices, so it works
whichever attributes the driver uses to number GPUs) and runs each replica as its own one-pod
Deployment pinned to its planned node. The allocator then either allocates exactly the planned devices or
leaves the pod Pending with its reason; what it allocated is read back from the claim, never assumed.

Pure functions over the plan and the plan directory's manifests (docs/deploy.md#gpu-api).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

from gpuplace import dra
from gpuplace.errors import InvalidInput
from gpuplace.labels import HOSTNAME, REPLICA_LABEL
from gpuplace.manifests.dra_claims import LOCALITY_ATTRIBUTE
from gpuplace.types.plan import PlacementPlan

CLAIM_NAME = "gpus"  # the claim's name inside the pod
DEVICE_PLUGIN_PREFIX = "nvidia.com/"
RESOURCE_API = "resource.k8s.io/v1"


def replica_name(deployment: str, replica: int) -> str:
    return f"{deployment}-r{replica}"


def claim_name(deployment: str, replica: int) -> str:
    return f"{replica_name(deployment, replica)}-gpus"


def _uuid_selector(uuids: Sequence[str]) -> str:
    listed = ", ".join(json.dumps(u) for u in uuids)
    return f"{dra.cel_attribute(dra.UUID)} in [{listed}]"


def resource_claim(
    plan: PlacementPlan,
    replica: int,
    uuids: Sequence[str],
    *,
    kind: str,
    labels: Mapping[str, str],
    config: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """A claim for exactly the devices ``uuids`` (all of one ``kind``: "gpu" or "mig"); for a shared plan
    with ``config``, the sharing config the plan's ``dra`` form chose (:func:`shared_config`; none: the
    driver's default time-slicing), which the replicas on that GPU all share."""
    cls = dra.MIG_CLASS if kind == "mig" else dra.GPU_CLASS
    spec: dict[str, Any] = {
        "devices": {
            "requests": [
                {
                    "name": CLAIM_NAME,
                    "exactly": {
                        "deviceClassName": cls,
                        "allocationMode": "ExactCount",
                        "count": len(uuids),
                        "selectors": [{"cel": {"expression": _uuid_selector(uuids)}}],
                    },
                }
            ]
        }
    }
    placement = next(p for p in plan.placements if p.replica == replica)
    locality = LOCALITY_ATTRIBUTE.get(placement.interconnect, "")
    if locality and len(uuids) > 1:
        # The planned set was chosen for this locality; a claim that cannot hold it should say so.
        spec["devices"]["constraints"] = [{"requests": [CLAIM_NAME], "matchAttribute": locality}]
    if plan.chosen.kind == "shared" and config:
        spec["devices"]["config"] = [copy.deepcopy(dict(c)) for c in config]
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceClaim",
        "metadata": {
            "name": claim_name(plan.deployment_name, replica),
            "labels": {**labels, REPLICA_LABEL: str(replica)},
        },
        "spec": spec,
    }


def _without_device_plugin(resources: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("requests", "limits"):
        if key in resources:
            out[key] = {k: v for k, v in resources[key].items() if not k.startswith(DEVICE_PLUGIN_PREFIX)}
    out["claims"] = [{"name": CLAIM_NAME}]
    return out


def replica_deployment(
    deployment: Mapping[str, Any], plan: PlacementPlan, replica: int, node: str, claim: str = ""
) -> dict[str, Any]:
    """``deployment`` as one pod of replica ``replica`` on ``node``, its GPUs from ``claim`` (default: that
    replica's own claim)."""
    out: dict[str, Any] = copy.deepcopy(dict(deployment))
    name = replica_name(plan.deployment_name, replica)
    meta = out.setdefault("metadata", {})
    meta["name"] = name
    meta["labels"] = {**(meta.get("labels") or {}), REPLICA_LABEL: str(replica)}
    spec = out.setdefault("spec", {})
    spec["replicas"] = 1
    selector = spec.setdefault("selector", {}).setdefault("matchLabels", {})
    selector[REPLICA_LABEL] = str(replica)
    template = spec.setdefault("template", {})
    tmeta = template.setdefault("metadata", {})
    tmeta["labels"] = {**(tmeta.get("labels") or {}), REPLICA_LABEL: str(replica)}
    pod = template.setdefault("spec", {})
    pod.setdefault("affinity", {})["nodeAffinity"] = {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node]}]}
            ]
        }
    }
    for c in pod.get("containers") or ():
        c["resources"] = _without_device_plugin(c.get("resources") or {})
        break  # the server container; sidecars take no GPU
    pod["resourceClaims"] = [
        {"name": CLAIM_NAME, "resourceClaimName": claim or claim_name(plan.deployment_name, replica)}
    ]
    return out


def shared_config(dra_form: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The config of the shared GPUs' claims in a plan's ``dra`` form (``alternatives/dra.yaml``): how the
    plan chose to share them; empty for time-slicing, which needs none."""
    for obj in dra_form:
        if obj.get("kind") == "ResourceClaim":
            return [
                copy.deepcopy(dict(c))
                for c in ((obj.get("spec") or {}).get("devices") or {}).get("config") or ()
            ]
    return []


def pinned_dra_objects(
    plan: PlacementPlan,
    manifests: Sequence[Mapping[str, Any]],
    published: Mapping[str, tuple[str, str]],
    config: Sequence[Mapping[str, Any]] = (),
) -> list[dict[str, Any]]:
    """The objects to apply for ``--gpu-api dra``: per replica a claim for its planned devices and a
    one-pod Deployment, then the plan's other objects (Service, PodDisruptionBudget) unchanged. The
    replicas of a shared plan that the plan puts on one GPU reference one claim (a claim shared by pods
    shares its device), configured with ``config`` (:func:`shared_config` of the plan's ``dra`` form).

    ``published`` maps a planned inventory id to the (uuid, kind) its ResourceSlice publishes; an id not
    published is an error that names it.
    """
    workloads = [m for m in manifests if m.get("kind") == "Deployment"]
    if len(workloads) != 1:
        raise InvalidInput(
            "manifests", [m.get("kind") for m in manifests], "DRA pinning needs exactly one Deployment", ""
        )
    (deployment,) = workloads
    labels = dict(
        ((deployment.get("spec") or {}).get("template") or {}).get("metadata", {}).get("labels") or {}
    )
    out: list[dict[str, Any]] = []
    shared: dict[tuple[str, ...], str] = {}  # a shared GPU → the claim its replicas reference
    for p in plan.placements:
        missing = [g for g in p.gpu_ids if g not in published]
        if missing:
            raise InvalidInput(
                "plan.placements",
                missing,
                "planned GPUs are not published in any ResourceSlice of the DRA driver, so they cannot be "
                "claimed",
                "Deploy with --gpu-api device-plugin, or re-plan from the cluster's inventory",
            )
        kinds = {published[g][1] for g in p.gpu_ids}
        if len(kinds) != 1:
            raise InvalidInput("plan.placements", p.gpu_ids, "mixes whole GPUs and MIG slices", "")
        uuids = [published[g][0] for g in p.gpu_ids]
        if plan.chosen.kind != "shared" or p.gpu_ids not in shared:
            claim = resource_claim(plan, p.replica, uuids, kind=kinds.pop(), labels=labels, config=config)
            out.append(claim)
            shared[p.gpu_ids] = out[-1]["metadata"]["name"]
        out.append(replica_deployment(deployment, plan, p.replica, p.node, shared[p.gpu_ids]))
    out += [copy.deepcopy(dict(m)) for m in manifests if m.get("kind") != "Deployment"]
    return out
