"""The ``lws`` form: a ``LeaderWorkerSet`` (leaderworkerset.x-k8s.io/v1), one group per replica, for
replicas that span nodes, paired with an NVIDIA ``ComputeDomain`` when the nodes share a multi-node
NVLink domain (GB200-class racks, GFD's ``nvidia.com/gpu.clique`` label).

A replica spans nodes when its planned GPUs (``<node>/gpu<i>`` ids) sit on several nodes. The rule that a
tensor-parallel group never crosses an NVLink domain holds here too: every node of a multi-node replica
must carry the same clique, else the plan is refused. The group's pods run vLLM's multi-node launch
(``--nnodes``, ``--node-rank``, ``--master-addr`` from LWS's ``LWS_LEADER_ADDRESS``; workers
``--headless``), take their node's share of the GPUs, are kept in one clique by pod affinity on the
group key, and claim the ComputeDomain's IMEX channel. A single-node replica is a group of one.

MIG slices and time-sliced shares never span nodes, so this form refuses them (emit ``manifests`` or
``dra``). Pure functions.
"""

from __future__ import annotations

import copy
from typing import Any

from gpuplace.errors import InvalidInput
from gpuplace.labels import GPU_RESOURCE, NVLINK_CLIQUE
from gpuplace.manifests.builders import ServingOptions, _labels, _meta, _planned_nodes, _pod_spec, _selector
from gpuplace.types import Inventory
from gpuplace.types.plan import Placement, PlacementPlan

LWS_API = "leaderworkerset.x-k8s.io/v1"
COMPUTE_DOMAIN_API = "resource.nvidia.com/v1beta1"
GROUP_KEY = "leaderworkerset.sigs.k8s.io/group-key"
CHANNEL = "compute-domain"


def replica_nodes(p: Placement) -> tuple[str, ...]:
    """The nodes a replica's GPUs are on, in the order the plan lists them."""
    return p.nodes


def nodes_per_replica(plan: PlacementPlan) -> int:
    return max((len(replica_nodes(p)) for p in plan.placements), default=1)


def spans_nodes(plan: PlacementPlan) -> bool:
    return nodes_per_replica(plan) > 1


def multi_node_note(plan: PlacementPlan, forms: tuple[str, ...], *, default: bool) -> str:
    """The plan's note for replicas that span nodes: which form runs them, and what the KFP path cannot."""
    size = nodes_per_replica(plan)
    how = (
        f"the default forms for it: {','.join(forms)} (alternatives/lws.yaml: a LeaderWorkerSet of {size} "
        "pods per replica and a ComputeDomain)"
        if default
        else f"forms written: {','.join(forms)}"
    )
    return (
        f"each replica spans {size} nodes of one NVLink domain ({NVLINK_CLIQUE}); {how}; the kubeflow "
        "path (kfp/) runs a replica as one pod on one node, so it cannot run this plan"
    )


def nvlink_cliques(plan: PlacementPlan, inventory: Inventory) -> list[str]:
    """The multi-node NVLink domain of each multi-node replica; refuses a replica that would cross one."""
    labels = {n.name: dict(n.labels).get(NVLINK_CLIQUE, "") for n in inventory.nodes}
    out = []
    for p in plan.placements:
        nodes = replica_nodes(p)
        if len(nodes) < 2:
            continue
        cliques = {labels.get(n, "") for n in nodes}
        if len(cliques) != 1 or "" in cliques:
            raise InvalidInput(
                "plan.placements",
                {n: labels.get(n, "") for n in nodes},
                f"replica {p.replica} spans nodes outside one multi-node NVLink domain ({NVLINK_CLIQUE}); "
                "a tensor-parallel group never crosses an NVLink domain",
                "Re-plan with a TP degree that fits one node or one NVLink domain",
            )
        out.append(cliques.pop())
    return out


def worker_pod_spec(
    plan: PlacementPlan, inventory: Inventory, options: ServingOptions, *, rank: str
) -> dict[str, Any]:
    """The pod spec of group member ``rank`` ("0" for the leader): the node's share of the replica's GPUs
    vLLM's multi-node arguments and the ComputeDomain's channel (a single-node replica's pod unchanged)."""
    size = nodes_per_replica(plan)
    pod = _pod_spec(plan, inventory, options)
    container = pod["containers"][0]
    if size > 1:
        per_node = str(plan.chosen.gpus_per_replica // size)
        for key in ("requests", "limits"):
            container["resources"][key][GPU_RESOURCE] = per_node
        container["env"] = [
            *container["env"],
            {"name": "VLLM_HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        ]
        multi = ["--nnodes", str(size), "--node-rank", rank, "--master-addr", "$(LWS_LEADER_ADDRESS)"]
        container["args"] = [*container["args"], *multi, *(["--headless"] if rank != "0" else [])]
        pod["affinity"]["podAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": _selector(plan)},
                    "matchLabelKeys": [GROUP_KEY],
                    "topologyKey": NVLINK_CLIQUE,
                }
            ]
        }
        pod["resourceClaims"] = [{"name": CHANNEL, "resourceClaimTemplateName": channel_template(plan)}]
        container["resources"]["claims"] = [{"name": CHANNEL}]
        # Each pod of a group is on its own node: spread per host inside the group, not across the LWS.
        pod["topologySpreadConstraints"] = []
    return pod


def _group_pod(
    plan: PlacementPlan, inventory: Inventory, options: ServingOptions, *, rank: str
) -> dict[str, Any]:
    return {
        "metadata": {"labels": _labels(plan), "annotations": {"gpuplace.io/shape": plan.chosen.label}},
        "spec": worker_pod_spec(plan, inventory, options, rank=rank),
    }


def channel_template(plan: PlacementPlan) -> str:
    return f"{plan.deployment_name}-imex-channel"


def compute_domain(plan: PlacementPlan) -> dict[str, Any]:
    """The ComputeDomain whose IMEX channel the group's pods claim (multi-node NVLink memory sharing)."""
    return {
        "apiVersion": COMPUTE_DOMAIN_API,
        "kind": "ComputeDomain",
        "metadata": _meta(plan, f"{plan.deployment_name}-domain"),
        "spec": {"numNodes": 0, "channel": {"resourceClaimTemplate": {"name": channel_template(plan)}}},
    }


def leader_worker_set(
    plan: PlacementPlan, inventory: Inventory, options: ServingOptions
) -> list[dict[str, Any]]:
    """The ``lws`` form's objects: the ComputeDomain (multi-node NVLink replicas only), then the LWS."""
    if plan.chosen.kind != "whole":
        raise InvalidInput(
            "emit",
            "lws",
            f"a {plan.chosen.kind} shape ({plan.chosen.label}) is a part of one GPU and never spans nodes: "
            "LeaderWorkerSet groups are for replicas that span nodes",
            "Emit manifests or dra for this plan",
        )
    _planned_nodes(plan, inventory)
    size = nodes_per_replica(plan)
    if size > 1 and plan.chosen.gpus_per_replica % size:
        raise InvalidInput(
            "plan.placements",
            plan.chosen.gpus_per_replica,
            f"GPUs per replica do not split evenly over its {size} nodes",
            "Re-plan",
        )
    cliques = nvlink_cliques(plan, inventory)
    leader = _group_pod(plan, inventory, options, rank="0")
    worker = _group_pod(plan, inventory, options, rank="$(LWS_WORKER_INDEX)")
    template: dict[str, Any] = {"size": size, "restartPolicy": "RecreateGroupOnPodRestart"}
    if size > 1:
        template["leaderTemplate"] = leader
    template["workerTemplate"] = worker if size > 1 else copy.deepcopy(leader)
    lws = {
        "apiVersion": LWS_API,
        "kind": "LeaderWorkerSet",
        "metadata": _meta(plan, plan.deployment_name),
        "spec": {
            "replicas": plan.replicas,
            "startupPolicy": "LeaderCreated",
            "leaderWorkerTemplate": template,
        },
    }
    return [compute_domain(plan), lws] if cliques else [lws]
