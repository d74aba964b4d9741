"""The plan step, as ``gpuplace plan`` and the ``plan_placement`` component run it: files in, plan dir out.

Its parameters are :mod:`gpuplace.steps.plan_params`' table, read into the typed values
:func:`run_plan_step` takes (a :class:`~gpuplace.planner.PlanRequest`, the serving and emit options).
It reads the optional profile, the inventory (or, for ``local``, the local engine's measured steps), the
trace's lengths and the efficiency defaults, plans (:func:`gpuplace.planner.plan_placement` or
:func:`gpuplace.planner.plan_local`, pure), attaches the serving spec every path will run, renders the
manifests from it and writes the plan directory through :mod:`gpuplace.plandir`; returns what the
callers print or log. The planner's only contact with files.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuplace.errors import InvalidInput
from gpuplace.types.plan import (
    PlacementPlan,
)
from gpuplace.units import to_ms

# The pod list published with the Alibaba trace's node list, beside it (shared/data/README.md).
TRACE_POD_LIST = "openb_pod_list_default.csv"

if TYPE_CHECKING:  # the planner (numpy) and the plan directory (yaml): imported when the step runs
    from gpuplace.catalog import GpuCatalog
    from gpuplace.inventory import InventorySource
    from gpuplace.manifests import EmitOptions, ManifestSet, ServingOptions
    from gpuplace.plandir import PlanDir
    from gpuplace.planner.fragmentation import FleetWorkload
    from gpuplace.planner.local import LocalTarget
    from gpuplace.planner.request import PlanRequest
    from gpuplace.types import Inventory, LatencyProfile, ModelArch
    from gpuplace.types.operators import OperatorTable


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
            "predicted_ttft_p50_ms": to_ms(pred.ttft.p50),
            "predicted_ttft_p99_ms": to_ms(pred.ttft.p99),
            "predicted_tpot_p50_ms": to_ms(pred.tpot.p50),
            "predicted_tpot_p99_ms": to_ms(pred.tpot.p99),
        }
    return {k: v for k, v in values.items() if math.isfinite(v)}


def plan_workload(inventory: InventorySource, task_mix: str = "", workload: str = "") -> FleetWorkload:
    """The task mix fragmentation is measured against, in order of preference (docs/placement.md).

    ``--task-mix`` if given; the pod list ``workload`` (an Alibaba pod CSV) if given; for ``cluster``, the
    GPU pods running in it; for an Alibaba node CSV, the trace's pod list beside it; else — and whenever
    the source holds no GPU task — :data:`DEFAULT_LLM_MIX`, with the reason in ``detail``.
    """
    from gpuplace.planner.fragmentation import DEFAULT_LLM_MIX, FleetWorkload, fleet_workload, parse_mix

    if task_mix:
        mix = parse_mix(task_mix)
        return FleetWorkload("given", mix, 0, "--task-mix")
    pods = Path(workload) if workload else None
    beside = inventory.path.parent / TRACE_POD_LIST if inventory.path is not None else None
    if pods is None and inventory.kind == "alibaba" and beside is not None and beside.is_file():
        pods = beside
    if pods is not None:
        from gpuplace.inventory.alibaba import read_alibaba_tasks

        shapes = [
            (t.num_gpu, t.gpu_milli, t.cpu_milli, frozenset(t.gpu_spec)) for t in read_alibaba_tasks(pods)
        ]
        return fleet_workload(shapes, "trace", detail=pods.name)
    if inventory.kind == "cluster":
        from gpuplace.inventory.cluster import workload_from_cluster

        return fleet_workload(workload_from_cluster(), "cluster pods")
    return FleetWorkload(
        "default mix", DEFAULT_LLM_MIX, 0, f"the inventory {inventory.spec!r} carries no workload"
    )


def trace_lengths(path: str) -> tuple[tuple[int, int], ...]:
    """(prompt, output) tokens of every row of a trace (:func:`gpuplace.workload.read_trace`)."""
    from gpuplace.workload import read_trace

    return tuple((r.prompt_tokens, r.output_tokens) for r in read_trace(path))


def band_margins(path: str | None = None) -> dict[str, tuple[float, float]]:
    """Per GPU class, the (TTFT, TPOT) factors ``--margin band`` judges the SLO with: the slow (high) edge
    of the error band at heavy load (where capacity is decided) for the p99 where the benchmark has one,
    else the p50 (TPOT: or ITL), the class's own band, Hopper's for Blackwell, else the pooled one; never
    below 1."""
    from gpuplace.catalog.band import BORROWS, load_prediction_band
    from gpuplace.catalog.band_fit import POOLED
    from gpuplace.catalog.gpus import load_gpu_catalog

    band = load_prediction_band(path)
    classes = {g.architecture for g in load_gpu_catalog()} | {c for c, _, _ in band.edges} | set(BORROWS)
    out: dict[str, tuple[float, float]] = {}
    for cls in sorted(classes - {POOLED}):
        ttft, tpot = band.latency_edges(cls, "heavy")
        if ttft is None and tpot is None:
            continue
        # never below the prediction: a band whose rows all measured faster does not relax a plan
        out[cls] = (max(1.0, ttft.high if ttft else 1.0), max(1.0, tpot.high if tpot else 1.0))
    return out


def model_arch(model: str, profile: LatencyProfile | None) -> ModelArch:
    """The architecture to plan: the profile's, else the preset's (or config.json's, model dir's)."""
    if profile is not None:
        return profile.model
    from gpuplace.catalog import model_arch_from_config, resolve_model

    return model_arch_from_config(model, resolve_model(model).config)


def local_target(engine_steps: Path | None, arch: ModelArch, machine: Inventory) -> LocalTarget:
    """This machine (``machine``, the local inventory) as a planning target, from the local engine's
    measured steps."""
    from gpuplace.planner import LocalTarget
    from gpuplace.planner.engine import local_engine_params
    from gpuplace.profiling.engine_steps import read_engine_steps

    if engine_steps is None:
        raise InvalidInput(
            "engine_steps",
            None,
            "--inventory local plans with the local engine's measured step time",
            f"Measure it first: gpuplace profile --model {arch.name} --engine-steps --out steps.json, "
            "then pass --engine-steps steps.json",
        )
    steps = read_engine_steps(engine_steps)
    (node,) = machine.nodes
    unit = "cpu" if steps.device_kind == "cpu" else steps.device_name
    gpu_ids = () if unit == "cpu" else tuple(g.id for g in node.gpus[:1])
    return LocalTarget(node.name, unit, steps, local_engine_params(arch), gpu_ids)


def local_image(options: ServingOptions) -> str:
    """The image a plan for this machine runs in on a cluster node: the one given, unless it is a vLLM
    image (which serves no ``transformers serve``), else gpuplace's CPU serving image."""
    from gpuplace.images import CPU_IMAGE, SERVING_IMAGE
    from gpuplace.manifests import VLLM_IMAGE

    return CPU_IMAGE if options.image in (VLLM_IMAGE, SERVING_IMAGE) else options.image


def run_plan_step(
    request: PlanRequest,
    *,
    profile: Path | None,
    inventory: str,
    out: Path,
    catalog: GpuCatalog,
    options: ServingOptions,
    workload: str = "",
    engine_steps: Path | None = None,
    emit: EmitOptions | None = None,
    operators: Path | None = None,
) -> PlanStepResult:
    """Plan ``request`` on ``inventory`` and write the plan directory ``out``.

    ``profile`` (optional) calibrates the efficiencies of its own GPU model; without it every GPU is
    priced on the GPU-class defaults (loaded here, once). ``inventory`` ``local`` plans onto this
    machine with the local engine's measured ``engine_steps``. ``emit`` chooses the forms written
    (default: the manifests, DRA and KServe); a form that cannot express the plan is refused before
    anything is written. Fragmentation is measured against the
    request's given task mix, else the fleet's own workload (:func:`plan_workload`: the ``workload`` pod
    list, the cluster's pods, the trace's pod list)."""
    from gpuplace.catalog.efficiency import load_efficiency_table
    from gpuplace.inventory import inventory_source, load_inventory
    from gpuplace.manifests import EmitOptions, build_manifests, kfp_fragments, serving_spec
    from gpuplace.plandir import write_plan_dir
    from gpuplace.planner import plan_placement
    from gpuplace.planner.fragmentation import FleetWorkload
    from gpuplace.planner.tables import candidates_table

    measured, kernels, arch = _read_model_inputs(request.model, profile, operators)
    # what the request takes from files, each read once, added to it in one step
    read = _read_for_request(request)
    source = inventory_source(inventory)
    fleet = load_inventory(source, catalog=catalog)
    if fleet.is_local:
        return _run_local_plan(
            request,
            read,
            arch,
            fleet,
            engine_steps=engine_steps,
            operators=operators,
            options=options,
            out=out,
        )
    if request.task_mix_source != "given":
        mix = plan_workload(source, "", workload)
        read |= {"task_mix": mix.mix, "task_mix_source": mix.source, "task_mix_tasks": mix.tasks}
    else:
        mix = FleetWorkload("given", request.task_mix, 0, "--task-mix")
    request = replace(request, **read)
    plan = plan_placement(
        arch, fleet, catalog, request, efficiency=load_efficiency_table(), profile=measured, operators=kernels
    )
    if mix.detail:
        plan = replace(plan, notes=(*plan.notes, f"fragmentation workload: {mix.source} ({mix.detail})"))
    plan = replace(plan, serving=serving_spec(plan, fleet, options))
    emit = emit or EmitOptions()
    manifests = build_manifests(plan, fleet, options, emit)
    notes = _manifest_notes(plan, manifests, emit)
    if notes:
        plan = replace(plan, notes=(*plan.notes, *notes))
    table = candidates_table(plan)
    written = write_plan_dir(
        out,
        plan,
        manifests=manifests.apply,
        alternatives=manifests.alternatives,
        kfp=kfp_fragments(plan, fleet),
        candidates_md=table,
        forms=manifests.forms,
    )
    return PlanStepResult(plan_dir=written, metrics=plan_metrics(plan), candidates_markdown=table)


def _read_model_inputs(
    model: str, profile: Path | None, operators: Path | None
) -> tuple[LatencyProfile | None, OperatorTable | None, ModelArch]:
    """The measured profile and operator table (each when given) and the architecture of ``model``."""
    from gpuplace.profiling import load_profile
    from gpuplace.profiling.operator_table import read_operator_table

    if profile is not None and not profile.is_file():
        raise InvalidInput(
            "profile", str(profile), "no such file", "Run `gpuplace profile --out <file>.parquet` first"
        )
    measured = load_profile(profile) if profile is not None else None
    kernels = read_operator_table(operators) if operators is not None else None
    return measured, kernels, model_arch(model, measured)


def _read_for_request(request: PlanRequest) -> dict[str, Any]:
    """What the request takes from files (the trace's lengths, the band margins), each read once."""
    read: dict[str, Any] = {}
    if request.traffic.trace and not request.trace_lengths:
        read["trace_lengths"] = trace_lengths(request.traffic.trace)
    if request.margin == "band" and not request.latency_margin:
        read["latency_margin"] = band_margins()
    return read


def _run_local_plan(
    request: PlanRequest,
    read: Mapping[str, Any],
    arch: ModelArch,
    machine: Inventory,
    *,
    engine_steps: Path | None,
    operators: Path | None,
    options: ServingOptions,
    out: Path,
) -> PlanStepResult:
    """Plan ``request`` (with what was ``read`` for it) onto this machine and write its plan directory."""
    from gpuplace.manifests.local import local_kfp_fragments, local_serving_spec, node_manifests
    from gpuplace.plandir import write_plan_dir
    from gpuplace.planner import plan_local
    from gpuplace.planner.tables import candidates_table

    if operators is not None:
        raise InvalidInput(
            "operators",
            str(operators),
            "prices vLLM on a fleet's GPUs; the local target is priced by its engine's measured steps",
            "Leave --operators out with --inventory local (give --engine-steps), or plan a fleet",
        )
    request = replace(request, **read)
    plan = plan_local(arch, local_target(engine_steps, arch, machine), request)
    plan = replace(plan, serving=local_serving_spec(plan, local_image(options)))
    table = candidates_table(plan)
    written = write_plan_dir(
        out,
        plan,
        manifests=node_manifests(plan),  # for a cluster node named like this machine (the real node)
        alternatives={},
        kfp=local_kfp_fragments(plan),
        candidates_md=table,
    )
    return PlanStepResult(plan_dir=written, metrics=plan_metrics(plan), candidates_markdown=table)


def _manifest_notes(plan: PlacementPlan, manifests: ManifestSet, emit: EmitOptions) -> tuple[str, ...]:
    """The plan's notes from its manifests: forms left out and why, their own notes, multi-node serving."""
    from gpuplace.manifests.lws import multi_node_note, nodes_per_replica

    notes = tuple(f"form {f} left out: {why}" for f, why in manifests.left_out.items())
    notes += manifests.notes
    if nodes_per_replica(plan) > 1:
        notes += (multi_node_note(plan, manifests.forms, default=not emit.explicit),)
    return notes
