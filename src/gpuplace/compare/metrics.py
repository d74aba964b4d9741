"""Per-path metrics of the native-vs-Kubeflow comparison, as pure functions of the records.

Each figure is defined in docs/comparison.md: provisioning latency from the deployment record, latency
and goodput from the load-test report, GPU-hours per 1k requests, monthly cost, FGD fragmentation of
the fleet after this path's placement, expected SLA-breach cost, and predicted-vs-measured error.
Nothing here reads files or talks to a server; fragmentation is computed by a function passed in
(the planner's FGD), so the same code runs in tests with a hand-written one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from gpuplace.catalog import GpuCatalog
from gpuplace.loadtest.metrics import prediction_error as _prediction_rows
from gpuplace.types import DeploymentRecord, GpuDevice, Inventory
from gpuplace.types.compare import PathMetrics
from gpuplace.types.loadtest import LatencyReport
from gpuplace.types.plan import PlacementPlan, Prediction
from gpuplace.units import HOURS_PER_MONTH

FragmentationFn = Callable[[Inventory], float]


@dataclass(frozen=True, slots=True)
class PathResult:
    """One orchestration path's inputs: where it deployed and what the load test measured."""

    path: str
    deployment: DeploymentRecord
    report: LatencyReport


def provisioning_s(deployment: DeploymentRecord) -> float:
    """First pod created → last pod ready: how long until every replica serves; NaN if one never did."""
    pods = deployment.pods
    if not pods or any(math.isnan(p.ready_at_s) for p in pods):
        return math.nan
    return max(p.ready_at_s for p in pods) - min(p.created_at_s for p in pods)


def gpu_hours_per_1k_requests(gpus: int, wall_s: float, completed: int) -> float:
    """Allocated GPUs × wall hours ÷ completed requests × 1000 (DESIGN.md); inf when none completed."""
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


def mean_abs_prediction_error(report: LatencyReport, predicted: Prediction | None) -> float:
    """Mean of |measured − predicted| / predicted over p99 TTFT and p99 TPOT; NaN without a prediction."""
    if predicted is None:
        return math.nan
    rows = _prediction_rows(report, predicted)
    errors = [abs(r["error"]) for k, r in rows.items() if k.endswith("p99_s") and not math.isnan(r["error"])]
    return sum(errors) / len(errors) if errors else math.nan


def latency_predictability(report: LatencyReport) -> float:
    """Mean of p50/p99 over TTFT and TPOT: 1 when the tail equals the median, towards 0 as it grows."""
    ratios = [d.p50 / d.p99 for d in (report.ttft, report.tpot) if d.count and d.p99 > 0]
    return sum(ratios) / len(ratios) if ratios else math.nan


def allocated_gpu_ids(
    deployment: DeploymentRecord, plan: PlacementPlan | None
) -> tuple[tuple[str, ...], str]:
    """The GPU ids this path holds, and where they came from: the pods' own, else the plan's."""
    from_pods = tuple(g for p in deployment.pods for g in p.gpu_ids)
    if from_pods:
        return from_pods, "measured placement"
    if plan is not None and plan.placements:
        return tuple(g for p in plan.placements for g in p.gpu_ids), "plan"
    return (), ""


def fleet_after(fleet: Inventory, gpu_ids: Sequence[str]) -> Inventory:
    """The fleet with ``gpu_ids`` marked fully allocated (a pure copy; unknown ids are ignored)."""
    taken = set(gpu_ids)

    def take(g: GpuDevice) -> GpuDevice:
        return replace(g, allocated=1.0) if g.id in taken else g

    nodes = tuple(replace(n, gpus=tuple(take(g) for g in n.gpus)) for n in fleet.nodes)
    return replace(fleet, nodes=nodes)


def monthly_cost_usd(fleet: Inventory, gpu_ids: Sequence[str], catalog: GpuCatalog) -> float:
    """Catalog price of the held GPUs × 730 h; a MIG slice costs its share of compute slices."""
    devices = {g.id: g for _, g in fleet.devices()}
    total = 0.0
    for gid in gpu_ids:
        g = devices[gid]
        spec = catalog.get(g.gpu)
        share = 1.0
        if g.mig_profile:
            profile = next(m for m in spec.mig_profiles if m.name == g.mig_profile)
            share = profile.compute_slices / spec.compute_slices
        total += spec.price_usd_per_hour * share
    return total * HOURS_PER_MONTH


def path_metrics(
    result: PathResult,
    *,
    plan: PlacementPlan | None,
    fleet: Inventory | None,
    catalog: GpuCatalog | None,
    fragmentation: FragmentationFn | None,
    penalty_usd_per_breach: float,
) -> PathMetrics:
    """Every comparison figure of one path (docs/comparison.md#metrics)."""
    dep, rep = result.deployment, result.report
    notes: list[str] = []
    gpu_ids, gpu_source = allocated_gpu_ids(dep, plan)
    known_ids = {g.id for _, g in fleet.devices()} if fleet is not None else set()
    in_fleet = bool(gpu_ids) and all(g in known_ids for g in gpu_ids)
    gpus = len(gpu_ids) if gpu_ids else max(len(dep.pods), 1)
    if not gpu_ids:
        notes.append(f"no GPU ids in the deployment or the plan: counted {gpus} GPU per pod")

    cost, cost_source = math.nan, ""
    if in_fleet and fleet is not None and catalog is not None:
        cost, cost_source = monthly_cost_usd(fleet, gpu_ids, catalog), f"catalog prices ({gpu_source})"
    elif plan is not None and not math.isnan(plan.cost_usd_per_month):
        cost, cost_source = plan.cost_usd_per_month, "plan"

    frag, frag_source, ratio = math.nan, "", math.nan
    if in_fleet and fleet is not None and fragmentation is not None:
        frag, frag_source = fragmentation(fleet_after(fleet, gpu_ids)), f"FGD of the fleet ({gpu_source})"
    elif plan is not None and not math.isnan(plan.fragmentation_after):
        frag, frag_source = plan.fragmentation_after, "plan"
    if fleet is not None and fleet.gpu_count:
        ratio = frag / fleet.gpu_count

    rate = rep.slo.rate_rps if rep.slo.rate_rps is not None else rep.request_throughput_rps
    breaches = sla_breaches_per_month(rep.slo_attainment, rate)
    predicted = plan.prediction if plan is not None else None
    if dep.target == "local":
        notes.append("served by the local target (one process on this machine), not a Kubernetes cluster")
    return PathMetrics(
        path=result.path,
        serving_target=dep.target,
        provisioning_s=provisioning_s(dep),
        provisioning_p50_s=dep.provisioning().p50,
        ttft_p50_s=rep.ttft.p50,
        ttft_p99_s=rep.ttft.p99,
        tpot_p50_s=rep.tpot.p50,
        tpot_p99_s=rep.tpot.p99,
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
        prediction_error=mean_abs_prediction_error(rep, predicted),
        latency_predictability=latency_predictability(rep),
        misplaced_pods=len(dep.mismatches()),
        cost_source=cost_source,
        fragmentation_source=frag_source,
        notes=tuple(notes),
    )
