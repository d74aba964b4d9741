"""The extender's decisions: what a pod asks for, whether a node can take it, and how well.

A pod's GPU request comes from its resources (``nvidia.com/gpu`` or one ``nvidia.com/mig-<profile>``)
and two annotations (docs/extender.md): ``gpuplace.io/require-topology`` (``none``, ``numa``,
``pcie-switch`` or ``nvlink``: all of a multi-GPU pod's GPUs on one NUMA node, under one PCIe switch,
or in one NVLink island) and ``gpuplace.io/gpu-models`` (accepted GPU models). Which GPUs of a node
the pod gets is the planner's choice (:func:`gpuplace.planner.placement.best_gpu_set`, the tightest
group of the best tier); how good that is, is the planner's GPU-fit score
(:func:`~gpuplace.planner.placement.fit_score`, with latency and memory terms at their best because
the extender knows no SLO) and the increase of the node's FGD fragmentation
(:class:`~gpuplace.planner.fragmentation.FragmentationModel`). :func:`scores` turns fits into the
0–10 priorities kube-scheduler takes. Pure functions.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gpuplace import labels as L
from gpuplace.errors import InvalidInput, UnknownName
from gpuplace.inventory.cluster import quantity
from gpuplace.planner.fragmentation import MILLI, FragmentationModel, gpuplace_key
from gpuplace.planner.hardware import TIERS
from gpuplace.planner.placement import EPS, best_gpu_set, cpu_free_milli, fit_score, gpu_type_of, tier_of
from gpuplace.types import GpuDevice, Node
from gpuplace.types.extender import TOPOLOGY_REQUIREMENTS, GpuRequest, NodeFit

TOPOLOGY_ANNOTATION = "gpuplace.io/require-topology"
MODELS_ANNOTATION = "gpuplace.io/gpu-models"
# Owned by the extender: the devices it gave the pod, written before the pod is bound.
ASSIGNMENT_ANNOTATION = "gpuplace.io/gpu-assignment"
MAX_PRIORITY = 10  # k8s.io/kube-scheduler/extender/v1 MaxExtenderPriority
GROUP_NAMES: Mapping[str, str] = {
    "none": "node",
    "numa": "NUMA node",
    "pcie-switch": "PCIe switch",
    "nvlink": "NVLink island",
}


def _gpu_amounts(containers: Iterable[Mapping[str, Any]], where: str) -> dict[str, int]:
    total: dict[str, int] = {}
    for i, c in enumerate(containers):
        res = c.get("resources") or {}
        # Extended resources have requests == limits; a limit alone implies the request.
        merged = {**(res.get("requests") or {}), **(res.get("limits") or {})}
        for key, value in merged.items():
            key = str(key)
            if key != L.GPU_RESOURCE and not key.startswith(L.MIG_RESOURCE_PREFIX):
                continue
            field = f"pod.spec.{where}[{i}].resources.{key}"
            try:
                amount = quantity(value, field)
            except InvalidInput:
                raise
            except ValueError:  # quantity() lets "." and "1.2.3" through its pattern to float()
                raise InvalidInput(field, value, "is not a Kubernetes quantity", "e.g. 1") from None
            if amount != int(amount):
                raise InvalidInput(field, value, "GPUs are whole devices", "Ask for a whole number, e.g. 1")
            total[key] = total.get(key, 0) + int(amount)
    return total


def pod_request(pod: Mapping[str, Any]) -> GpuRequest:
    """The GPU request of a pod object (a dict as the API serves it); :class:`InvalidInput` if malformed."""
    spec = pod.get("spec") or {}
    amounts = _gpu_amounts(spec.get("containers") or (), "containers")
    # Init containers run one at a time before the others: the pod needs the larger of the two.
    for key, n in _gpu_amounts(spec.get("initContainers") or (), "initContainers").items():
        amounts[key] = max(amounts.get(key, 0), n)
    wanted = {k: n for k, n in amounts.items() if n}
    if len(wanted) > 1:
        raise InvalidInput(
            "pod.spec.containers[].resources",
            sorted(wanted),
            "asks for more than one kind of GPU resource",
            "Ask for nvidia.com/gpu or one nvidia.com/mig-<profile>",
        )
    resource, count = next(iter(wanted.items())) if wanted else (L.GPU_RESOURCE, 0)
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    topology = str(annotations.get(TOPOLOGY_ANNOTATION, "none")).strip() or "none"
    if topology not in TOPOLOGY_REQUIREMENTS:
        raise UnknownName(f"pod.metadata.annotations[{TOPOLOGY_ANNOTATION}]", topology, TOPOLOGY_REQUIREMENTS)
    models = tuple(
        sorted(
            {m.strip().lower() for m in str(annotations.get(MODELS_ANNOTATION, "")).split(",") if m.strip()}
        )
    )
    return GpuRequest(resource=resource, count=count, topology=topology, models=models)


def _free_milli(node: Node, change: Mapping[str, float]) -> list[int]:
    """Free milli-GPU per whole GPU of the node, as FGD counts it (MIG slices are fixed partitions)."""
    return [round(max(0.0, g.free - change.get(g.id, 0.0)) * MILLI) for g in node.gpus if not g.mig_profile]


def _groups(units: Sequence[GpuDevice], topology: str) -> list[list[GpuDevice]]:
    """The device groups a set must stay inside under ``topology``; devices of unknown grouping drop out."""
    if topology == "none":
        return [list(units)]
    keyed: dict[object, list[GpuDevice]] = {}
    for g in units:
        key: object
        if topology == "numa":
            key = g.numa_node
        elif topology == "pcie-switch":
            key = (g.numa_node, g.pcie_switch) if g.pcie_switch else None
        else:
            key = g.nvlink_island or None
        if key is not None:
            keyed.setdefault(key, []).append(g)
    return list(keyed.values())


def _fail(node: Node, reason: str, *, unresolvable: bool) -> NodeFit:
    return NodeFit(node.name, reason=f"gpuplace: {reason}", unresolvable=unresolvable)


def node_fit(node: Node, req: GpuRequest, frag: FragmentationModel) -> NodeFit:
    """Whether ``node`` (with its current allocations) can take ``req``, on which devices, and how well."""
    if req.count == 0:
        return NodeFit(node.name, fit_score=1.0, interconnect="single")
    devices = list(node.gpus)
    profile = L.mig_profile_of(req.resource)
    if not devices:
        return _fail(
            node, "node has no GPUs (no GPU labels or allocatable nvidia.com/gpu)", unresolvable=True
        )
    if req.models:
        devices = [g for g in devices if g.gpu.lower() in req.models or g.product.lower() in req.models]
        if not devices:
            have = ", ".join(sorted({g.gpu or g.product for g in node.gpus}))
            return _fail(node, f"no GPU of model {'|'.join(req.models)} (node has {have})", unresolvable=True)
    if profile:
        units = [g for g in devices if g.mig_profile == profile and node.mig_strategy == "mixed"]
    elif node.mig_strategy == "single":
        units = [g for g in devices if g.mig_profile]
    else:
        units = [g for g in devices if not g.mig_profile]
    capacity = len(units) * (node.gpu_sharing if not profile else 1)
    if capacity < req.count:
        return _fail(
            node, f"node has {capacity} {req.resource}, the pod asks for {req.count}", unresolvable=True
        )
    if node.gpu_sharing > 1 and not profile:
        return _shared_fit(node, units, req, frag)
    label = GROUP_NAMES[req.topology]
    if not any(len(grp) >= req.count for grp in _groups(units, req.topology)):
        return _fail(node, f"no {label} with {req.count} GPUs", unresolvable=True)
    free = [g for g in units if g.allocated <= EPS]
    if profile:
        chosen: tuple[GpuDevice, ...] | None = (
            tuple(sorted(free, key=lambda g: (g.index, g.id))[: req.count])
            if len(free) >= req.count
            else None
        )
        interconnect = "mig"
    else:
        options = []
        for grp in _groups(free, req.topology):
            found = best_gpu_set(grp, req.count)
            if found:
                options.append((TIERS.index(tier_of(found)), len(grp), tuple(g.index for g in found), found))
        chosen = min(options, key=lambda o: o[:3])[3] if options else None
        interconnect = tier_of(chosen) if chosen else ""
    if chosen is None:
        return _fail(
            node,
            f"{len(free)} of {len(units)} GPUs free, none with {req.count} free in one {label}",
            unresolvable=False,
        )
    change = {g.id: 1.0 for g in chosen}
    return _scored(node, chosen, interconnect, change, frag, float(req.count))


def _shared_fit(node: Node, units: Sequence[GpuDevice], req: GpuRequest, frag: FragmentationModel) -> NodeFit:
    """A time-sliced node: each GPU is ``gpu_sharing`` slots; fill the fullest GPUs first, as the planner."""
    if req.count > 1 and req.topology != "none":
        return _fail(node, "time-sliced GPUs give no exclusive topology", unresolvable=True)
    slot = 1.0 / node.gpu_sharing
    left = {g.id: round(g.free / slot) for g in units}
    chosen: list[GpuDevice] = []
    for g in sorted(units, key=lambda d: (left[d.id] == 0, left[d.id], d.index)):
        take = min(left[g.id], req.count - len(chosen))
        chosen += [g] * take
        if len(chosen) == req.count:
            break
    if len(chosen) < req.count:
        free_slots = sum(left.values())
        return _fail(
            node, f"{free_slots} time-sliced GPU slots free, the pod asks for {req.count}", unresolvable=False
        )
    change: dict[str, float] = {}
    for g in chosen:
        change[g.id] = change.get(g.id, 0.0) + slot
    return _scored(node, tuple(chosen), "shared", change, frag, req.count * slot)


def _scored(
    node: Node,
    chosen: tuple[GpuDevice, ...],
    interconnect: str,
    change: Mapping[str, float],
    frag: FragmentationModel,
    gpus: float,
) -> NodeFit:
    delta = 0.0
    if interconnect != "mig":  # a MIG slice is a fixed partition: taking it changes no GPU's free share
        cpu, gpu_type = cpu_free_milli(node), gpu_type_of(node)
        after = frag.node(_free_milli(node, change), cpu, gpu_type)
        delta = (after - frag.node(_free_milli(node, {}), cpu, gpu_type)) / MILLI
    left = sum(_free_milli(node, change)) / MILLI
    return NodeFit(
        node=node.name,
        devices=tuple(g.id for g in chosen),
        interconnect=interconnect,
        fit_score=fit_score(0.0, 0.0, interconnect, delta, gpus),
        frag_delta_gpus=delta,
        gpus_left=left,
    )


def rank_key(fit: NodeFit) -> tuple[float, ...]:
    """Better first: higher GPU-fit score, the planner's fragmentation order
    (:func:`~gpuplace.planner.fragmentation.gpuplace_key`), fewer GPUs left (packing)."""
    frag = gpuplace_key(fit.frag_delta_gpus * MILLI, cpu_only=False, spare_cpu=0.0)
    return (-round(fit.fit_score, 6), *frag, round(fit.gpus_left, 6))


def scores(fits: Iterable[NodeFit], keys: Sequence[tuple[float, ...] | None] | None = None) -> dict[str, int]:
    """Priorities 0–10 by dense rank: the best fits get 10, each worse distinct fit one less, misfits 0.

    Ranks rather than a linear scale so the best node always beats the runner-up by a whole step, however
    close their fragmentation figures are; kube-scheduler multiplies the step by the extender's weight.
    ``keys``: the fits' :func:`rank_key` when already known (the extender's state keeps them).
    """
    fits = list(fits)
    if keys is None:
        keys = [rank_key(f) if f.fits else None for f in fits]
    rank = {k: i for i, k in enumerate(sorted({k for k in keys if k is not None}))}
    return {
        f.node: (max(0, MAX_PRIORITY - rank[k]) if k is not None else 0)
        for f, k in zip(fits, keys, strict=True)
    }


def assignment_annotation(node: str, devices: Sequence[str]) -> str:
    """The value of :data:`ASSIGNMENT_ANNOTATION`: the node and the device ids it gave the pod."""
    return json.dumps({"node": node, "devices": list(devices)}, separators=(",", ":"))


def read_assignment(annotations: Mapping[str, str] | None, node: str) -> tuple[str, ...]:
    """Device ids recorded on a pod for ``node``; () when absent, for another node, or unreadable."""
    raw = (annotations or {}).get(ASSIGNMENT_ANNOTATION)
    if not raw:
        return ()
    try:
        doc = json.loads(raw)
        if doc.get("node") != node:
            return ()
        return tuple(str(d) for d in doc.get("devices") or ())
    except (ValueError, AttributeError, TypeError):
        return ()
