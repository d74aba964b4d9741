"""The plan step as the CLI and the ``plan_placement`` component run it: files in, plan folder out.

Reads the profile and the inventory, builds the :class:`PlanRequest` from plain parameters, plans,
renders the manifests and writes the plan folder; returns what the callers print or log. The one place
(with :mod:`gpuplace.planner.io`) where the planner touches files.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gpuplace.errors import InvalidInput
from gpuplace.planner.fragmentation import DEFAULT_LLM_MIX, FleetWorkload, fleet_workload, parse_mix
from gpuplace.types.plan import PlacementPlan

# The pod list published with the Alibaba trace's node list, beside it (shared/data/README.md).
TRACE_POD_LIST = "openb_pod_list_default.csv"


@dataclass(frozen=True, slots=True)
class PlanStepResult:
    plan: PlacementPlan
    plan_id: str
    plan_dir: Path
    kfp: Mapping[str, Any]
    metrics: Mapping[str, float]
    candidates_markdown: str


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
    *,
    profile_path: Path,
    inventory: str,
    model: str,
    slo_tpot_ms: float,
    slo_ttft_ms: float,
    rate: float,
    out: Path,
    prompt_tokens: int = 512,
    output_tokens: int = 128,
    fit_threshold: float = 0.85,
    kinds: str = "whole,mig,shared",
    gpus: str = "",
    prices: Mapping[str, float] | None = None,
    gpu_catalog: str | None = None,
    task_mix: str = "",
    breach_penalty_usd: float = 0.0,
    deployment_name: str = "",
    image: str = "",
    model_path: str = "",
    numa_align: bool = False,
    priority_class: str = "",
    workload: str = "",
) -> PlanStepResult:
    from gpuplace.catalog import load_gpu_catalog
    from gpuplace.inventory import load_inventory
    from gpuplace.manifests import VLLM_IMAGE, ServingOptions, build_manifests, kfp_fragments
    from gpuplace.planner import PlanRequest, plan_placement
    from gpuplace.planner.io import candidates_table, write_plan_dir
    from gpuplace.profiling import load_profile
    from gpuplace.types.plan import Slo

    if not profile_path.is_file():
        raise InvalidInput(
            "profile", str(profile_path), "no such file", "Run `gpuplace profile --out <file>.parquet` first"
        )
    slo = Slo(
        tpot_p99_s=slo_tpot_ms / 1000,
        ttft_p99_s=slo_ttft_ms / 1000,
        rate_rps=rate,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
    )
    catalog = load_gpu_catalog(gpu_catalog)
    price_map = {catalog.get(name, field="prices").name: float(v) for name, v in (prices or {}).items()}
    fleet = load_inventory(inventory, catalog=catalog)
    mix = plan_workload(inventory, task_mix, workload)
    request = PlanRequest(
        model=model,
        slo=slo,
        deployment_name=deployment_name,
        fit_threshold=fit_threshold,
        prices_usd_per_hour=price_map,
        kinds=tuple(k.strip() for k in kinds.split(",") if k.strip()),
        gpus=tuple(catalog.get(g.strip(), field="gpus").name for g in gpus.split(",") if g.strip()),
        task_mix=mix.mix,
        task_mix_source=mix.source,
        task_mix_tasks=mix.tasks,
        breach_penalty_usd=breach_penalty_usd,
    )
    options = ServingOptions(
        image=image or VLLM_IMAGE, model_path=model_path, numa_align=numa_align, priority_class=priority_class
    )
    plan = plan_placement(load_profile(profile_path), fleet, catalog, request)
    if mix.detail:
        plan = replace(plan, notes=(*plan.notes, f"fragmentation workload: {mix.source} ({mix.detail})"))
    manifests = build_manifests(plan, fleet, options)
    write_plan_dir(plan, fleet, out, manifests)
    return PlanStepResult(
        plan=plan,
        plan_id=plan.plan_id,
        plan_dir=out,
        kfp=kfp_fragments(plan, fleet),
        metrics=plan_metrics(plan),
        candidates_markdown=candidates_table(plan),
    )
