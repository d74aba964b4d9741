"""The ``dra`` form: the plan's GPUs claimed through Dynamic Resource Allocation (``resource.k8s.io/v1``).

One claim shape per planned shape, in the vocabulary NVIDIA's DRA driver publishes (:mod:`gpuplace.dra`;
every claim only names what the driver publishes, :func:`gpuplace.dra.unpublished`):

- **whole GPUs** (one, or a tensor-parallel group): a ``ResourceClaimTemplate`` of class ``gpu.nvidia.com``
  selecting the planned product. The driver publishes no NVLink attribute: a claim's devices come from
  the ResourceSlice of the node its pod runs on (pool = node), and the Deployment is held to the planned
  nodes, so a TP group stays in one node's NVLink island, which is the whole node on an HGX board (a node
  with several islands is named in the plan's notes, :func:`dra_notes`). A group the plan put under one PCIe
  switch or on one NUMA node keeps that with ``matchAttribute`` on ``resource.kubernetes.io/pcieRoot`` or
  ``numaNode`` (:func:`claim_locality`); a group across nodes is the ``lws`` form (ComputeDomain, clique);
- **MIG slices**: class ``mig.nvidia.com`` selecting the planned ``profile``;
- **shared GPUs**, as asked (:data:`SHARING_MODES`, ``--gpu-sharing``): ``time-slicing`` (default): the
  replicas the plan puts on one GPU reference one ``ResourceClaim`` (a claim shared by pods shares its
  device) with no sharing config, so CUDA time-slices them, as the plan priced, with no driver gate;
  ``mps``: the same claim with the driver's ``GpuConfig`` ``sharing.strategy: MPS`` at the priced share
  (active-thread percentage and pinned memory limit; the MPSSupport gate); ``consumable-capacity``: a
  claim per replica for the share of a GPU's ``memory`` capacity (the ConsumableShares gate, Kubernetes
  ≥ 1.36), the only way to join a GPU another workload already uses in part (:func:`needs_capacity`).
  One Deployment per shared GPU, pinned to its node, except with consumable capacity.

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
TIME_SLICING, MPS, CONSUMABLE = "time-slicing", "mps", "consumable-capacity"
SHARING_MODES = (TIME_SLICING, MPS, CONSUMABLE)
# what each way of sharing a GPU needs on the cluster, beyond the DRA driver itself
SHARING_NEEDS = {
    TIME_SLICING: "no feature gate (the driver's default CUDA time-slicing of the pods of one claim)",
    MPS: "the driver's MPSSupport feature gate (alpha, off by default; not with its DynamicMIG or "
    "ConsumableShares)",
    CONSUMABLE: "the driver's ConsumableShares feature gate (alpha, off by default) with its "
    "consumableShares value set (e.g. memory), and Kubernetes' DRAConsumableCapacity (on by default from "
    "1.36); no MPS",
}

# The claim constraint that keeps a replica's GPUs as local as the plan assumed, per interconnect tier:
# one PCIe root or one NUMA node (published attributes, gpuplace.dra). NVLink has none: the node's pool.
LOCALITY_ATTRIBUTE = {"pcie-switch": dra.PCIE_ROOT, "numa": dra.NUMA_NODE}


def check_sharing(mode: str) -> str:
    """``mode`` when it is one of :data:`SHARING_MODES`, else the refusal naming the choices."""
    if mode not in SHARING_MODES:
        raise InvalidInput(
            "gpu_sharing", mode, "is not a way to share a GPU", f"Choose from {', '.join(SHARING_MODES)}"
        )
    return mode


def _product_name(plan: PlacementPlan, inventory: Inventory) -> str:
    for node in _planned_nodes(plan, inventory):
        for g in node.gpus:
            if g.gpu == plan.chosen.gpu:
                return dra.product_name(g)
    return plan.chosen.gpu


def claim_locality(plan: PlacementPlan) -> str:
    """The published attribute every replica's GPUs must share (``matchAttribute``), or "" for none.

    One template serves every replica, so the tier must hold for all of them: the planner's tier when the
    placements share one the driver publishes an attribute for (PCIe root, NUMA node); none for NVLink,
    which the node's pool keeps (no published attribute tells NVLink islands apart, and GPUs of one
    NVSwitch domain sit under several PCIe roots and NUMA nodes); for mixed tiers, one NUMA node when every
    planned set sits on one, else none.
    """
    if plan.chosen.gpus_per_replica < 2 or not plan.placements:
        return ""
    tiers = {p.interconnect for p in plan.placements}
    if len(tiers) == 1:
        return LOCALITY_ATTRIBUTE.get(tiers.pop(), "")
    if all(p.numa_node is not None for p in plan.placements):
        return dra.NUMA_NODE
    return ""


def _islands(plan: PlacementPlan, inventory: Inventory) -> dict[str, int]:
    """The planned nodes whose GPUs of the planned product form more than one NVLink island, by count."""
    out = {}
    for node in _planned_nodes(plan, inventory):
        islands = {g.nvlink_island for g in node.gpus if g.gpu == plan.chosen.gpu and not g.mig_profile}
        if len(islands) > 1:
            out[node.name] = len(islands)
    return out


def dra_notes(plan: PlacementPlan, inventory: Inventory, sharing: str = TIME_SLICING) -> tuple[str, ...]:
    """What the ``dra`` form's claims keep and need, for the plan's notes."""
    chosen = plan.chosen
    if chosen.kind == "shared":
        priced = "the plan priced a time-sliced share"
        if sharing == MPS:
            priced += " (MPS caps each replica at the share's threads instead; not priced separately)"
        return (f"dra: replicas share a GPU by {sharing}, which needs {SHARING_NEEDS[sharing]}; {priced}",)
    if chosen.kind != "whole" or chosen.gpus_per_replica < 2:
        return ()
    attribute = claim_locality(plan)
    if attribute:
        return (
            f"dra: each tensor-parallel group's GPUs share {attribute} "
            f"(the driver publishes it {dra.PUBLISHED[attribute].when}; without it the claim is not "
            "allocated)",
        )
    note = (
        "dra: NVIDIA's DRA driver publishes no NVLink attribute, so each tensor-parallel group is kept in "
        "one node's NVLink island by the node: a claim's devices come from that node's ResourceSlice (its "
        "pool) and the Deployment is held to the planned nodes"
    )
    split = _islands(plan, inventory)
    if split:
        nodes = ", ".join(f"{n} ({k} islands)" for n, k in sorted(split.items()))
        note += (
            f"; on {nodes} the allocator may split a group across islands, which no published attribute "
            "tells apart: deploy with --gpu-api dra to claim the planned GPUs by uuid"
        )
    return (note,)


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
    selector on the attributes NVIDIA's DRA driver publishes, kept on one PCIe root or NUMA node where the
    plan assumed one (:func:`claim_locality`)."""
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


def sharing_config(mode: str, share: float, memory_gib: float) -> dict[str, Any] | None:
    """The claim's config entry for a GPU shared by ``mode`` at ``share``: none for time-slicing (the
    driver's default, no gate), the driver's ``GpuConfig`` with MPS at the share for ``mps``; checked as
    the driver checks it (:func:`gpuplace.dra.gpu_config_gates`)."""
    if not 0 < share <= 1:
        raise InvalidInput("plan.chosen.share", share, "a GPU share must be in (0, 1]", "Plan it again")
    if check_sharing(mode) != MPS:
        return None
    mps: dict[str, Any] = {"defaultActiveThreadPercentage": max(1, round(share * 100))}
    if memory_gib > 0:
        mps["defaultPinnedDeviceMemoryLimit"] = f"{max(1, int(share * memory_gib * 1024))}Mi"
    parameters = {
        "apiVersion": dra.GPU_CONFIG_API,
        "kind": "GpuConfig",
        "sharing": {"strategy": dra.MPS, "mpsConfig": mps},
    }
    dra.gpu_config_gates(parameters, "sharing config")
    return {"requests": [CLAIM], "opaque": {"driver": dra.DRIVER, "parameters": parameters}}


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
    plan: PlacementPlan,
    inventory: Inventory,
    options: ServingOptions,
    name: str,
    gpu_id: str,
    sharing: str = TIME_SLICING,
) -> dict[str, Any]:
    """A ResourceClaim for the one GPU ``gpu_id`` that some replicas share, shared by ``sharing``."""
    devices: dict[str, Any] = {"requests": [device_request(plan, inventory, options)]}
    config = sharing_config(sharing, plan.chosen.share, _gpu_memory(inventory, gpu_id))
    if config is not None:
        devices["config"] = [config]
    meta = _meta(plan, name)
    meta["annotations"] = {"gpuplace.io/planned-gpu": gpu_id, "gpuplace.io/share": f"{plan.chosen.share:g}"}
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceClaim",
        "metadata": meta,
        "spec": {"devices": devices},
    }


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
    plan: PlacementPlan, inventory: Inventory, options: ServingOptions, *, sharing: str = TIME_SLICING
) -> list[dict[str, Any]]:
    """The ``dra`` form's objects: claim(s) first, then the Deployment(s) that reference them; a shared
    plan's GPUs shared by ``sharing`` (:data:`SHARING_MODES`)."""
    if check_sharing(sharing) == CONSUMABLE and plan.chosen.kind == "shared":
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
        claims.append(shared_claim(plan, inventory, options, claim, group[0].gpu_ids[0], sharing))
        dep = _claiming(copy.deepcopy(base), claim)
        name = plan.deployment_name if single else f"{plan.deployment_name}-g{k}"
        deployments.append(_on_node(dep, group[0].node, len(group), name, k))
    return [*claims, *deployments]
