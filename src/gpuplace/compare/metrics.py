"""Per-path metrics of the native-vs-Kubeflow comparison, as pure functions of the records.

Each figure is defined in docs/comparison.md: provisioning latency (created → first successful request)
from the deployment record, latency and goodput from the load-test report, and GPU-hours per 1k
requests, monthly cost and FGD fragmentation of the fleet from the placement the deploy *measured*: the
DRA-allocated devices, or at node level the node and the GPU count of the pods' limits. What the
measurement cannot give is NaN with a note (fragmentation at node level; everything GPU on the local
target) — the plan's figures are never used in its place. The prediction error is computed only when
the requests were served by the GPU the prediction is for. Nothing here reads files or talks to a
server; fragmentation is computed by a function passed in (the planner's FGD).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from gpuplace.catalog import GpuCatalog
from gpuplace.labels import GPU_RESOURCE, MIG_RESOURCE_PREFIX
from gpuplace.types import DeploymentRecord, GpuDevice, Inventory
from gpuplace.types.catalog import GpuSpec
from gpuplace.types.compare import PathMetrics
from gpuplace.types.latency import PredictedVsMeasured
from gpuplace.types.loadtest import LatencyReport, RequestResult
from gpuplace.types.plan import PlacementPlan
from gpuplace.units import HOURS_PER_MONTH

FragmentationFn = Callable[[Inventory], float]


@dataclass(frozen=True, slots=True)
class PathResult:
    """One orchestration path's inputs: where it deployed and what the load test measured."""

    path: str
    deployment: DeploymentRecord
    report: LatencyReport
    records: tuple[RequestResult, ...] = ()  # the report's per-request records: the noise is theirs


def provisioning_s(deployment: DeploymentRecord) -> float:
    """First pod created → last pod ready to serve (its first successful request): how long until every
    replica serves; NaN if that was not observed for a pod."""
    pods = deployment.pods
    if not pods or any(math.isnan(p.serving_at_s) or math.isnan(p.created_at_s) for p in pods):
        return math.nan
    return max(p.serving_at_s for p in pods) - min(p.created_at_s for p in pods)


def gpu_hours_per_1k_requests(gpus: float, wall_s: float, completed: int) -> float:
    """Allocated GPUs × wall hours ÷ completed requests × 1000 (DESIGN.md); inf when none completed, NaN
    when the GPUs held are unknown."""
    if math.isnan(gpus):
        return math.nan
    if completed <= 0:
        return math.inf
    return gpus * (wall_s / 3600.0) / completed * 1000.0


def requests_per_month(rate_rps: float) -> float:
    return rate_rps * 3600.0 * HOURS_PER_MONTH


def sla_breaches_per_month(slo_attainment: float, rate_rps: float) -> float:
    """Expected requests per month that miss the SLO: (1 − attainment) × rate × seconds per month."""
    return (1.0 - slo_attainment) * requests_per_month(rate_rps)


def sla_breach_cost_usd_per_month(breaches_per_month: float, penalty_usd_per_breach: float) -> float:
    return breaches_per_month * penalty_usd_per_breach


def prediction_applies(deployment: DeploymentRecord, plan: PlacementPlan | None) -> bool:
    """Whether the plan's latency prediction is for the device that served this path's requests."""
    return plan is not None and plan.prediction_for(deployment.served_on) is not None


@dataclass(frozen=True, slots=True)
class HeldGpus:
    """The GPUs a path held, from its measured placement: device ids with the share each is held at
    (DRA), or per-node counts (device plugin: which devices is not known)."""

    devices: Mapping[str, float]  # inventory id → share held (1 whole, 1/replicas of a time-sliced GPU)
    by_node: Mapping[str, tuple[str, float]]  # node → (GPU resource, GPUs × share) at node level
    level: str  # "device", "node", "mixed", "none"

    @property
    def count(self) -> float:
        return math.fsum(self.devices.values()) + math.fsum(n for _, n in self.by_node.values())


def _share(fleet: Inventory | None, node: str, resource: str) -> float:
    """The share of a GPU one unit of ``resource`` is on ``node``: 1/replicas of a time-sliced GPU."""
    if fleet is None or resource != GPU_RESOURCE:
        return 1.0
    try:
        return 1.0 / max(1, fleet.node(node).gpu_sharing)
    except KeyError:
        return 1.0


def held_gpus(deployment: DeploymentRecord, fleet: Inventory | None) -> HeldGpus:
    """What the pods hold, as measured; nothing is taken from the plan."""
    devices: dict[str, float] = {}
    by_node: dict[str, tuple[str, float]] = {}
    levels = set()
    for p in deployment.pods:
        if p.gpu_ids:
            levels.add("device")
            for g in p.gpu_ids:
                devices[g] = devices.get(g, 0.0) + 1.0
        elif p.gpu_count and p.node:
            levels.add("node")
            resource, n = by_node.get(p.node, (p.gpu_resource, 0.0))
            by_node[p.node] = (resource, n + p.gpu_count * _share(fleet, p.node, p.gpu_resource))
    level = "mixed" if len(levels) > 1 else (levels.pop() if levels else "none")
    return HeldGpus(devices, by_node, level)


def fleet_after(fleet: Inventory, held: Mapping[str, float]) -> Inventory:
    """The fleet with each held device's share added to what it already had in use (a pure copy)."""

    def take(g: GpuDevice) -> GpuDevice:
        return replace(g, allocated=min(1.0, g.allocated + held[g.id])) if g.id in held else g

    nodes = tuple(replace(n, gpus=tuple(take(g) for g in n.gpus)) for n in fleet.nodes)
    return replace(fleet, nodes=nodes)


def _price_share(spec: GpuSpec, mig_profile: str) -> float:
    if not mig_profile:
        return 1.0
    profile = next(m for m in spec.mig_profiles if m.name == mig_profile)
    return profile.compute_slices / spec.compute_slices


def monthly_cost_usd(fleet: Inventory, held: HeldGpus, catalog: GpuCatalog) -> float:
    """Catalog price × 730 h of what was held: each device at its share (a MIG slice at its share of compute
    slices); at node level the node's GPU model × count × share. NaN when a GPU is not in the fleet."""
    devices = {g.id: g for _, g in fleet.devices()}
    total = 0.0
    for gid, share in held.devices.items():
        g = devices.get(gid)
        if g is None or not g.gpu:
            return math.nan
        spec = catalog.get(g.gpu)
        total += spec.price_usd_per_hour * _price_share(spec, g.mig_profile) * share
    for node, (resource, count) in held.by_node.items():
        try:
            gpus = fleet.node(node).gpus
        except KeyError:
            return math.nan
        profile = (
            resource.removeprefix(MIG_RESOURCE_PREFIX) if resource.startswith(MIG_RESOURCE_PREFIX) else ""
        )
        models = {g.gpu for g in gpus if g.mig_profile == profile} or {g.gpu for g in gpus}
        if len(models) != 1 or "" in models:
            return math.nan  # a node of several GPU models: which one the device plugin gave is unknown
        spec = catalog.get(models.pop())
        total += spec.price_usd_per_hour * _price_share(spec, profile) * count
    return total * HOURS_PER_MONTH


def _cost(
    held: HeldGpus, fleet: Inventory | None, catalog: GpuCatalog | None, notes: list[str]
) -> tuple[float, str]:
    """(monthly cost, where its prices came from) of what was held; NaN and "" when unknown, noting why."""
    cost, cost_source = math.nan, ""
    if held.level != "none" and fleet is not None and catalog is not None:
        cost = monthly_cost_usd(fleet, held, catalog)
        cost_source = {
            "device": "catalog prices of the allocated devices",
            "node": "catalog price of each node's GPU × GPUs in the pods' limits (node level)",
        }.get(held.level, "catalog prices (devices and node level)")
        if math.isnan(cost):
            cost_source = ""
            notes.append("cost unknown: a held GPU is not in the fleet, or its node has several GPU models")
    return cost, cost_source


def _fragmentation(
    held: HeldGpus, fleet: Inventory | None, fragmentation: FragmentationFn | None, notes: list[str]
) -> tuple[float, str, float]:
    """(fleet FGD after the held devices, its source, that per fleet GPU); NaN when unknown, noting why."""
    frag, frag_source, ratio = math.nan, "", math.nan
    if held.level == "device" and fleet is not None and fragmentation is not None:
        if all(g in {d.id for _, d in fleet.devices()} for g in held.devices):
            frag, frag_source = (
                fragmentation(fleet_after(fleet, held.devices)),
                "FGD of the fleet after the allocated devices",
            )
        else:
            notes.append("fragmentation unknown: an allocated device is not in the fleet")
    elif held.level in ("node", "mixed"):
        notes.append(
            "fragmentation unknown: the device plugin does not say which GPUs it gave (node level only)"
        )
    if fleet is not None and fleet.gpu_count:
        ratio = frag / fleet.gpu_count
    return frag, frag_source, ratio


def path_metrics(
    result: PathResult,
    *,
    plan: PlacementPlan | None,
    fleet: Inventory | None,
    catalog: GpuCatalog | None,
    fragmentation: FragmentationFn | None,
    penalty_usd_per_breach: float,
) -> PathMetrics:
    """Every comparison figure of one path (docs/comparison.md#metrics), from what was measured."""
    dep, rep = result.deployment, result.report
    notes: list[str] = []
    held = held_gpus(dep, fleet)
    gpus = held.count if held.level != "none" else math.nan
    if held.level == "none":
        notes.append(
            "no GPUs held through Kubernetes (local serving): GPU-hours, cost and fragmentation unknown"
        )

    cost, cost_source = _cost(held, fleet, catalog, notes)
    frag, frag_source, ratio = _fragmentation(held, fleet, fragmentation, notes)

    rate = rep.slo.rate_rps if rep.slo.rate_rps is not None else rep.request_throughput_rps
    breaches = sla_breaches_per_month(rep.slo_attainment, rate)
    predicted = plan.prediction if plan is not None else None
    applies = prediction_applies(dep, plan)
    if predicted is not None and plan is not None and not applies:
        notes.append(
            f"the prediction is for {plan.chosen.unit}; the requests were served on "
            f"{dep.served_on or 'an unknown device'}: no prediction error"
        )
    if dep.target == "local":
        notes.append("served by the local target (one process on this machine), not a Kubernetes cluster")
    return PathMetrics(
        path=result.path,
        serving_target=dep.target,
        provisioning_s=provisioning_s(dep),
        provisioning=dep.provisioning(),
        latency=PredictedVsMeasured.of(predicted, rep, applies=applies),
        goodput_rps=rep.goodput_rps,
        request_throughput_rps=rep.request_throughput_rps,
        completed=rep.completed,
        failed=rep.failed,
        slo_attainment=rep.slo_attainment,
        gpus=gpus,
        gpu_hours_per_1k_requests=gpu_hours_per_1k_requests(gpus, rep.duration_s, rep.completed),
        cost_usd_per_month=cost,
        fragmentation_gpus=frag,
        fragmentation_ratio=ratio,
        sla_breaches_per_month=breaches,
        sla_breach_cost_usd_per_month=sla_breach_cost_usd_per_month(breaches, penalty_usd_per_breach),
        misplaced_pods=sum(1 for p in dep.pods if p.misplaced),
        cost_source=cost_source,
        fragmentation_source=frag_source,
        notes=tuple(notes),
        placement_level=held.level,
        nodes=tuple(p.node for p in dep.pods),
        gpu_ids=tuple(sorted(held.devices)),
        served_on=dep.served_on,
        prediction_for=plan.chosen.unit if plan is not None else "",
    )
