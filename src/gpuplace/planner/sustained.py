"""How much slower an engine steps under sustained traffic than in the bursts its calibration measures.

The engine-step calibration (:mod:`gpuplace.profiling.engine_steps`) times bursts of requests sent
together, with idle gaps between them. Traffic that never lets up can cost a server more: on this
machine's ``transformers serve`` closed loops at 4–32 streams ran 10–20% below the throughput the burst-
calibrated model predicted, with TPOT above it, in one session, and within a few percent of it in
another (docs/serving-model.md, "Under sustained load"). So it is measured in every calibration, not
assumed: the calibration also runs closed loops at fixed concurrency
(:class:`~gpuplace.types.engine.SustainedRun`), and :func:`fit_sustained_scale` finds the one factor on
the step time with which the serving model (:func:`~gpuplace.planner.engine_sim.simulate`, the same
requests in the same closed loop) reproduces their median TPOT: the ``k`` minimising the sum over runs
of ``log²(measured / simulated)``, searched on ``log k`` by golden section between :data:`SCALE_BOUNDS`.
:func:`with_sustained` writes it into the profile (``sustained_scale``), as the calibration entry points
do (:mod:`gpuplace.deploy.calibrate`); :func:`~gpuplace.planner.steptime.measured_step_model` fits it
itself from a profile that has the runs but no fitted factor.

TPOT alone: it is the step time the factor scales. A closed loop's TTFT also holds the per-request
overhead and the work of each arrival, measured on their own; on this machine the loops' TTFT and
TPOT errors have not always had the same sign (docs/serving-model.md), and a factor fitted to both
would split the difference. The runs keep the measured TTFT, so its error stays visible.

Pure arithmetic and simulation: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from gpuplace.errors import InvalidInput
from gpuplace.planner.engine_sim import simulate
from gpuplace.planner.steptime import StepTimeModel
from gpuplace.types.engine import EngineParams, EngineStepProfile, SustainedRun
from gpuplace.workload import RequestSpec

# the factors searched: a fit at either end says the calibration and the loops disagree beyond what a
# scale on the step time explains (a note in the profile says so)
SCALE_BOUNDS: tuple[float, float] = (0.5, 3.0)
_GOLDEN = (math.sqrt(5) - 1) / 2
_TOLERANCE = 0.002  # on log k: the factor to within 0.2%


def _loop_engine(runs: Sequence[SustainedRun]) -> EngineParams:
    """Engine settings under which no closed loop of ``runs`` is limited by anything but its steps (the
    loops are far below any budget, sequence or cache limit of the engines gpuplace deploys)."""
    longest = max(r.prompt_tokens + r.output_tokens for r in runs)
    streams = max(r.concurrency for r in runs)
    block = 16
    return EngineParams(
        max_num_batched_tokens=max(8192, streams * longest),
        max_num_seqs=streams,
        block_size=block,
        gpu_memory_utilization=0.9,
        max_model_len=longest,
        enable_chunked_prefill=True,
        num_gpu_blocks=streams * -(-longest // block),
    )


def simulate_loops(model: StepTimeModel, runs: Sequence[SustainedRun]) -> list[tuple[float, float]]:
    """Per run, the simulated (median TTFT, median TPOT) of its closed loop under ``model``."""
    engine = _loop_engine(runs)
    out = []
    for run in runs:
        specs = [RequestSpec(i, math.nan, run.prompt_tokens, run.output_tokens) for i in range(run.requests)]
        pred = simulate(specs, engine, model, concurrency=run.concurrency, discard_head=0.0, discard_tail=0.0)
        out.append((pred.ttft.p50, pred.tpot.p50))
    return out


def loop_misfit(model: StepTimeModel, runs: Sequence[SustainedRun]) -> float:
    """Σ over runs of log²(measured / simulated) of the median TPOT."""
    simulated = simulate_loops(model, runs)
    return sum(math.log(run.tpot_p50_s / tpot) ** 2 for run, (_, tpot) in zip(runs, simulated, strict=True))


def fit_sustained_scale(model: StepTimeModel, runs: Sequence[SustainedRun]) -> float:
    """The step-time factor with which ``model`` best reproduces the measured closed loops ``runs``.

    ``model`` is the burst-calibrated model (any scale it has is ignored). Refuses runs whose median
    TPOT is not finite and positive (a loop in which nothing succeeded measured nothing).
    """
    if not runs:
        raise InvalidInput("sustained", 0, "no closed-loop runs to fit", "Measure at least one concurrency")
    for run in runs:
        if run.output_tokens < 2 or not (math.isfinite(run.tpot_p50_s) and run.tpot_p50_s > 0):
            raise InvalidInput(
                "sustained",
                f"{run.concurrency} streams: TPOT {run.tpot_p50_s}, {run.output_tokens} output tokens",
                "needs a finite positive median TPOT (and at least 2 output tokens)",
                "Re-run the calibration; a closed loop whose requests failed measured nothing",
            )
    base = replace(model, scale=1.0)

    def cost(log_k: float) -> float:
        return loop_misfit(replace(base, scale=math.exp(log_k)), runs)

    lo, hi = (math.log(b) for b in SCALE_BOUNDS)
    a, b = hi - _GOLDEN * (hi - lo), lo + _GOLDEN * (hi - lo)
    fa, fb = cost(a), cost(b)
    while hi - lo > _TOLERANCE:
        if fa <= fb:
            hi, b, fb = b, a, fa
            a = hi - _GOLDEN * (hi - lo)
            fa = cost(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + _GOLDEN * (hi - lo)
            fb = cost(b)
    return math.exp((lo + hi) / 2)


def with_sustained(profile: EngineStepProfile) -> EngineStepProfile:
    """``profile`` with the step-time factor fitted to its sustained runs, and a note saying how (scale 1
    and a note naming them when no loop measured anything; unchanged without runs)."""
    from gpuplace.planner.steptime import measured_step_model

    runs = profile.sustained
    if not runs:
        return profile
    usable = [r for r in runs if math.isfinite(r.tpot_p50_s)]
    notes = list(profile.notes)
    if len(usable) < len(runs):
        failed = ", ".join(str(r.concurrency) for r in runs if r not in usable)
        notes.append(f"sustained: no request succeeded in the loops at {failed} streams; not fitted")
    if not usable:
        return replace(profile, sustained_scale=1.0, notes=tuple(notes))
    scale = fit_sustained_scale(measured_step_model(replace(profile, sustained_scale=1.0)), usable)
    low, high = SCALE_BOUNDS
    edge = (
        ""
        if low * 1.01 < scale < high / 1.01
        else " (at the edge of the search: the loops disagree beyond a scale)"
    )
    loops = ", ".join(
        f"{r.concurrency} streams (TTFT {r.ttft_p50_s * 1e3:.2f}, TPOT {r.tpot_p50_s * 1e3:.2f} ms)"
        for r in usable
    )
    notes.append(f"sustained_scale {scale:.3f}: fitted to closed loops at {loops}{edge}")
    return replace(profile, sustained_scale=scale, notes=tuple(notes))
