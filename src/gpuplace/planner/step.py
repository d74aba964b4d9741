"""The plan step as ``gpuplace plan`` and the ``plan_placement`` component run it: files in, plan dir out.

Reads the profile and the inventory, plans (:func:`gpuplace.planner.plan_placement`, pure), attaches the
serving spec every path will run, renders the manifests from it and writes the plan directory through
:mod:`gpuplace.plandir`; returns what the callers print or log. The planner's only contact with files.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuplace.errors import InvalidInput
from gpuplace.plandir import PlanDir
from gpuplace.planner.fragmentation import DEFAULT_LLM_MIX, FleetWorkload, fleet_workload, parse_mix
from gpuplace.types.plan import PlacementPlan

# The pod list published with the Alibaba trace's node list, beside it (shared/data/README.md).
TRACE_POD_LIST = "openb_pod_list_default.csv"

if TYPE_CHECKING:
    from gpuplace.catalog import GpuCatalog
    from gpuplace.manifests import ServingOptions
    from gpuplace.planner.request import PlanRequest


@dataclass(frozen=True, slots=True)
class PlanStepResult:
    plan_dir: PlanDir
    metrics: Mapping[str, float]
    candidates_markdown: str

    @property
    def plan(self) -> PlacementPlan:
        return self.plan_dir.plan

    @property
    def kfp(self) -> Mapping[str, Any]:
        return self.plan_dir.kfp


def plan_metrics(plan: PlacementPlan) -> dict[str, float]:
    pred = plan.chosen.prediction
    values = {
        "replicas": float(plan.replicas),
        "gpus": float(plan.replicas * plan.chosen.gpus_per_replica),
        "tensor_parallel": float(plan.chosen.tp),
        "cost_usd_per_month": plan.cost_usd_per_month,
        "sla_breach_cost_usd_per_month": plan.sla_breach_cost_usd_per_month,
        "fit_score_min": plan.chosen.fit_score,
        "fragmentation_before_gpus": plan.fragmentation_before,
        "fragmentation_after_gpus": plan.fragmentation_after,
        "candidates": float(len(plan.candidates)),
    }
    if pred is not None:
        values |= {
            "predicted_ttft_p50_ms": pred.ttft_p50_s * 1000,
            "predicted_ttft_p99_ms": pred.ttft_p99_s * 1000,
            "predicted_tpot_p50_ms": pred.tpot_p50_s * 1000,
            "predicted_tpot_p99_ms": pred.tpot_p99_s * 1000,
        }
    return {k: v for k, v in values.items() if math.isfinite(v)}


def plan_workload(inventory: str, task_mix: str = "", workload: str = "") -> FleetWorkload:
    """The task mix fragmentation is measured against, in order of preference (docs/placement.md).

    ``--task-mix`` if given; the pod list ``workload`` (an Alibaba pod CSV) if given; for ``cluster``, the
    GPU pods running in it; for an Alibaba node CSV, the trace's pod list beside it; else — and whenever
    the source holds no GPU task — :data:`DEFAULT_LLM_MIX`, with the reason in ``detail``.
    """
    if task_mix:
        mix = parse_mix(task_mix)
        return FleetWorkload("given", mix, 0, "--task-mix")
    pods = Path(workload) if workload else None
    if pods is None and inventory.endswith(".csv") and (Path(inventory).parent / TRACE_POD_LIST).is_file():
        pods = Path(inventory).parent / TRACE_POD_LIST
    if pods is not None:
        from gpuplace.inventory.alibaba import read_alibaba_tasks

        shapes = [
            (t.num_gpu, t.gpu_milli, t.cpu_milli, frozenset(t.gpu_spec)) for t in read_alibaba_tasks(pods)
        ]
        return fleet_workload(shapes, "trace", detail=pods.name)
    if inventory == "cluster":
        from gpuplace.inventory.cluster import workload_from_cluster

        return fleet_workload(workload_from_cluster(), "cluster pods")
    return FleetWorkload(
        "default mix", DEFAULT_LLM_MIX, 0, f"the inventory {inventory!r} carries no workload"
    )


def run_plan_step(
    request: PlanRequest,
    *,
    profile: Path,
    inventory: str,
    out: Path,
    catalog: GpuCatalog,
    options: ServingOptions,
    workload: str = "",
) -> PlanStepResult:
    """Plan ``request`` on ``inventory`` with ``profile`` and write the plan directory ``out``.

    Fragmentation is measured against the request's given task mix, else the fleet's own workload
    (:func:`plan_workload`: the ``workload`` pod list, the cluster's pods, the trace's pod list)."""
    from gpuplace.inventory import load_inventory
    from gpuplace.manifests import build_manifests, kfp_fragments, serving_spec
    from gpuplace.plandir import write_plan_dir
    from gpuplace.planner import plan_placement
    from gpuplace.planner.tables import candidates_table
    from gpuplace.profiling import load_profile

    if not profile.is_file():
        raise InvalidInput(
            "profile", str(profile), "no such file", "Run `gpuplace profile --out <file>.parquet` first"
        )
    fleet = load_inventory(inventory, catalog=catalog)
    if request.task_mix_source != "given":
        mix = plan_workload(inventory, "", workload)
        request = replace(request, task_mix=mix.mix, task_mix_source=mix.source, task_mix_tasks=mix.tasks)
    else:
        mix = FleetWorkload("given", request.task_mix, 0, "--task-mix")
    plan = plan_placement(load_profile(profile), fleet, catalog, request)
    if mix.detail:
        plan = replace(plan, notes=(*plan.notes, f"fragmentation workload: {mix.source} ({mix.detail})"))
    plan = replace(plan, serving=serving_spec(plan, fleet, options))
    manifests = build_manifests(plan, fleet, options)
    table = candidates_table(plan)
    written = write_plan_dir(
        out,
        plan,
        manifests=manifests.apply,
        alternatives=manifests.alternatives,
        kfp=kfp_fragments(plan, fleet),
        candidates_md=table,
    )
    return PlanStepResult(plan_dir=written, metrics=plan_metrics(plan), candidates_markdown=table)
