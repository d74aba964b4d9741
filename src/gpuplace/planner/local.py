"""This machine as a planning target (``gpuplace plan --inventory local``): one replica of the local
engine on this machine's device, predicted with the engine's measured step time.

The local serving target runs ``transformers serve --continuous-batching`` (a vLLM-like FIFO scheduler
with chunked prefill and a paged KV cache). On a CPU its own per-step work dominates, so the roofline
says little: the step-time model is the one measured on this device with this engine
(:func:`~gpuplace.planner.steptime.measured_step_model` of a
:class:`~gpuplace.types.engine.EngineStepProfile`), and the serving model simulates the engine's own
parameters (:class:`~gpuplace.types.engine.EngineParams`, the KV cache pinned). The plan's ``chosen.unit``
is this device (``cpu``, or the catalog GPU of CUDA device 0), so a load test served here checks the
prediction against a measurement on the same device. Pure.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

from gpuplace.errors import InvalidInput
from gpuplace.planner.evaluate import meets_slo, planned_traffic, ratios, rejection_reasons
from gpuplace.planner.offers import inputs_id, slug
from gpuplace.planner.placement import fit_score
from gpuplace.planner.replica import ReplicaModel, TrafficShape, fluid_capacity_rps
from gpuplace.planner.request import PlanRequest
from gpuplace.planner.steptime import kv_bytes_per_token_per_gpu, measured_step_model
from gpuplace.types import ModelArch
from gpuplace.types.engine import EngineParams, EngineStepProfile, ServingPrediction
from gpuplace.types.fleet import LOCAL_INVENTORY
from gpuplace.types.plan import (
    DEFAULT_MAX_LOAD_SHARE,
    Candidate,
    NoFeasiblePlacement,
    Placement,
    PlacementPlan,
    Prediction,
)
from gpuplace.units import to_ms


@dataclass(frozen=True, slots=True)
class LocalTarget:
    """This machine: its name, its device as a unit (``cpu`` or a catalog GPU), the local engine's
    measured step time and the parameters it is served with."""

    node: str
    unit: str
    steps: EngineStepProfile
    engine: EngineParams
    gpu_ids: tuple[str, ...] = ()  # the GPU the server uses; () on a CPU


def measured_capacity_rps(
    engine: EngineParams, steps: EngineStepProfile, prompt_tokens: float, output_tokens: float
) -> float:
    """The local engine's fluid capacity (:func:`~gpuplace.planner.replica.fluid_capacity_rps`) with its
    measured step model, over the decode batches its calibration measured: beyond the largest, the
    engine's steps grow faster than the fitted line (docs/benchmarks/big_batches.md), so the line is not
    extrapolated there."""
    largest = max((s.decode_seqs for s in steps.samples if s.prefill_tokens == 0), default=1)
    top = replace(engine, max_num_seqs=max(1, min(engine.max_num_seqs, largest)))
    return fluid_capacity_rps(top, measured_step_model(steps), prompt_tokens, output_tokens)


LIMIT_WHY = {
    "cpu": "the default on a CPU, where the engine collapsed above half its capacity",
    "cuda": "the default on a GPU, where no collapse was measured",
}


def load_share_limit(asked: float | None, steps: EngineStepProfile) -> float:
    """The highest share of the local engine's capacity a plan may load it to: ``asked``, or by default
    (None) :data:`~gpuplace.types.plan.DEFAULT_MAX_LOAD_SHARE` for an engine measured on a CPU, where
    ``transformers serve`` collapsed from about half its capacity (docs/benchmarks/fidelity.md), and 1
    on a GPU, where no such collapse was measured: the H200's closed loop at 69% of its capacity was
    refused by the CPU rule (../shared/data/gpu-h200-2026-12-04), with no measurement behind it there."""
    if asked is not None:
        return asked
    return DEFAULT_MAX_LOAD_SHARE if steps.device_kind == "cpu" else 1.0


def plan_local(arch: ModelArch, target: LocalTarget, request: PlanRequest) -> PlacementPlan:
    """One replica of the local engine on this machine, if it meets ``request.slo``; else
    :class:`NoFeasiblePlacement` naming its miss."""
    traffic = _checked_traffic(arch, target, request)
    steps = target.steps
    engine = target.engine
    model = measured_step_model(steps)
    replica = ReplicaModel(engine, model, traffic)
    per_block = engine.block_size * kv_bytes_per_token_per_gpu(arch, 1)
    cache_gib = engine.num_gpu_blocks * per_block / 2**30

    def judge(p: ServingPrediction) -> tuple[bool, tuple[float, float, float]]:
        mem = min(p.peak_kv_blocks, engine.num_gpu_blocks) / engine.num_gpu_blocks if p.stable else 1.0
        r = ratios(p, request.slo, mem)
        return p.stable and meets_slo(*r, "single", request.fit_threshold), r

    rate = request.slo.bound("rate_rps")
    capacity = measured_capacity_rps(engine, steps, replica.mean_prompt_tokens, replica.mean_output_tokens)
    share = rate / capacity
    count, sp = replica.fewest_replicas(rate, lambda p: judge(p)[0], 1)
    _, (lat, ttft, mem) = judge(sp)
    pred = sp.to_prediction(mem * cache_gib)
    fit = fit_score(max(lat, ttft), mem, "single", 0.0, 1.0)
    cand = Candidate(
        gpu=target.unit,
        kind="whole",
        tp=1,
        replicas=1,
        interconnect="single",
        prediction=pred,
        memory_available_gib=cache_gib,
        miss=max(lat, ttft, mem) if sp.stable else math.inf,
    )
    limit = load_share_limit(request.max_load_share, steps)
    too_busy = share > limit
    if not count or too_busy:
        reasons = []
        fix = "relax the SLO or lower the rate: this machine serves one replica of the local engine."
        if not count:
            reasons = rejection_reasons(sp, request.slo, lat, ttft, mem, "single", 1, request.fit_threshold)
        if too_busy:
            reasons.append(
                f"{rate:g} req/s is {share:.0%} of the local engine's measured capacity ({capacity:.2f} "
                f"req/s), above max_load_share={limit:g}: the engine admits without a "
                "cap, and on a shared CPU it collapsed from about half of it up "
                "(docs/benchmarks/fidelity.md), which no prediction shows"
            )
            fix = (
                f"lower the rate to at most {limit * capacity:.2f} req/s, or raise "
                "--max-load-share if this machine's engine is known to hold more"
                + ("; and relax the SLO." if not count else ".")
            )
        # too busy alone: no SLO miss to name as the closest (the reason says why)
        rejected = replace(cand, reason="; ".join(reasons), miss=cand.miss if not count else math.inf)
        raise NoFeasiblePlacement(request.slo, (rejected,), fix)
    chosen = replace(cand, verdict="chosen", reason="meets the SLO", fit_score=fit)
    notes = (
        f"planned onto this machine ({target.node}, {target.unit}): one replica of the local engine "
        f"({steps.engine}); its step time was measured on {steps.device_name} with {steps.model} "
        f"(fixed {to_ms(steps.fixed_s):.2f} ms per step, fit RMS error {steps.rms_relative_error:.0%}), "
        "so the prediction holds for this device only",
        f"serving model: {request.simulated_requests} simulated requests of {traffic.describe()} "
        f"at {rate:g} req/s, {share:.0%} of the engine's measured capacity ({capacity:.2f} req/s; "
        f"plans stay below {limit:.0%} of it"
        + ("" if request.max_load_share is not None else f", {LIMIT_WHY.get(steps.device_kind, '')}")
        + ")",
    )
    return _local_plan(target, request, chosen, pred, fit, notes)


def _checked_traffic(arch: ModelArch, target: LocalTarget, request: PlanRequest) -> TrafficShape:
    """The traffic to plan for, once the measured steps and the engine's KV cache are checked to serve it."""
    steps = target.steps
    if steps.model != request.model or arch.name != request.model:
        raise InvalidInput(
            "engine_steps",
            steps.model,
            f"were measured with model {steps.model!r}, not {request.model!r}",
            f"Measure them again: gpuplace profile --model {request.model} --engine-steps --out steps.json",
        )
    if request.precision.uses_fp8:
        raise InvalidInput(
            "dtype" if request.precision.fp8_weights else "kv_cache_dtype",
            "fp8",
            f"the local target serves with transformers serve on {target.unit}, measured in bf16",
            "Plan the local target in bf16 (--dtype bf16 --kv-cache-dtype auto)",
        )
    expected = "cpu" if target.unit == "cpu" else "cuda"
    if steps.device_kind != expected:
        raise InvalidInput(
            "engine_steps",
            steps.device_name,
            f"were measured on a {steps.device_kind} device; this machine serves on {target.unit}",
            "Measure them again on this machine (gpuplace profile --engine-steps)",
        )
    traffic = planned_traffic(request)
    engine = target.engine
    need = traffic.max_context_tokens
    if engine.kv_capacity_tokens < need or engine.max_model_len < need:
        raise InvalidInput(
            "engine.num_gpu_blocks",
            engine.num_gpu_blocks,
            f"the local engine's KV cache holds {engine.kv_capacity_tokens} tokens; the longest request "
            f"needs {need}",
            "Pin a larger cache (more blocks) or plan shorter requests",
        )
    return traffic


def _local_plan(
    target: LocalTarget,
    request: PlanRequest,
    chosen: Candidate,
    pred: Prediction,
    fit: float,
    notes: tuple[str, ...],
) -> PlacementPlan:
    """The plan of the chosen candidate: one replica on this machine, its id from the plan's inputs."""
    steps = target.steps
    engine = target.engine
    inputs = {"steps": steps.to_json_dict(), "engine": engine.to_json_dict(), "request": asdict(request)}
    plan_id = inputs_id(inputs)
    return PlacementPlan(
        plan_id=plan_id,
        deployment_name=request.deployment_name or f"gpuplace-{slug(request.model)}",
        model=request.model,
        slo=request.slo,
        chosen=chosen,
        placements=(
            Placement(
                replica=0,
                node=target.node,
                gpu_ids=target.gpu_ids,
                interconnect="single",
                numa_node=None,
                fit_score=round(fit, 6),
                fragmentation_delta=0.0,
                prediction=pred,
            ),
        ),
        candidates=(chosen,),
        fragmentation_before=0.0,
        fragmentation_after=0.0,
        fit_threshold=request.fit_threshold,
        inventory_source=LOCAL_INVENTORY,
        profile_device=steps.device_name,
        notes=notes,
        traffic=request.traffic,
        engine=engine,
    )
