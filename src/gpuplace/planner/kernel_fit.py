"""How well the step model built from an operator table (:mod:`gpuplace.planner.kernels`) predicts the table's
own points, each held out of the model that predicts it, per regime, beside the GPU-class defaults' error:
the check ``gpuplace profile --operators`` prints under its table (docs/profiling.md). Pure.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gpuplace.planner.kernels import (
    decode_terms,
    interp_log,
    layer_fractions,
    nnls_relative,
    prefill_terms,
    roofline_s,
)
from gpuplace.types.engine import Efficiencies
from gpuplace.types.operators import (
    ALL_REDUCE,
    ATTENTION_DECODE,
    ATTENTION_PREFILL,
    GEMM,
    OperatorRow,
    OperatorTable,
)


@dataclass(frozen=True, slots=True)
class RegimeFit:
    """Out-of-sample errors, (predicted − measured) ÷ measured, of one regime's rows: each row predicted by
    the step model built without it. GEMMs twice: with the row's token count held out (how the model prices
    the counts between measured ones) and with its layer held out (how it prices another model's layers);
    attention and all-reduce with the row held out of the fit. Beside them, the class defaults' error."""

    regime: str
    rows: int
    held_out_median_abs: float  # token count (GEMMs) or point (the rest) held out
    held_out_max_abs: float
    other_layer_median_abs: float  # GEMMs: the layer held out; nan for the rest
    defaults_median: float  # the class defaults, signed (negative: optimistic); nan without a class
    defaults_median_abs: float


def _rel(pred: float, row: OperatorRow) -> float:
    return (pred - row.seconds) / row.seconds


def _gemm_errors(rows: Sequence[OperatorRow], bw: float, peak: float) -> dict[int, tuple[float, float]]:
    """Per row (by index): (error with its token count held out of its layer's curve, error with its layer
    held out, the others' time-weighted fraction at its count). Rows at the first or last measured count
    of their layer have no held-out-count error (nan): the model holds the end values there."""
    out: dict[int, tuple[float, float]] = {}
    by_layer: dict[str, list[OperatorRow]] = {}
    for r in rows:
        by_layer.setdefault(r.layer, []).append(r)
    for i, r in enumerate(rows):
        own = [q for q in by_layer[r.layer] if q.tokens != r.tokens]
        lo = [q for q in own if q.tokens < r.tokens]
        hi = [q for q in own if q.tokens > r.tokens]
        count_err = math.nan
        if lo and hi:
            points = layer_fractions(own, bw, peak)
            count_err = _rel(roofline_s(r, bw, peak) / interp_log(points, r.tokens), r)
        others = [q for q in rows if q.layer != r.layer and q.tokens == r.tokens]
        layer_err = math.nan
        if others:
            frac = sum(roofline_s(q, bw, peak) for q in others) / sum(q.seconds for q in others)
            layer_err = _rel(roofline_s(r, bw, peak) / frac, r)
        out[i] = (count_err, layer_err)
    return out


def _held_out(
    regime: str, rows: Sequence[OperatorRow], terms: Sequence[Sequence[float]], dflt: Sequence[float] | None
) -> RegimeFit:
    """Each row predicted by the relative NNLS fit of ``terms`` to the other rows (the step model's fit of
    that operator), as a :class:`RegimeFit` with the class defaults' errors ``dflt``."""
    x, y = np.array(terms, dtype=float), np.array([r.seconds for r in rows])
    errors = []
    for i, r in enumerate(rows):
        keep = np.arange(len(y)) != i
        fitted = keep.sum() >= x.shape[1]
        errors.append(_rel(float(x[i] @ nnls_relative(x[keep], y[keep])), r) if fitted else math.nan)
    return _fit(regime, errors, [], dflt, len(rows))


def kernel_fit(table: OperatorTable, defaults: Efficiencies | None) -> tuple[RegimeFit, ...]:
    """Per regime, how well the step model built from ``table`` predicts each of the table's points when
    that point is held out of it, and how far the GPU-class ``defaults`` (None for a device with no class)
    were from them."""
    out: list[RegimeFit] = []
    bw = table.bandwidth_gbps
    for dtype in dict.fromkeys(r.dtype for r in table.of(GEMM)):
        peak = float(table.peak_tflops.get(dtype, 0.0))
        rows = list(table.of(GEMM, dtype))
        errors = _gemm_errors(rows, bw, peak)
        groups: dict[str, list[int]] = {}
        for i, r in enumerate(rows):
            bound = "memory" if r.bytes / (bw * 1e9) >= r.flops / (peak * 1e12 or math.inf) else "compute"
            groups.setdefault(f"GEMM {dtype}, {bound}-bound", []).append(i)
        for regime, idx in groups.items():
            dflt = None
            if defaults is not None:
                dflt = [
                    _rel(
                        max(
                            rows[i].bytes / (bw * 1e9 * defaults.mbu) + defaults.gemm_latency_s,
                            rows[i].flops / (peak * 1e12 * defaults.mfu),
                        ),
                        rows[i],
                    )
                    for i in idx
                ]
            out.append(_fit(regime, [errors[i][0] for i in idx], [errors[i][1] for i in idx], dflt, len(idx)))
    decode = list(table.of(ATTENTION_DECODE))
    if len(decode) > 2:
        dflt = [_rel(r.bytes / (bw * 1e9 * defaults.mbu), r) for r in decode] if defaults else None
        out.append(_held_out("decode attention", decode, [decode_terms(r, bw) for r in decode], dflt))
    prefill = list(table.of(ATTENTION_PREFILL))
    attn_peak = float(table.peak_tflops.get(prefill[0].dtype, 0.0)) if prefill else 0.0
    if len(prefill) > 1 and attn_peak:
        dflt = (
            [_rel(r.flops / (attn_peak * 1e12 * defaults.attention_mfu), r) for r in prefill]
            if defaults
            else None
        )
        out.append(
            _held_out("prefill attention", prefill, [prefill_terms(r, attn_peak) for r in prefill], dflt)
        )
    reduce = list(table.of(ALL_REDUCE))
    if len(reduce) > 2:
        out.append(_held_out("all-reduce", reduce, [[1.0, r.bytes] for r in reduce], None))
    return tuple(out)


def _median_abs(errors: Sequence[float]) -> tuple[float, float]:
    finite = [abs(e) for e in errors if math.isfinite(e)]
    return (statistics.median(finite), max(finite)) if finite else (math.nan, math.nan)


def _fit(
    regime: str,
    held_out: Sequence[float],
    other_layer: Sequence[float],
    dflt: Sequence[float] | None,
    rows: int,
) -> RegimeFit:
    med, top = _median_abs(held_out)
    finite = [e for e in dflt or () if math.isfinite(e)]
    return RegimeFit(
        regime,
        rows,
        med,
        top,
        _median_abs(other_layer)[0],
        statistics.median(finite) if finite else math.nan,
        statistics.median(abs(e) for e in finite) if finite else math.nan,
    )


def format_fit(fits: Sequence[RegimeFit]) -> list[str]:
    """The per-regime errors as a Markdown table."""

    def pct(v: float) -> str:
        return "-" if math.isnan(v) else f"{v:.1%}"

    lines = [
        "| regime | rows | held out (token count or point): median / max abs error | held-out layer: median "
        "abs error | class defaults: median error (abs) |",
        "|---|---:|---|---|---|",
    ]
    for f in fits:
        dflt = (
            "no GPU class"
            if math.isnan(f.defaults_median)
            else f"{f.defaults_median:+.0%} ({f.defaults_median_abs:.0%})"
        )
        lines.append(
            f"| {f.regime} | {f.rows} | {pct(f.held_out_median_abs)} / {pct(f.held_out_max_abs)} | "
            f"{pct(f.other_layer_median_abs)} | {dflt} |"
        )
    return lines
