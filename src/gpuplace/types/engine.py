"""The serving engine's value types: its scheduler parameters, the efficiencies a step runs at, and a
measured step-time calibration.

:class:`EngineParams` (defined beside the serving spec that carries it, :mod:`gpuplace.types.serving`) is
what a continuous-batching engine is configured with (vLLM's names) plus the KV-cache capacity those
settings leave; the serving model simulates exactly these values and the manifests pass them to the
engine, so the prediction and the deployment agree. :class:`Efficiencies` are the achieved fractions of
the roofline a step-time model divides by, each with its source. :class:`EngineStepProfile` is what the
profiler measured of a real engine's step time against the tokens in a step, with the fitted fixed and
per-token terms. Pure standard library, so the planner may import it; times are seconds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuplace.errors import InvalidInput
from gpuplace.types.plan import Prediction
from gpuplace.types.serving import ENGINE_FIELDS, EngineParams, frozen_sources
from gpuplace.types.stats import Distribution
from gpuplace.units import to_ms

__all__ = [
    "ENGINE_FIELDS",
    "Efficiencies",
    "EngineParams",
    "EngineStepProfile",
    "EngineStepSample",
    "InterferenceRun",
    "ServingPrediction",
    "SimulatedRequest",
    "WakeRun",
]

EFFICIENCY_FIELDS: tuple[str, ...] = (
    "mbu",
    "mfu",
    "attention_mfu",
    "link_efficiency",
    "gemm_latency_s",
    "step_overhead_s",
    "seq_overhead_s",
    "request_overhead_s",
)
FRACTIONS: tuple[str, ...] = ("mbu", "mfu", "attention_mfu", "link_efficiency")


@dataclass(frozen=True, slots=True)
class Efficiencies:
    """Achieved fractions of the roofline, and the fixed times a step and a request add.

    ``mbu``: of memory bandwidth, for weight and KV-cache reads; ``mfu``: of dense tensor peak, for
    GEMMs; ``attention_mfu``: of that peak, for prefill attention; ``link_efficiency``: of the link's
    bandwidth, for all-reduces; ``gemm_latency_s``: the fixed latency of one GEMM kernel (what a small
    weight read costs beyond its bytes); ``step_overhead_s``: a step's time outside the roofline (scheduling,
    launches, sampling); ``seq_overhead_s``: the engine's time per sequence in a step (scheduling, input
    preparation, sampling of each sequence); ``request_overhead_s``: added once to every request's TTFT
    (API server, tokenising, first-step dispatch). A fraction above 1 is a measurement error and is refused.
    """

    mbu: float
    mfu: float
    attention_mfu: float
    link_efficiency: float = 1.0
    gemm_latency_s: float = 0.0
    step_overhead_s: float = 0.0
    seq_overhead_s: float = 0.0
    request_overhead_s: float = 0.0
    sources: Mapping[str, str] = field(default_factory=dict)  # field name -> where its value came from
    # of step_overhead_s, the engine's CPU-side part (scheduler call, input preparation): what vLLM V0's
    # multi-step scheduling pays once per run instead of every step (the rest is GPU kernel floors)
    cpu_step_s: float = 0.0

    def __post_init__(self) -> None:
        for name in FRACTIONS:
            value = getattr(self, name)
            if not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
                raise InvalidInput(name, value, "must be a positive fraction", "")
            if value > 1:
                raise InvalidInput(
                    name,
                    value,
                    "is above 1: more than the hardware's peak is a measurement error",
                    "Re-measure on an idle machine, or check the bandwidth/peak the fraction divides by",
                )
        for name in ("gemm_latency_s", "step_overhead_s", "seq_overhead_s", "request_overhead_s"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise InvalidInput(name, value, "must be a non-negative number of seconds", "")
        object.__setattr__(self, "sources", frozen_sources(self.sources))


@dataclass(frozen=True, slots=True)
class EngineStepSample:
    """One measured engine step: what it held and how long it took.

    ``first_token`` marks a request's time to first token measured alone: its step plus the request's
    own overhead (HTTP, tokenising, admission), which the fit separates as ``request_overhead_s``.
    """

    decode_seqs: int  # requests that each added one token
    prefill_tokens: int  # prompt tokens processed (chunks included)
    prefill_seqs: int  # requests whose prompt tokens those were
    context_tokens: int  # KV-cache tokens the step's decodes attended to, summed
    prefill_pairs: int  # (query, key) pairs of the step's causal prefill attention
    step_s: float
    first_token: bool = False
    # decodes measured while the streams were at different phases (each arrived some steps after the
    # last), as a server under load runs them, rather than sent together: kept out of the linear fit and
    # priced as the measured excess of n such decodes over it (planner.steptime.decode_excess)
    staggered: bool = False


@dataclass(frozen=True, slots=True)
class InterferenceRun:
    """One stream decoding alone while short requests arrive one at a time, as measured: what each
    arriving request costs the running one on a server that handles requests in its step loop's process.

    ``arrival_gaps_s``: the stream's inter-token gaps during which a request arrived (nothing else in
    flight); ``quiet_gaps_s``: its gaps with nothing else in flight and no arrival. Both come from the
    same run, so their difference does not depend on the machine's pace drifting between runs.
    """

    arrival_gaps_s: tuple[float, ...]
    quiet_gaps_s: tuple[float, ...]

    @property
    def work_s(self) -> float:
        """What an arrival adds to the running stream's step: the difference of the two trimmed means
        (a tenth cut at each end: a stall of the machine is not a request's work); NaN without both."""
        if not self.arrival_gaps_s or not self.quiet_gaps_s:
            return math.nan
        return _trimmed_mean(self.arrival_gaps_s) - _trimmed_mean(self.quiet_gaps_s)

    def to_json_list(self) -> list[list[float]]:
        return [list(self.arrival_gaps_s), list(self.quiet_gaps_s)]

    @classmethod
    def from_json_list(cls, row: Sequence[Sequence[float]]) -> InterferenceRun:
        return cls(tuple(float(g) for g in row[0]), tuple(float(g) for g in row[1]))


@dataclass(frozen=True, slots=True)
class WakeRun:
    """Lone requests sent after the engine had been idle for a while, as measured: what a request that
    finds the engine idle waits beyond one sent right after another (threads and caches that went idle
    wake; on this 2-core VM up to ~3 ms after 300 ms of idle).

    ``hot_ttft_s``: the same prompt's TTFT sent right after another request (the calibration's lone
    prefill, seconds before); ``idle_s``: per request, how long nothing had been in flight when it was
    sent; ``ttft_s``: its TTFT.
    """

    hot_ttft_s: float
    idle_s: tuple[float, ...]
    ttft_s: tuple[float, ...]

    def to_json_list(self) -> list[Any]:
        return [self.hot_ttft_s, list(self.idle_s), list(self.ttft_s)]

    @classmethod
    def from_json_list(cls, row: Sequence[Any]) -> WakeRun:
        return cls(float(row[0]), tuple(float(x) for x in row[1]), tuple(float(x) for x in row[2]))


def _trimmed_mean(values: Sequence[float], cut: float = 0.1) -> float:
    ordered = sorted(values)
    k = int(len(ordered) * cut)
    kept = ordered[k : len(ordered) - k] or ordered
    return sum(kept) / len(kept)


@dataclass(frozen=True, slots=True)
class EngineStepProfile:
    """A real engine's step time against its contents on one device, and the fitted linear model.

    ``step_s ≈ fixed_s + per_token_s·tokens + per_seq_s·seqs + per_context_token_s·context
    + per_pair_s·pairs`` where ``tokens`` = decode seqs + prefill tokens, ``seqs`` = decode + prefill
    seqs, ``context`` the decodes' cached tokens and ``pairs`` the prefill attention pairs.
    ``fixed_s`` is the engine's per-step overhead, which dominates on a CPU; it is measured, never
    assumed. ``request_overhead_s`` is what a request's TTFT adds beyond its first step (HTTP,
    tokenising, admission), also measured. ``request_work_s`` is the engine time each request arriving
    while others run costs them, where the server handles requests in the step loop's process: the
    median over the ``interference`` runs of what an arrival adds to a running stream's step (0 without
    them, and never below 0).
    """

    engine: str  # e.g. "transformers-cb 5.24.0"
    device_kind: str  # "cpu" or "cuda"
    device_name: str
    model: str
    fixed_s: float
    per_token_s: float
    per_seq_s: float
    per_context_token_s: float
    per_pair_s: float = 0.0
    request_overhead_s: float = 0.0
    request_work_s: float = 0.0  # engine time an arriving request costs the running ones (measured)
    samples: tuple[EngineStepSample, ...] = ()
    interference: tuple[InterferenceRun, ...] = ()
    # (idle_s, extra_s): what a request arriving at an engine idle that long adds to its TTFT
    # (measured by ``wake_runs``; 0 at no idle time, interpolated, the last point held beyond)
    wake: tuple[tuple[float, float], ...] = ()
    wake_runs: tuple[WakeRun, ...] = ()
    rms_relative_error: float = math.nan  # of the fit over the samples
    notes: tuple[str, ...] = ()

    def predict_s(self, tokens: float, seqs: float, context_tokens: float, pairs: float = 0.0) -> float:
        return (
            self.fixed_s
            + self.per_token_s * tokens
            + self.per_seq_s * seqs
            + self.per_context_token_s * context_tokens
            + self.per_pair_s * pairs
        )

    def describe(self) -> str:
        """One line: the fitted step model, the request overhead and how well the fit holds."""
        return (
            f"{self.engine} on {self.device_name} ({self.model}): step = {to_ms(self.fixed_s):.2f} ms "
            f"+ {self.per_token_s * 1e6:.1f} µs/token + {self.per_seq_s * 1e6:.1f} µs/sequence "
            f"+ {self.per_context_token_s * 1e9:.1f} ns/context token; request overhead "
            f"{to_ms(self.request_overhead_s):.2f} ms, work per arriving request "
            f"{to_ms(self.request_work_s):.2f} ms{self._describe_wake()}; "
            f"fit RMS error {self.rms_relative_error:.0%} "
            f"over {len(self.samples)} samples"
        )

    def _describe_wake(self) -> str:
        if not self.wake:
            return ""
        idle, extra = self.wake[-1]
        return f", an idle engine wakes in up to {to_ms(extra):.2f} ms (after {to_ms(idle):.0f} ms idle)"

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "device_kind": self.device_kind,
            "device_name": self.device_name,
            "model": self.model,
            "fixed_s": self.fixed_s,
            "per_token_s": self.per_token_s,
            "per_seq_s": self.per_seq_s,
            "per_context_token_s": self.per_context_token_s,
            "per_pair_s": self.per_pair_s,
            "request_overhead_s": self.request_overhead_s,
            "request_work_s": self.request_work_s,
            "rms_relative_error": None if math.isnan(self.rms_relative_error) else self.rms_relative_error,
            "samples": [
                [
                    s.decode_seqs,
                    s.prefill_tokens,
                    s.prefill_seqs,
                    s.context_tokens,
                    s.prefill_pairs,
                    s.step_s,
                    s.first_token,
                    *([True] if s.staggered else []),
                ]
                for s in self.samples
            ],
            "interference": [run.to_json_list() for run in self.interference],
            "wake": [list(p) for p in self.wake],
            "wake_runs": [run.to_json_list() for run in self.wake_runs],
            "notes": list(self.notes),
        }

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> EngineStepProfile:
        rows: Sequence[Sequence[Any]] = data.get("samples") or ()
        err = data.get("rms_relative_error")
        return cls(
            engine=str(data["engine"]),
            device_kind=str(data["device_kind"]),
            device_name=str(data["device_name"]),
            model=str(data["model"]),
            fixed_s=float(data["fixed_s"]),
            per_token_s=float(data["per_token_s"]),
            per_seq_s=float(data["per_seq_s"]),
            per_context_token_s=float(data["per_context_token_s"]),
            per_pair_s=float(data.get("per_pair_s") or 0.0),
            request_overhead_s=float(data.get("request_overhead_s") or 0.0),
            request_work_s=float(data.get("request_work_s") or 0.0),
            samples=tuple(
                EngineStepSample(
                    int(r[0]),
                    int(r[1]),
                    int(r[2]),
                    int(r[3]),
                    int(r[4]),
                    float(r[5]),
                    bool(r[6]),
                    bool(r[7]) if len(r) > 7 else False,
                )
                for r in rows
            ),
            interference=tuple(InterferenceRun.from_json_list(r) for r in data.get("interference") or ()),
            wake=tuple((float(p[0]), float(p[1])) for p in data.get("wake") or ()),
            wake_runs=tuple(WakeRun.from_json_list(r) for r in data.get("wake_runs") or ()),
            rms_relative_error=math.nan if err is None else float(err),
            notes=tuple(str(n) for n in data.get("notes") or ()),
        )


@dataclass(frozen=True, slots=True)
class SimulatedRequest:
    """One request's simulated timeline (seconds on the simulation clock)."""

    index: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    first_token_s: float  # includes the step-time model's per-request overhead
    finish_s: float  # likewise
    preemptions: int

    @property
    def ttft_s(self) -> float:
        return self.first_token_s - self.arrival_s

    @property
    def e2e_s(self) -> float:
        return self.finish_s - self.arrival_s

    @property
    def tpot_s(self) -> float:
        if self.output_tokens <= 1:
            return math.nan
        return (self.finish_s - self.first_token_s) / (self.output_tokens - 1)


@dataclass(frozen=True, slots=True)
class EngineStep:
    """One step of the simulated engine as its scheduler chose it (``simulate(..., trace=True)``).

    Requests are named by their index in arrival order (as :class:`SimulatedRequest`): ``decodes`` each
    computed one token, ``prefills`` are ``(request, tokens)`` chunks of a prompt (or of a preempted
    request's recompute), ``preempted`` were preempted while this step was scheduled.
    """

    start_s: float
    decodes: tuple[int, ...]
    prefills: tuple[tuple[int, int], ...]
    preempted: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ServingPrediction:
    """What the simulation of one replica predicts, over the requests kept after warm-up.

    ``stable`` is False when the backlog grew without bound (the replica cannot keep up): the
    latencies are then infinite. ``itl`` pools every inter-token gap (vLLM's ITL). ``mean_running`` is
    the time-average number of running requests, ``max_running`` its maximum; ``peak_kv_blocks`` an
    upper bound of the KV blocks in use.
    """

    ttft: Distribution
    tpot: Distribution
    e2e: Distribution
    throughput_rps: float
    mean_running: float
    max_running: int
    peak_kv_blocks: int
    preemptions: int
    steps: int
    simulated_s: float
    stable: bool
    requests: tuple[SimulatedRequest, ...] = field(default=(), repr=False)
    # inter-token latency: every gap between two tokens of a request, pooled over the requests (vLLM's
    # ``itl``); a step's duration counts once per sequence it decodes
    itl: Distribution = field(default_factory=lambda: Distribution.of(()))
    trace: tuple[EngineStep, ...] = field(default=(), repr=False)

    def to_prediction(self, memory_per_gpu_gib: float) -> Prediction:
        """As the plan's :class:`~gpuplace.types.plan.Prediction` (``concurrency``: mean requests in
        flight by Little's law; ``max_batch``: the most requests that ran at once)."""
        inflight = self.throughput_rps * self.e2e.mean if self.stable else math.inf
        return Prediction(
            ttft=self.ttft,
            tpot=self.tpot,
            concurrency=inflight,
            max_batch=max(1, self.max_running),
            memory_per_gpu_gib=memory_per_gpu_gib,
            stable=self.stable,
        )
