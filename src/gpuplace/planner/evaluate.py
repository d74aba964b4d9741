"""Pricing a shape with the serving model, and its verdict against the SLO.

For each shape (:class:`~gpuplace.planner.offers.OfferedShape`) :class:`ServingModels` builds, once, what
docs/serving-model.md describes: the engine parameters ``vllm serve`` would run it with
(:func:`~gpuplace.planner.engine.vllm_engine_params`; weights that do not fit are a rejection), the
efficiencies (:func:`~gpuplace.planner.steptime.choose_efficiencies`: a profile of the same GPU model,
else the GPU-class defaults), the roofline step-time model over the link the GPU set has, and a
:class:`~gpuplace.planner.replica.ReplicaModel` of one replica under the plan's traffic — cached per
shape and link tier, so placing replicas on other tiers reuses it. :meth:`ServingModels.evaluate` finds
the fewest replicas that meet the SLO (p99 TTFT and TPOT, the KV cache the load uses, and the ideal
GPU-fit score) or explains why none does. Pure: the efficiency table and the profile are arguments.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from gpuplace.catalog.efficiency import EfficiencyTable
from gpuplace.errors import InvalidInput
from gpuplace.planner.engine import GIB, VLLM_GPU_MEMORY_UTILIZATION, vllm_engine_params, vllm_kv_budget
from gpuplace.planner.kernels import gemm_dtype, operator_step_model, operators_refusal
from gpuplace.planner.offers import OfferedShape
from gpuplace.planner.placement import fit_score
from gpuplace.planner.replica import ReplicaModel, TrafficShape
from gpuplace.planner.request import PlanRequest
from gpuplace.planner.steptime import (
    StepTimeModel,
    bundled_kernels_notes,
    choose_efficiencies,
    kv_bytes_per_token_per_gpu,
    roofline_step_model,
)
from gpuplace.types import LatencyProfile, ModelArch
from gpuplace.types.engine import EngineParams, ServingPrediction
from gpuplace.types.operators import OperatorTable
from gpuplace.types.plan import Candidate, Prediction, Slo
from gpuplace.units import to_ms


@dataclass(frozen=True, slots=True)
class Unservable:
    """Why a shape cannot serve the traffic at any rate: its ``reason`` and how far off it is (``miss``)."""

    reason: str
    miss: float


def memory_used_gib(
    engine: EngineParams, usable_gib: float, kv_bytes_per_block: float, peak_blocks: int
) -> float:
    """Memory one GPU of a replica uses at the predicted load: what the engine may use, less the KV-cache
    blocks the load never needed (the weights, activations and reserve are always held)."""
    free_blocks = max(0, engine.num_gpu_blocks - max(0, peak_blocks))
    return usable_gib - free_blocks * kv_bytes_per_block / GIB


def ratios(
    pred: ServingPrediction, slo: Slo, memory_ratio: float, margin: tuple[float, float] = (1.0, 1.0)
) -> tuple[float, float, float]:
    """Predicted over target p99 TPOT and p99 TTFT, and the memory ratio (∞ when the replica is unstable);
    ``margin`` multiplies the predicted (TTFT, TPOT) first (``--margin band``: the band's slow edge).

    A stream of one-token outputs has no TPOT: its ratio is 0, as a load test counts it."""
    if not pred.stable:
        return math.inf, math.inf, memory_ratio
    ttft_k, tpot_k = margin
    tpot = tpot_k * pred.tpot.p99 / slo.bound("tpot_p99_s") if math.isfinite(pred.tpot.p99) else 0.0
    return tpot, ttft_k * pred.ttft.p99 / slo.bound("ttft_p99_s"), memory_ratio


def meets_slo(lat: float, ttft: float, mem: float, locality: str, fit_threshold: float) -> bool:
    """Every ratio within 1, and the ideal GPU-fit score (no fragmentation change) at the threshold."""
    ideal = fit_score(max(lat, ttft), mem, locality, 0.0, 1.0)
    return max(lat, ttft, mem) <= 1 and ideal >= fit_threshold


def rejection_reasons(
    pred: ServingPrediction,
    slo: Slo,
    lat: float,
    ttft: float,
    mem: float,
    locality: str,
    replicas: int,
    fit_threshold: float,
    margin: tuple[float, float] = (1.0, 1.0),
) -> list[str]:
    """Why a prediction misses the SLO; under a margin (``--margin band``) the judged figure is the
    prediction × the band's slow edge, and the reason shows both."""

    def judged(value_s: float, k: float, digits: int) -> str:
        shown = f"{to_ms(value_s):.{digits}f} ms"
        return shown if k == 1.0 else f"{shown} × {k:.2f} (band edge) = {to_ms(value_s * k):.{digits}f} ms"

    reasons = []
    if not pred.stable:
        reasons.append(
            f"saturated: {replicas} replica(s) cannot keep up with {slo.bound('rate_rps'):g} req/s"
        )
    if mem > 1:
        reasons.append(f"the load needs {mem:.0%} of the KV cache")
    if pred.stable and lat > 1:
        reasons.append(
            f"p99 TPOT {judged(pred.tpot.p99, margin[1], 1)} > {to_ms(slo.bound('tpot_p99_s')):g} ms"
        )
    if pred.stable and ttft > 1:
        reasons.append(
            f"p99 TTFT {judged(pred.ttft.p99, margin[0], 0)} > {to_ms(slo.bound('ttft_p99_s')):g} ms"
        )
    if not reasons:
        best_fit = fit_score(max(lat, ttft), mem, locality, 0.0, 1.0)
        reasons.append(
            f"best fit score {best_fit:.2f} < {fit_threshold:g} (latency at {max(lat, ttft):.0%} "
            f"of the SLO, memory {mem:.0%} used, {locality})"
        )
    return reasons


def planned_traffic(request: PlanRequest) -> TrafficShape:
    """The traffic one replica is simulated with: the request's lengths, or its trace's rows."""
    if request.traffic.trace and not request.trace_lengths:
        raise InvalidInput(
            "trace",
            request.traffic.trace,
            "its rows' lengths were not given to the planner",
            "Read the trace at the edge (gpuplace.steps.plan.trace_lengths) into trace_lengths",
        )
    return TrafficShape.of(request.traffic, request.trace_lengths, requests=request.simulated_requests)


class ServingModels:
    """The serving model of every shape of one plan, built once per shape and link tier."""

    def __init__(
        self,
        arch: ModelArch,
        request: PlanRequest,
        efficiency: EfficiencyTable,
        profile: LatencyProfile | None = None,
        operators: OperatorTable | None = None,
    ) -> None:
        self.arch = arch
        self.request = request
        self.efficiency = efficiency
        self.profile = profile
        self.operators = operators
        self.traffic = planned_traffic(request)
        self._engines: dict[tuple[object, ...], EngineParams | Unservable] = {}
        self._replicas: dict[tuple[object, ...], ReplicaModel] = {}
        self._notes: dict[str, None] = {}  # ordered set

    @property
    def notes(self) -> tuple[str, ...]:
        return tuple(self._notes)

    @property
    def simulations(self) -> int:
        return sum(r.simulations for r in self._replicas.values())

    def engine(self, shape: OfferedShape) -> EngineParams | Unservable:
        """``vllm serve``'s parameters for one replica of ``shape``, or why the shape cannot serve."""
        hit = self._engines.get(shape.key)
        if hit is None:
            hit = self._engine(shape)
            self._engines[shape.key] = hit
        return hit

    def _engine(self, shape: OfferedShape) -> EngineParams | Unservable:
        spec, tp = shape.spec, shape.tp
        precision = self.request.precision
        refusal = precision.unsupported_on(spec)
        if refusal:
            return Unservable(refusal, math.inf)
        memory, util = shape.engine_memory(VLLM_GPU_MEMORY_UTILIZATION)
        try:
            engine = vllm_engine_params(
                self.arch, spec, tp, memory_gib=memory, gpu_memory_utilization=util, precision=precision
            )
        except InvalidInput:
            budget = vllm_kv_budget(
                self.arch, spec, tp, memory_gib=memory, gpu_memory_utilization=util, precision=precision
            )
            held = budget.weights_bytes + budget.activation_bytes + budget.reserve_bytes
            return Unservable(
                f"weights do not fit: {budget.weights_bytes / GIB:.1f} GiB per GPU at TP={tp} "
                f"(+ {(budget.activation_bytes + budget.reserve_bytes) / GIB:.1f} GiB activations and "
                f"reserve) > {budget.usable_bytes / GIB:.1f} GiB usable",
                held / budget.usable_bytes,
            )
        need = self.traffic.max_context_tokens
        if engine.kv_capacity_tokens < need:
            return Unservable(
                f"the KV cache holds {max(engine.kv_capacity_tokens, 0)} tokens per replica "
                f"({memory:g} GiB per GPU at TP={tp}); the longest request needs {need}",
                need / max(engine.kv_capacity_tokens, 1),
            )
        return engine

    def margin(self, shape: OfferedShape) -> tuple[float, float]:
        """(TTFT, TPOT) factors the SLO is judged on: the error band's slow edge of the GPU's class under
        ``--margin band`` (none where the band has no rows for it, with a note), else 1."""
        if self.request.margin != "band":
            return 1.0, 1.0
        factors = self.request.latency_margin.get(shape.spec.architecture)
        if factors is None:
            self._notes[f"--margin band: no band for {shape.spec.architecture}; sized on the prediction"] = (
                None
            )
            return 1.0, 1.0
        note = (
            f"--margin band: {shape.spec.architecture} GPUs judged at TTFT × {factors[0]:.2f}, TPOT × "
            f"{factors[1]:.2f} of the prediction (the slow edge of the 80% error band at heavy load, "
            "docs/benchmarks/published.md)"
        )
        self._notes[note] = None
        return factors

    def step_model(self, shape: OfferedShape, link: str) -> StepTimeModel:
        """The roofline of ``shape`` at its class's (or a same-GPU profile's) efficiencies, or the kernels
        an operator table measured on its GPU class (other classes keep their defaults, and say so)."""
        eff, notes = choose_efficiencies(self.arch, shape.hardware(link), self.efficiency, self.profile)
        self._notes.update(dict.fromkeys(notes))
        table = self.operators
        if table is not None:
            refusal = operators_refusal(table, shape.spec.name)
            if not refusal and gemm_dtype(table, self.request.precision.fp8_weights) is not None:
                model, more = operator_step_model(
                    self.arch, shape.hardware(link), eff, table, self.request.precision
                )
                self._notes.update(dict.fromkeys(more))
                return model
            why = refusal or f"has no GEMMs for {self.request.precision.label} weights"
            self._notes[f"--operators: the table {why}; {shape.spec.name} on its class defaults"] = None
        model = roofline_step_model(self.arch, shape.hardware(link), eff, self.request.precision)
        self._notes.update(dict.fromkeys(bundled_kernels_notes(model, shape.spec.name)))
        return model

    def replica(self, shape: OfferedShape, link: str | None = None) -> ReplicaModel:
        """The cached replica model of ``shape`` over ``link`` (its own best tier by default)."""
        link = link or shape.link
        key = (*shape.key, link)
        hit = self._replicas.get(key)
        if hit is None:
            engine = self.engine(shape)
            if isinstance(engine, Unservable):
                raise InvalidInput("shape", shape.key, engine.reason, "")
            hit = ReplicaModel(engine, self.step_model(shape, link), self.traffic)
            self._replicas[key] = hit
        return hit

    def _memory(self, shape: OfferedShape, pred: ServingPrediction) -> tuple[float, float]:
        """(GiB one GPU holds at this load, the share of the KV cache the load needs).

        vLLM takes its share of the device memory up front; what can run out is the KV cache, so the
        memory criterion is the KV cache's peak use (an unstable replica fills it)."""
        engine = self.engine(shape)
        assert isinstance(engine, EngineParams)
        memory = shape.hardware().memory_gib or shape.spec.memory_gib
        usable = memory * engine.gpu_memory_utilization
        per_block = engine.block_size * kv_bytes_per_token_per_gpu(
            self.arch, shape.tp, self.request.precision.kv_bytes
        )
        peak = min(pred.peak_kv_blocks, engine.num_gpu_blocks) if pred.stable else engine.num_gpu_blocks
        used = memory_used_gib(engine, usable, per_block, peak)
        return used, peak / engine.num_gpu_blocks if engine.num_gpu_blocks > 0 else math.inf

    def judge(self, shape: OfferedShape, pred: ServingPrediction) -> tuple[bool, tuple[float, float, float]]:
        _, kv = self._memory(shape, pred)
        r = ratios(pred, self.request.slo, kv, self.margin(shape))
        return pred.stable and meets_slo(*r, shape.locality, self.request.fit_threshold), r

    def prediction(self, shape: OfferedShape, link: str, replicas: int) -> tuple[Prediction, float, float]:
        """The plan's prediction for one of ``replicas`` replicas of ``shape`` on ``link``, its worst
        latency ratio to the SLO and the share of the KV cache it needs."""
        sp = self.replica(shape, link).at_rate(self.request.slo.bound("rate_rps") / replicas)
        used, kv = self._memory(shape, sp)
        lat, ttft, _ = ratios(sp, self.request.slo, kv, self.margin(shape))
        return sp.to_prediction(used), max(lat, ttft), kv

    def evaluate(self, shape: OfferedShape) -> Candidate:
        """The fewest replicas of ``shape`` (up to what the fleet has room for and the request allows)
        that meet the SLO, as a feasible candidate; else a rejected one with every reason and its miss."""
        request = self.request
        engine = self.engine(shape)
        price = shape.price(request.prices_usd_per_hour)
        if isinstance(engine, Unservable):
            return shape.candidate(reason=engine.reason, miss=engine.miss)
        memory = shape.hardware().memory_gib or shape.spec.memory_gib
        base = shape.candidate(memory_available_gib=memory * engine.gpu_memory_utilization)
        top = min(shape.units, request.max_replicas)
        meets: Callable[[ServingPrediction], bool] = lambda p: self.judge(shape, p)[0]  # noqa: E731
        replica = self.replica(shape)
        count, sp = replica.fewest_replicas(request.slo.bound("rate_rps"), meets, top)
        used, mem = self._memory(shape, sp)
        lat, ttft, _ = ratios(sp, request.slo, mem, self.margin(shape))
        miss = max(lat, ttft, mem) if sp.stable else math.inf
        if count == 0:
            reasons = rejection_reasons(
                sp,
                request.slo,
                lat,
                ttft,
                mem,
                shape.locality,
                top,
                request.fit_threshold,
                self.margin(shape),
            )
            return replace(
                base,
                replicas=top,
                prediction=sp.to_prediction(used),
                cost_usd_per_hour=price * top,
                reason="; ".join(reasons) + f" with all {top} available",
                miss=miss,
            )
        return replace(
            base,
            replicas=count,
            prediction=sp.to_prediction(used),
            cost_usd_per_hour=price * count,
            verdict="feasible",
            reason="meets the SLO",
            miss=miss,
        )
