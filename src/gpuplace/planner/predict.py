"""One shape under one traffic, predicted: ``gpuplace predict``'s library function, and its headroom.

:func:`predict` takes a model, a GPU (whole GPUs at a TP degree, a MIG slice or a time-sliced share),
a precision and a load — an open-loop rate (Poisson or gamma arrivals) or a closed loop of
``concurrency`` users, each sending its next request when its last one ends — and simulates one
replica with the serving model :func:`~gpuplace.planner.search.plan_placement` sizes with (the same
engine parameters, step-time model and :class:`~gpuplace.planner.replica.ReplicaModel`). No fleet, no
plan directory. With an SLO it also finds the highest rate and the highest concurrency that still meet
it (:func:`headroom`: an exponential search up from the lightest load, then bisection), and it carries
the error band the published-measurement benchmark found for the GPU's class at the prediction's load regime
(:class:`~gpuplace.catalog.band.PredictionBand`); with both, the headroom is a range: the highest rate
judged at the band's slow edge and at its fast edge. Pure: the catalogs and the band are arguments.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from gpuplace.catalog.band import BandEdge, PredictionBand
from gpuplace.catalog.band_fit import load_regime
from gpuplace.catalog.efficiency import EfficiencyTable
from gpuplace.errors import InvalidInput
from gpuplace.planner.engine import GIB, VLLM_GPU_MEMORY_UTILIZATION, vllm_engine_params, vllm_kv_budget
from gpuplace.planner.kernels import OPERATORS_FIX, operator_step_model, operators_refusal
from gpuplace.planner.offers import OfferedShape
from gpuplace.planner.replica import ReplicaModel, TrafficShape
from gpuplace.planner.steptime import bundled_kernels_notes, choose_efficiencies, roofline_step_model
from gpuplace.types import Distribution, GpuSpec, ModelArch
from gpuplace.types.engine import EngineParams, ServingPrediction
from gpuplace.types.operators import OperatorTable
from gpuplace.types.plan import Slo
from gpuplace.types.precision import BF16, Precision
from gpuplace.types.stats import json_clean
from gpuplace.units import to_ms

# PCIe GPUs of one node: a TP group beyond an NVLink bridge pair (or without NVLink) talks over PCIe
NODE_GPUS = 8
METRICS = ("ttft", "tpot", "itl", "e2e")
MAX_CONCURRENCY = 4096


@dataclass(frozen=True, slots=True)
class Load:
    """The load one replica is predicted at: an open-loop ``rate_rps`` or a closed loop of
    ``concurrency`` users (exactly one of them)."""

    rate_rps: float | None = None
    concurrency: int | None = None

    def __post_init__(self) -> None:
        if (self.rate_rps is None) == (self.concurrency is None):
            given = "both" if self.rate_rps is not None else "neither"
            raise InvalidInput(
                "rate/concurrency",
                given,
                "give exactly one load: an open-loop request rate or a closed-loop concurrency",
                "Pass --rate R (requests/s) or --concurrency C (users), not both",
            )
        if self.rate_rps is not None and not (math.isfinite(self.rate_rps) and self.rate_rps > 0):
            raise InvalidInput(
                "rate", self.rate_rps, "must be a positive number of requests/s", "e.g. --rate 4"
            )
        if self.concurrency is not None and not (1 <= self.concurrency <= MAX_CONCURRENCY):
            raise InvalidInput(
                "concurrency", self.concurrency, f"must be an integer in [1, {MAX_CONCURRENCY}]", ""
            )

    @property
    def kind(self) -> str:
        return "rate" if self.rate_rps is not None else "concurrency"

    @property
    def value(self) -> float:
        return float(self.rate_rps if self.rate_rps is not None else self.concurrency or 0)

    def describe(self) -> str:
        return f"{self.rate_rps:g} req/s" if self.rate_rps is not None else f"concurrency {self.concurrency}"


@dataclass(frozen=True, slots=True)
class LoadPoint:
    """The prediction at one load of a headroom search (for the curve)."""

    load: Load
    prediction: ServingPrediction


@dataclass(frozen=True, slots=True)
class Headroom:
    """The highest rate and concurrency that meet ``slo`` (None: no load meets it), and every load
    the search simulated."""

    slo: Slo
    max_rate_rps: float | None
    max_concurrency: int | None
    rate_points: tuple[LoadPoint, ...]
    concurrency_points: tuple[LoadPoint, ...]
    notes: tuple[str, ...] = ()
    # with a band: the highest rate and concurrency judged at its slow edge and at its fast edge (None:
    # none meets it there), and the edges used (TTFT, TPOT: measured ÷ predicted)
    band_rate_rps: tuple[float | None, float | None] | None = None
    band_concurrency: tuple[int | None, int | None] | None = None
    band_edges: tuple[BandEdge, ...] = ()


@dataclass(frozen=True, slots=True)
class ShapePrediction:
    """What :func:`predict` returns: the simulated replica at the load, with its band and headroom."""

    model: str
    shape: str  # e.g. "H100-SXM5-80GB x TP1"
    gpu: str
    precision: Precision
    load: Load
    traffic: str
    engine: EngineParams
    serving: ServingPrediction
    output_tokens_per_s: float
    band: tuple[BandEdge, ...] = ()
    headroom: Headroom | None = None
    notes: tuple[str, ...] = ()
    step_model: str = ""
    load_share: float = 0.0  # the load ÷ the replica's fluid capacity (offered rate, or achieved throughput)
    saturated_rps: float | None = None  # overloaded: the rate the replica completes when kept full

    @property
    def regime(self) -> str:
        """The load regime the band is drawn for: light, heavy or saturated."""
        return load_regime(self.load_share, self.serving.stable)

    @property
    def requests_per_s(self) -> float:
        """Completed requests/s: at the load, or when overloaded the saturated rate (never 0 for a replica
        that serves at all)."""
        return self.serving.throughput_rps if self.serving.stable else self.saturated_rps or 0.0

    def distributions(self) -> dict[str, Distribution]:
        s = self.serving
        return {"ttft": s.ttft, "tpot": s.tpot, "itl": s.itl, "e2e": s.e2e}

    def to_json_dict(self) -> dict[str, Any]:
        """One flat object: ``<metric>_<p50|p90|p99|mean>_s`` for TTFT, TPOT, ITL and E2E, the rates,
        ``stable``, the band per metric and, with an SLO, ``max_rate_rps``/``max_concurrency``."""
        out: dict[str, Any] = {
            "model": self.model,
            "shape": self.shape,
            "gpu": self.gpu,
            "dtype": self.precision.weights,
            "kv_cache_dtype": self.precision.kv_cache,
            "load_kind": self.load.kind,
            "load": self.load.value,
            "traffic": self.traffic,
        }
        for name, d in self.distributions().items():
            for stat in ("p50", "p90", "p99", "mean"):
                out[f"{name}_{stat}_s"] = getattr(d, stat)
        out |= {
            "requests_per_s": self.requests_per_s,
            "output_tokens_per_s": self.output_tokens_per_s,
            "stable": self.serving.stable,
            "preemptions": self.serving.preemptions,
            "num_gpu_blocks": self.engine.num_gpu_blocks,
            "load_share": self.load_share,
            "regime": self.regime,
            "band": {
                e.metric: {
                    "low": e.low,
                    "high": e.high,
                    "nominal": e.nominal,
                    "regime": e.regime,
                    "gpu_class": e.gpu_class,
                    "borrowed_by": e.borrowed_by,
                    "rows": list(e.rows),
                }
                for e in self.band
            },
            "step_model": self.step_model,
            "notes": list(self.notes),
        }
        if self.headroom is not None:
            h = self.headroom
            out |= {
                "slo_ttft_p99_s": h.slo.ttft_p99_s,
                "slo_tpot_p99_s": h.slo.tpot_p99_s,
                "max_rate_rps": h.max_rate_rps,
                "max_concurrency": h.max_concurrency,
                "headroom_notes": list(h.notes),
            }
            if h.band_rate_rps is not None:
                out["max_rate_rps_band"] = list(h.band_rate_rps)  # [at the slow edge, at the fast edge]
                out["max_concurrency_band"] = list(h.band_concurrency or (None, None))
        return json_clean(out)  # type: ignore[no-any-return]


def shape_spec(
    arch: ModelArch, spec: GpuSpec, *, tp: int = 1, mig_profile: str = "", share: float = 1.0
) -> OfferedShape:
    """The one shape to predict, refusing what cannot be a replica: a TP degree the heads do not split
    over or that exceeds one NVLink domain, a MIG profile the GPU does not have, a share outside (0, 1]."""
    if mig_profile and (tp != 1 or share != 1.0):
        raise InvalidInput(
            "mig_profile", mig_profile, "is one slice of one GPU", "Leave --tp at 1 and drop --share"
        )
    if not 0 < share <= 1:
        raise InvalidInput("share", share, "must be in (0, 1]: a time-sliced share of one GPU", "e.g. 0.5")
    if share != 1.0 and tp != 1:
        raise InvalidInput("share", share, "a time-sliced share is one GPU", "Leave --tp at 1")
    if tp < 1:
        raise InvalidInput("tp", tp, "must be at least 1", "")
    domain = spec.nvlink_domain
    if tp > max(domain, NODE_GPUS):
        raise InvalidInput(
            "tp",
            tp,
            f"exceeds the {max(domain, NODE_GPUS)} GPUs of one {spec.name} NVLink domain (an HGX "
            "baseboard, an NVL72 rack, or a node's PCIe GPUs): tensor parallelism across it is not modelled",
            f"Use --tp {max(domain, NODE_GPUS)} or fewer and more replicas",
        )
    heads, kv = arch.num_attention_heads, arch.num_kv_heads
    if heads % tp or (kv % tp and tp % kv):
        ok = [
            t
            for t in (1, 2, 4, 8)
            if t <= max(domain, NODE_GPUS) and not heads % t and not (kv % t and t % kv)
        ]
        raise InvalidInput(
            "tp",
            tp,
            f"{arch.name} has {heads} attention heads and {kv} KV heads, which do not split over TP={tp}",
            f"Use one of --tp {', '.join(map(str, ok))}",
        )
    if mig_profile:
        mig = next((m for m in spec.mig_profiles if m.name == mig_profile), None)
        if mig is None:
            known = ", ".join(m.name for m in spec.mig_profiles) or "none: it has no MIG"
            raise InvalidInput(
                "mig_profile", mig_profile, f"is not a MIG profile of {spec.name}", f"Known: {known}"
            )
        return OfferedShape(spec, "mig", 1, mig_profile, memory_gib=mig.memory_gib, units=1, link="mig")
    if share != 1.0:
        return OfferedShape(
            spec, "shared", 1, share=share, memory_gib=spec.memory_gib, units=1, link="shared"
        )
    link = "single" if tp == 1 else "nvlink" if tp <= domain else "pcie-switch"
    return OfferedShape(spec, "whole", tp, memory_gib=spec.memory_gib, units=1, link=link)


def shape_label(shape: OfferedShape) -> str:
    if shape.kind == "mig":
        return f"{shape.spec.name} MIG {shape.mig_profile}"
    if shape.kind == "shared":
        return f"{shape.spec.name} share {shape.share:g}"
    return f"{shape.spec.name} x TP{shape.tp}"


def shape_engine(
    arch: ModelArch, shape: OfferedShape, need_tokens: int = 0, precision: Precision = BF16
) -> EngineParams:
    """``vllm serve``'s parameters for one replica of ``shape`` in ``precision``; a precision the GPU
    cannot serve, weights that do not fit (saying by how much) and a KV cache too small for the longest
    request are refused."""
    spec, tp = shape.spec, shape.tp
    refusal = precision.unsupported_on(spec)
    if refusal:
        field = "dtype" if precision.fp8_weights else "kv_cache_dtype"
        raise InvalidInput(
            field, precision.label, refusal, "Serve in bf16, or pick an Ada, Hopper or Blackwell GPU"
        )
    memory, util = shape.engine_memory(VLLM_GPU_MEMORY_UTILIZATION)
    try:
        engine = vllm_engine_params(
            arch, spec, tp, memory_gib=memory, gpu_memory_utilization=util, precision=precision
        )
    except InvalidInput:
        budget = vllm_kv_budget(
            arch, spec, tp, memory_gib=memory, gpu_memory_utilization=util, precision=precision
        )
        short = -budget.kv_bytes / GIB
        raise InvalidInput(
            "model",
            arch.name,
            f"does not fit {shape_label(shape)}: {budget.weights_bytes / GIB:.1f} GiB of weights per GPU "
            f"+ {(budget.activation_bytes + budget.reserve_bytes) / GIB:.1f} GiB activations and reserve "
            f"> {budget.usable_bytes / GIB:.1f} GiB usable, {short:.1f} GiB short (before any KV cache)",
            "Use a larger TP degree, a GPU with more memory"
            + ("" if precision.fp8_weights else ", or --dtype fp8"),
        ) from None
    if need_tokens and engine.kv_capacity_tokens < need_tokens:
        raise InvalidInput(
            "model",
            arch.name,
            f"leaves a KV cache of {max(engine.kv_capacity_tokens, 0)} tokens on {shape_label(shape)}; "
            f"the longest request needs {need_tokens}, {need_tokens - engine.kv_capacity_tokens} more",
            "Use a larger TP degree or GPU, or shorter requests",
        )
    return engine


def replica_model(
    arch: ModelArch,
    shape: OfferedShape,
    traffic: TrafficShape,
    efficiency: EfficiencyTable,
    precision: Precision = BF16,
    operators: OperatorTable | None = None,
    engine_changes: Mapping[str, Any] | None = None,
) -> tuple[ReplicaModel, tuple[str, ...]]:
    """The replica model of ``shape`` under ``traffic`` (the planner's), and where its figures came from;
    with ``operators`` (measured on ``shape``'s GPU, else refused) the measured kernels price it; with
    ``engine_changes`` (engine parameter → value) the engine run as another release ran it: a published
    run of vLLM 0.6 had ``max_num_seqs`` 256 and, with multi-step scheduling, ``num_scheduler_steps`` 10."""
    engine = shape_engine(arch, shape, traffic.max_context_tokens, precision)
    if engine_changes:
        engine = engine.with_changes(engine_changes)
    eff, notes = choose_efficiencies(arch, shape.hardware(), efficiency)
    if operators is None:
        model = roofline_step_model(arch, shape.hardware(), eff, precision)
        return ReplicaModel(engine, model, traffic), (*notes, *bundled_kernels_notes(model, shape.spec.name))
    refusal = operators_refusal(operators, shape.spec.name)
    if refusal:
        raise InvalidInput("operators", operators.describe(), refusal, OPERATORS_FIX)
    model, more = operator_step_model(arch, shape.hardware(), eff, operators, precision)
    return ReplicaModel(engine, model, traffic), more


def at_load(replica: ReplicaModel, load: Load) -> ServingPrediction:
    if load.rate_rps is not None:
        return replica.at_rate(load.rate_rps)
    return replica.at_concurrency(int(load.concurrency or 1))


def output_tokens_per_s(replica: ReplicaModel, pred: ServingPrediction) -> float:
    """Output tokens/s at the load, or when overloaded at saturation (the engine kept full)."""
    rps = pred.throughput_rps if pred.stable else replica.saturated_rps()
    return rps * replica.mean_output_tokens


def predict(
    arch: ModelArch,
    shape: OfferedShape,
    load: Load,
    traffic: TrafficShape,
    efficiency: EfficiencyTable,
    *,
    precision: Precision = BF16,
    slo: Slo | None = None,
    band: PredictionBand | None = None,
    operators: OperatorTable | None = None,
    engine_changes: Mapping[str, Any] | None = None,
) -> ShapePrediction:
    """Predict one replica of ``shape`` serving ``traffic`` at ``load``; with ``slo`` (p99 TTFT and/or
    TPOT bounds) also the headroom; with ``band`` the error band of the GPU's class; with ``operators``
    the kernels measured on the GPU in place of its class defaults."""
    replica, notes = replica_model(arch, shape, traffic, efficiency, precision, operators, engine_changes)
    sp = at_load(replica, load)
    offered = load.rate_rps if load.rate_rps is not None else sp.throughput_rps
    share = offered / replica.capacity_rps if replica.capacity_rps > 0 else math.inf
    regime = load_regime(share, sp.stable)
    room = headroom(replica, slo) if slo is not None and slo.bounded else None
    edges = band.for_gpu(shape.spec, regime) if band is not None else ()
    if band is not None and not edges:
        notes = (
            *notes,
            f"no error band: the benchmark has no {regime}-load rows for {shape.spec.name}'s class",
        )
    notes = (*notes, *sorted({f"error band: {e.origin()}" for e in edges if e.borrowed_by}))
    if room is not None and band is not None:
        room = band_headroom(replica, room, band, shape.spec)
    return ShapePrediction(
        model=arch.name,
        shape=shape_label(shape),
        gpu=shape.spec.name,
        precision=precision,
        load=load,
        traffic=traffic.describe(closed_loop=load.concurrency is not None),
        engine=replica.engine,
        serving=sp,
        output_tokens_per_s=output_tokens_per_s(replica, sp),
        saturated_rps=None if sp.stable else replica.saturated_rps(),
        band=edges,
        headroom=room,
        notes=notes,
        step_model=replica.model.source,
        load_share=share,
    )


def band_headroom(replica: ReplicaModel, room: Headroom, band: PredictionBand, spec: GpuSpec) -> Headroom:
    """``room`` with the range the band gives it: the searches again, with the SLO judged at the band's slow
    edge (measured = predicted × high) and at its fast edge (× low), at the regime of the highest rate found:
    light, else heavy (a load that meets a latency SLO has no growing queue, so it is judged by the band of
    loads that queue but keep up, never by that of saturated runs)."""
    share = (room.max_rate_rps or 0.0) / replica.capacity_rps if replica.capacity_rps > 0 else 0.0
    regime = "light" if room.max_rate_rps and load_regime(share) == "light" else "heavy"
    ttft, tpot = band.latency_edges(spec.architecture, regime)
    if ttft is None and tpot is None:
        return replace(room, notes=(*room.notes, f"no {regime}-load error band for {spec.name}: no range"))
    slo = room.slo

    def scaled(pick: str) -> Slo:
        def bound(value: float | None, edge: BandEdge | None) -> float | None:
            return value / getattr(edge, pick) if value is not None and edge is not None else value

        return Slo(
            ttft_p99_s=bound(slo.ttft_p99_s, ttft),
            tpot_p99_s=bound(slo.tpot_p99_s, tpot),
            rate_rps=slo.rate_rps,
        )

    slow, fast = headroom(replica, scaled("high")), headroom(replica, scaled("low"))
    return replace(
        room,
        band_rate_rps=(slow.max_rate_rps, fast.max_rate_rps),
        band_concurrency=(slow.max_concurrency, fast.max_concurrency),
        band_edges=tuple(e for e in (ttft, tpot) if e is not None),
    )


def meets(pred: ServingPrediction, slo: Slo) -> bool:
    """p99 TTFT and p99 TPOT within the bounds ``slo`` sets (a stream of 1-token outputs has no TPOT)."""
    if not pred.stable:
        return False
    if slo.ttft_p99_s is not None and not pred.ttft.p99 <= slo.ttft_p99_s:
        return False
    return not (
        slo.tpot_p99_s is not None and math.isfinite(pred.tpot.p99) and pred.tpot.p99 > slo.tpot_p99_s
    )


def headroom(replica: ReplicaModel, slo: Slo, *, rate_steps: int = 14) -> Headroom:
    """The highest open-loop rate and closed-loop concurrency at which ``replica`` meets ``slo``.

    Concurrency: doubling from 1 until a miss, then bisection over the integers between. Rate:
    bisection between 0 and the fluid capacity bound (a simulation at that rate saturates) over
    ``rate_steps`` halvings (1/16384 of the bound). When not even the lightest load meets the SLO,
    both are None and a note gives the latency at that load.
    """
    slo_text = " and ".join(
        f"p99 {name} ≤ {to_ms(bound):g} ms"
        for name, bound in (("TTFT", slo.ttft_p99_s), ("TPOT", slo.tpot_p99_s))
        if bound is not None
    )
    conc: list[LoadPoint] = []

    def at_c(c: int) -> bool:
        p = replica.at_concurrency(c)
        conc.append(LoadPoint(Load(concurrency=c), p))
        return meets(p, slo)

    max_c: int | None = None
    if at_c(1):
        lo, hi = 1, 2
        while hi <= MAX_CONCURRENCY and at_c(hi):
            lo, hi = hi, hi * 2
        hi = min(hi, MAX_CONCURRENCY + 1)  # never bisect past the cap: at it, "at least the cap"
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if at_c(mid) else (lo, mid)
        max_c = lo
    rates: list[LoadPoint] = []
    top = replica.capacity_rps * 1.5
    lo_r, hi_r = 0.0, top
    for _ in range(rate_steps):
        r = (lo_r + hi_r) / 2
        p = replica.at_rate(r)
        rates.append(LoadPoint(Load(rate_rps=r), p))
        lo_r, hi_r = (r, hi_r) if meets(p, slo) else (lo_r, r)
    for share in (0.02, 0.1, 0.2, 0.3):  # light loads, for the curve (the bisection starts at half)
        rates.append(LoadPoint(Load(rate_rps=top * share), replica.at_rate(top * share)))
    max_r = lo_r if lo_r > 0 else None
    notes: list[str] = []
    if max_c is None or max_r is None:
        light = conc[0].prediction
        notes.append(
            f"no load meets {slo_text}: at the lightest load (one user at a time) p99 TTFT "
            f"{to_ms(light.ttft.p99):.1f} ms, p99 TPOT {to_ms(light.tpot.p99):.2f} ms"
        )
    if max_r is not None and max_r >= top * (1 - 2 ** (1 - rate_steps)):
        notes.append(f"met up to the search's top ({top:.3g} req/s, 1.5 × the fluid capacity bound)")
    if max_c == MAX_CONCURRENCY:
        notes.append(f"met up to the concurrency search's top ({MAX_CONCURRENCY} users)")
    return Headroom(
        slo, max_r, max_c, tuple(sorted(rates, key=lambda p: p.load.value)), tuple(conc), tuple(notes)
    )


def curve(points: tuple[LoadPoint, ...]) -> list[tuple[float, float, float, float, float]]:
    """The stable points of a headroom search as (load, p50 TTFT, p99 TTFT, p50 TPOT, p99 TPOT), by load."""
    out = []
    for pt in sorted(points, key=lambda p: p.load.value):
        s = pt.prediction
        if s.stable:
            out.append((pt.load.value, s.ttft.p50, s.ttft.p99, s.tpot.p50, s.tpot.p99))
    return out
