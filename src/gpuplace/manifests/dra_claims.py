"""The ``dra`` form: the plan's GPUs claimed through Dynamic Resource Allocation (``resource.k8s.io/v1``).

One claim shape per planned shape, in the vocabulary NVIDIA's DRA driver publishes (:mod:`gpuplace.dra`):

- **whole GPUs** (one, or a tensor-parallel group): a ``ResourceClaimTemplate`` of class ``gpu.nvidia.com``
  selecting the planned product, with a ``matchAttribute`` constraint that keeps the group on one NVLink
  domain, PCIe root or NUMA node as the plan assumed (:func:`claim_locality`); a TP group never crosses an
  NVLink domain;
- **MIG slices**: class ``mig.nvidia.com`` selecting the planned ``profile``;
- **shared GPUs**: the replicas that the plan puts on one GPU reference one ``ResourceClaim`` (a claim
  shared by pods shares its device), configured through the driver's sharing config (``GpuConfig``,
  ``sharing.strategy: MPS``) with the share the plan priced as the MPS active-thread percentage and pinned
  memory limit. One Deployment per shared GPU, pinned to its node. A claim shares its device only with
  the pods that reference it, so a GPU another workload already uses in part (the inventory's
  ``allocated``) is joined through consumable capacity instead (KEP-5075, beta and on by default from
  Kubernetes 1.36): a request for the share of the GPU's ``memory`` capacity, on a driver that publishes
  the GPU with ``allowMultipleAllocations``. Below 1.36 such a plan is refused (:func:`needs_capacity`).

Pure functions.
"""

from __future__ import annotations

import copy
from typing import Any

from gpuplace import dra
from gpuplace.errors import InvalidInput
from gpuplace.labels import HOSTNAME
from gpuplace.manifests.builders import (
    ServingOptions,
    _labels,
    _meta,
    _planned_nodes,
    deployment,
)
from gpuplace.types import Inventory
from gpuplace.types.plan import Placement, PlacementPlan

RESOURCE_API = "resource.k8s.io/v1"
CLAIM = "gpus"  # the request's name and the claim's name inside the pod
GPU_CONFIG_API = "resource.nvidia.com/v1beta1"  # the driver's opaque config (GpuConfig)

# The claim constraint that keeps a replica's GPUs as local as the plan assumed, per interconnect tier:
# one NVLink domain, one PCIe root, or one NUMA node (attribute names as published: gpuplace.dra).
LOCALITY_ATTRIBUTE = {
    "nvlink": dra.NVLINK_DOMAIN,
    "pcie-switch": dra.PCIE_ROOT,
    "numa": dra.NUMA_NODE,
}


def _product_name(plan: PlacementPlan, inventory: Inventory) -> str:
    for node in _planned_nodes(plan, inventory):
        for g in node.gpus:
            if g.gpu == plan.chosen.gpu:
                return dra.product_name(g)
    return plan.chosen.gpu


def claim_locality(plan: PlacementPlan) -> str:
    """The attribute every replica's GPUs must share (``matchAttribute``), or "" for none.

    One template serves every replica, so the tier must hold for all of them: the planner's tier when
    the placements share it, else one NUMA node when every planned set sits on one, else no constraint.
    """
    if plan.chosen.gpus_per_replica < 2 or not plan.placements:
        return ""
    tiers = {p.interconnect for p in plan.placements}
    if len(tiers) == 1 and (tier := tiers.pop()) in LOCALITY_ATTRIBUTE:
        return LOCALITY_ATTRIBUTE[tier]
    if all(p.numa_node is not None for p in plan.placements):
        return dra.NUMA_NODE
    return ""


CONSUMABLE_CAPACITY = (1, 36)  # DRAConsumableCapacity: alpha 1.34, beta (on by default) 1.36


def needs_capacity(plan: PlacementPlan, inventory: Inventory) -> list[str]:
    """The planned shared GPUs that another workload already uses in part (only consumable capacity can
    add a claim to those)."""
    if plan.chosen.kind != "shared":
        return []
    used = {g.id for _, g in inventory.devices() if g.allocated > 0}
    return sorted({g for p in plan.placements for g in p.gpu_ids if g in used})


def device_request(
    plan: PlacementPlan, inventory: Inventory, options: ServingOptions, *, capacity: bool = False
) -> dict[str, Any]:
    """The claim's one request: the planned product (or MIG profile), as many devices as a replica takes;
    with ``capacity``, the planned share of one GPU's memory (consumable capacity)."""
    chosen = plan.chosen
    if chosen.kind == "mig":
        cls = options.mig_device_class
        cel = f'{dra.cel_attribute(dra.PROFILE)} == "{chosen.mig_profile}"'
    else:
        cls = options.dra_device_class
        cel = f'{dra.cel_attribute(dra.PRODUCT_NAME)} == "{_product_name(plan, inventory)}"'
    count = 1 if chosen.kind == "shared" else chosen.gpus_per_replica
    exactly: dict[str, Any] = {
        "deviceClassName": cls,
        "allocationMode": "ExactCount",
        "count": count,
        "selectors": [{"cel": {"expression": cel}}],
    }
    if capacity:
        memory = _gpu_memory(inventory, plan.placements[0].gpu_ids[0]) if plan.placements else 0.0
        exactly["capacity"] = {"requests": {dra.MEMORY: f"{int(chosen.share * memory * 1024)}Mi"}}
    return {"name": CLAIM, "exactly": exactly}


def resource_claim_template(
    plan: PlacementPlan, inventory: Inventory, options: ServingOptions
) -> dict[str, Any]:
    """A DRA claim template for one replica of a whole-GPU or MIG plan: its GPUs (or MIG slice) by CEL
    selector on the attributes NVIDIA's DRA driver publishes, kept on one NVLink domain, PCIe root or
    NUMA node as the plan assumed."""
    spec: dict[str, Any] = {"devices": {"requests": [device_request(plan, inventory, options)]}}
    locality = claim_locality(plan)
    if locality:
        spec["devices"]["constraints"] = [{"requests": [CLAIM], "matchAttribute": locality}]
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceClaimTemplate",
        "metadata": _meta(plan, f"{plan.deployment_name}-gpus"),
        "spec": {"metadata": {"labels": _labels(plan)}, "spec": spec},
    }


def sharing_config(share: float, memory_gib: float) -> dict[str, Any]:
    """The NVIDIA driver's opaque ``GpuConfig`` for an MPS-shared GPU holding ``share`` of it."""
    if not 0 < share <= 1:
        raise InvalidInput("plan.chosen.share", share, "a GPU share must be in (0, 1]", "Plan it again")
    sharing: dict[str, Any] = {"strategy": "MPS", "mpsConfig": {}}
    sharing["mpsConfig"]["defaultActiveThreadPercentage"] = max(1, round(share * 100))
    if memory_gib > 0:
        sharing["mpsConfig"]["defaultPinnedDeviceMemoryLimit"] = f"{int(share * memory_gib * 1024)}Mi"
    return {
        "requests": [CLAIM],
        "opaque": {
            "driver": dra.DRIVER,
            "parameters": {"apiVersion": GPU_CONFIG_API, "kind": "GpuConfig", "sharing": sharing},
        },
    }


def shared_groups(plan: PlacementPlan) -> list[tuple[Placement, ...]]:
    """The plan's replicas grouped by the one GPU they share, in replica order."""
    groups: dict[tuple[str, ...], list[Placement]] = {}
    for p in sorted(plan.placements, key=lambda p: p.replica):
        groups.setdefault(p.gpu_ids, []).append(p)
    return [tuple(g) for g in groups.values()]


def _gpu_memory(inventory: Inventory, gpu_id: str) -> float:
    for _, g in inventory.devices():
        if g.id == gpu_id:
            return g.memory_gib
    return 0.0


def shared_claim(
    plan: PlacementPlan, inventory: Inventory, options: ServingOptions, name: str, gpu_id: str
) -> dict[str, Any]:
    """A ResourceClaim for the one GPU ``gpu_id`` that some replicas share, with the priced share."""
    spec = {
        "devices": {
            "requests": [device_request(plan, inventory, options)],
            "config": [sharing_config(plan.chosen.share, _gpu_memory(inventory, gpu_id))],
        }
    }
    meta = _meta(plan, name)
    meta["annotations"] = {"gpuplace.io/planned-gpu": gpu_id, "gpuplace.io/share": f"{plan.chosen.share:g}"}
    return {"apiVersion": RESOURCE_API, "kind": "ResourceClaim", "metadata": meta, "spec": spec}


def _claiming(dep: dict[str, Any], claim: str) -> dict[str, Any]:
    pod = dep["spec"]["template"]["spec"]
    pod["resourceClaims"] = [{"name": CLAIM, "resourceClaimName": claim}]
    return dep


def _on_node(dep: dict[str, Any], node: str, replicas: int, name: str, group: int) -> dict[str, Any]:
    dep["metadata"]["name"] = name
    dep["spec"]["replicas"] = replicas
    for sel in (dep["spec"]["selector"]["matchLabels"], dep["spec"]["template"]["metadata"]["labels"]):
        sel["gpuplace.io/gpu-group"] = str(group)
    terms = dep["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    terms["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] = [
        {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node]}]}
    ]
    dep["spec"]["template"]["spec"]["topologySpreadConstraints"] = []
    return dep


def capacity_template(plan: PlacementPlan, inventory: Inventory, options: ServingOptions) -> dict[str, Any]:
    """A claim template per replica for the planned share of a GPU's memory (consumable capacity)."""
    template = resource_claim_template(plan, inventory, options)
    template["spec"]["spec"]["devices"]["requests"] = [
        device_request(plan, inventory, options, capacity=True)
    ]
    return template


def dra_objects(
    plan: PlacementPlan, inventory: Inventory, options: ServingOptions, *, capacity: bool = False
) -> list[dict[str, Any]]:
    """The ``dra`` form's objects: claim(s) first, then the Deployment(s) that reference them; a shared
    plan through consumable capacity when ``capacity`` (the cluster serves it and the plan needs it)."""
    if capacity and plan.chosen.kind == "shared":
        return [capacity_template(plan, inventory, options), deployment(plan, inventory, options, dra=True)]
    if plan.chosen.kind != "shared":
        return [
            resource_claim_template(plan, inventory, options),
            deployment(plan, inventory, options, dra=True),
        ]
    base = deployment(plan, inventory, options, dra=True)
    groups = shared_groups(plan)
    claims: list[dict[str, Any]] = []
    deployments: list[dict[str, Any]] = []
    for k, group in enumerate(groups):
        single = len(groups) == 1
        claim = f"{plan.deployment_name}-gpus" if single else f"{plan.deployment_name}-gpus-{k}"
        claims.append(shared_claim(plan, inventory, options, claim, group[0].gpu_ids[0]))
        dep = _claiming(copy.deepcopy(base), claim)
        name = plan.deployment_name if single else f"{plan.deployment_name}-g{k}"
        deployments.append(_on_node(dep, group[0].node, len(group), name, k))
    return [*claims, *deployments]
