"""``gpuplace predict``'s step: the flags (the edges' spelling: milliseconds, length forms, a trace path),
the trace's lengths, the bundled efficiency defaults and error band in, one
:class:`~gpuplace.planner.predict.ShapePrediction` out (:func:`gpuplace.planner.predict.predict`, pure).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpuplace.errors import InvalidInput
from gpuplace.params import REQUIRED, Param, parse_as
from gpuplace.steps.plan import model_arch, trace_lengths

if TYPE_CHECKING:
    from gpuplace.catalog import GpuCatalog
    from gpuplace.planner.predict import ShapePrediction


# The step's parameter table (gpuplace.params), in the three groups ``gpuplace predict --help`` shows; no
# component (the pipelines plan with the same model), so every row is a CLI flag only.
SHAPE: tuple[Param, ...] = (
    Param("model", str, REQUIRED, "a model preset, config.json or weights directory", component=False),
    Param("gpu", str, REQUIRED, "a catalog GPU name (gpuplace catalog gpus)", component=False),
    Param("tp", int, 1, "tensor-parallel degree", component=False),
    Param("mig_profile", str, "", "one MIG slice, e.g. 3g.40gb", component=False),
    Param("share", float, 1.0, "a time-sliced share of one GPU, e.g. 0.5", component=False),
    Param("dtype", str, "bf16", "weights (fp8: W8A8)", choices=("bf16", "fp8"), component=False),
    Param("kv_cache_dtype", str, "auto", "KV cache dtype", choices=("auto", "fp8"), component=False),
    Param(
        "operators",
        str,
        "",
        "an operator table measured on this GPU (gpuplace profile --operators): its kernels, not the class "
        "defaults, price the shape",
        component=False,
    ),
)
TRAFFIC: tuple[Param, ...] = (
    Param("rate", float, None, "open-loop requests/s", unit="req/s", component=False),
    Param(
        "arrival",
        str,
        "poisson",
        "with --rate: poisson, constant or gamma:CV (CV > 1 burstier)",
        component=False,
    ),
    Param("concurrency", int, None, "closed loop: users, each sending when its last ends", component=False),
    Param("prompt_tokens", str, "512", "N, uniform:LO:HI or normal:MEAN:STD", component=False),
    Param("output_tokens", str, "128", "output length, same forms", component=False),
    Param("trace", str, "", "a trace CSV whose rows' lengths to draw from", component=False),
    Param("requests", int, 2000, "requests to simulate", component=False),
)
HEADROOM: tuple[Param, ...] = (
    Param("slo_ttft_ms", float, None, "p99 TTFT bound, ms", unit="ms", component=False),
    Param("slo_tpot_ms", float, None, "p99 TPOT bound, ms", unit="ms", component=False),
)
PARAMS: tuple[Param, ...] = SHAPE + TRAFFIC + HEADROOM


@dataclass(frozen=True, slots=True)
class PredictValues:
    """:data:`PARAMS`'s values, typed: one field per row, read by :func:`~gpuplace.params.parse_as` (its
    defaults are the table's alone)."""

    model: str
    gpu: str
    tp: int
    mig_profile: str
    share: float
    dtype: str
    kv_cache_dtype: str
    operators: str
    rate: float | None
    arrival: str
    concurrency: int | None
    prompt_tokens: str
    output_tokens: str
    trace: str
    requests: int
    slo_ttft_ms: float | None
    slo_tpot_ms: float | None


def parse_arrival(text: str) -> tuple[str, float]:
    """``poisson`` | ``constant`` | ``gamma:CV`` (CV, the coefficient of variation of the gaps: gamma
    shape 1/CV², so CV 1 is Poisson and CV > 1 burstier) → (process, gamma shape)."""
    kind, _, cv = str(text or "poisson").partition(":")
    if kind in ("poisson", "constant") and not cv:
        return kind, 1.0
    if kind == "gamma":
        try:
            value = float(cv)
        except ValueError:
            value = math.nan
        if math.isfinite(value) and value > 0:
            return "gamma", 1.0 / (value * value)
    raise InvalidInput(
        "arrival", text, "is not an arrival process", "Use poisson, constant or gamma:CV (e.g. gamma:2)"
    )


def run_predict_step(params: Mapping[str, Any], catalog: GpuCatalog) -> ShapePrediction:
    """``gpuplace predict``: the flags (the edges' spelling: milliseconds, length forms, a trace path), read
    with :data:`PARAMS` → :func:`gpuplace.planner.predict.predict`, with the bundled efficiency defaults
    and error band."""
    from gpuplace.catalog.band import load_prediction_band
    from gpuplace.catalog.efficiency import load_efficiency_table
    from gpuplace.planner.predict import Load, predict, shape_spec
    from gpuplace.planner.replica import TrafficShape
    from gpuplace.profiling.operator_table import read_operator_table
    from gpuplace.types.plan import Slo
    from gpuplace.types.precision import Precision
    from gpuplace.types.workload import Traffic

    v = parse_as(PredictValues, PARAMS, params)
    if v.requests < 1:
        raise InvalidInput("requests", v.requests, "must be at least 1", "Give --requests 2000, say")
    load = Load(rate_rps=v.rate, concurrency=v.concurrency)
    process, shape = parse_arrival(v.arrival)
    traffic = Traffic.parse(
        v.prompt_tokens, v.output_tokens, arrival=process, burstiness=shape, trace=v.trace
    )
    lengths = trace_lengths(v.trace) if v.trace else ()
    arch = model_arch(v.model, None)
    spec = catalog.get(v.gpu, field="gpu")
    shape_of = shape_spec(arch, spec, tp=v.tp, mig_profile=v.mig_profile, share=v.share)
    slo = Slo.from_ms(ttft_ms=v.slo_ttft_ms, tpot_ms=v.slo_tpot_ms)
    return predict(
        arch,
        shape_of,
        load,
        TrafficShape.of(traffic, lengths, requests=v.requests),
        load_efficiency_table(),
        precision=Precision.parse(v.dtype, v.kv_cache_dtype),
        slo=slo if slo.bounded else None,
        band=load_prediction_band(),
        operators=read_operator_table(v.operators) if v.operators else None,
    )
