"""``gpuplace predict``'s step: the flags (the edges' spelling: milliseconds, length forms, a trace path),
the trace's lengths, the bundled efficiency defaults and error band in, one
:class:`~gpuplace.planner.predict.ShapePrediction` out (:func:`gpuplace.planner.predict.predict`, pure).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gpuplace.errors import InvalidInput
from gpuplace.steps.plan import model_arch, trace_lengths

if TYPE_CHECKING:
    from gpuplace.catalog import GpuCatalog
    from gpuplace.planner.predict import ShapePrediction


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
    """``gpuplace predict``: the flags (the edges' spelling: milliseconds, length forms, a trace path)
    → :func:`gpuplace.planner.predict.predict`, with the bundled efficiency defaults and error band."""
    from gpuplace.catalog.band import load_prediction_band
    from gpuplace.catalog.efficiency import load_efficiency_table
    from gpuplace.planner.predict import Load, predict, shape_spec
    from gpuplace.planner.replica import TrafficShape
    from gpuplace.types.plan import Slo
    from gpuplace.types.precision import Precision
    from gpuplace.types.workload import Traffic

    rate, concurrency = params.get("rate"), params.get("concurrency")
    load = Load(
        rate_rps=None if rate is None else float(rate),
        concurrency=None if concurrency is None else int(concurrency),
    )
    process, shape = parse_arrival(str(params.get("arrival") or "poisson"))
    trace = str(params.get("trace") or "")
    traffic = Traffic.parse(
        params.get("prompt_tokens") or 512,
        params.get("output_tokens") or 128,
        arrival=process,
        burstiness=shape,
        trace=trace,
    )
    lengths = trace_lengths(trace) if trace else ()
    requests = int(params.get("requests") or 2000)
    arch = model_arch(str(params["model"]), None)
    spec = catalog.get(str(params["gpu"]), field="gpu")
    shape_of = shape_spec(
        arch,
        spec,
        tp=int(params.get("tp") or 1),
        mig_profile=str(params.get("mig_profile") or ""),
        share=float(params.get("share") or 1.0),
    )
    slo = Slo.from_ms(ttft_ms=params.get("slo_ttft_ms"), tpot_ms=params.get("slo_tpot_ms"))
    return predict(
        arch,
        shape_of,
        load,
        TrafficShape.of(traffic, lengths, requests=requests),
        load_efficiency_table(),
        precision=Precision.parse(params.get("dtype"), params.get("kv_cache_dtype")),
        slo=slo if slo.bounded else None,
        band=load_prediction_band(),
    )
