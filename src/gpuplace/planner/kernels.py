"""Step-time terms from kernels measured on the GPU itself (an
:class:`~gpuplace.types.operators.OperatorTable`, ``gpuplace profile --operators``), in place of the
GPU-class default efficiencies.

The table times the model's linear layers over tokens per step, attention for prefill and decode, and
all-reduces. What the step model takes from it is what the roofline cannot know:

* **GEMMs**: per layer (``qkv``, ``o``, ``gate_up``, ``down``, ``lm_head``), the achieved fraction of the
  roofline (``max(bytes ÷ bandwidth, FLOPs ÷ peak)``) at each measured token count. A shape's linear layers
  take ``Σ roofline(layer ÷ TP, tokens) ÷ fraction(layer, tokens)``, the fraction linear in log tokens
  between measured counts and held beyond them
  (:attr:`~gpuplace.planner.steptime.StepTimeModel.gemm_curve`, the head's by sampled tokens in
  ``head_curve``). For the table's own model at TP 1 these are the measured kernels at every measured
  count; other models and TP degrees reuse each layer's fraction at the same token count (said in a note).
* **Decode attention**: ``seconds = kernel + per sequence · batch + K/V bytes ÷ (bandwidth · fraction)``
  fitted to the measured (batch, context) grid (non-negative least squares on relative residuals), per
  layer; the kernel term, one a layer a step, replaces the class step overhead's share for attention.
* **Prefill attention**: ``seconds = kernel + FLOPs ÷ (peak · MFU)``, the MFU fitted to the measured prompt
  lengths, in place of the class's attention MFU.
* **All-reduce**: ``latency + bytes ÷ rate`` fitted to the measured sizes, used when the table was
  measured over as many GPUs as the shape's TP degree.

:func:`gpuplace.planner.kernel_fit.kernel_fit` scores the model built from the table (each point held out
of it) and the class defaults against the table's own points, per regime. Pure: no torch, no I/O.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from gpuplace.catalog.gemm_curves import gemm_roofline_s
from gpuplace.errors import InvalidInput
from gpuplace.planner.hardware import SHARED_OVERHEAD, ReplicaHardware
from gpuplace.planner.steptime import (
    CLASS_ATTENTION_KERNEL_S,
    StepTimeModel,
    kv_bytes_per_token_per_gpu,
    roofline_step_model,
)
from gpuplace.types import ModelArch
from gpuplace.types.engine import Efficiencies
from gpuplace.types.operators import (
    ALL_REDUCE,
    ATTENTION_DECODE,
    ATTENTION_PREFILL,
    GEMM,
    OperatorRow,
    OperatorTable,
    sharded_shapes,
)
from gpuplace.types.precision import BF16, Precision

BODY_LAYERS: tuple[str, ...] = ("qkv", "o", "gate_up", "down")
FP8 = "fp8"
_EXTEND = 2**17  # the curve's last point: the largest measured count, held proportionally beyond it


def roofline_s(row: OperatorRow, bandwidth_gbps: float, peak_tflops: float) -> float:
    """The row's kernel at the device's full bandwidth or peak, whichever binds."""
    return max(row.bytes / (bandwidth_gbps * 1e9), row.flops / (peak_tflops * 1e12) if peak_tflops else 0.0)


def interp_log(points: Sequence[tuple[float, float]], x: float) -> float:
    """``y(x)`` linear in log x between ``points`` (sorted by x), held beyond both ends."""
    if x <= points[0][0]:
        return points[0][1]
    if x >= points[-1][0]:
        return points[-1][1]
    k = bisect.bisect_left(points, (x,))
    (x0, y0), (x1, y1) = points[k - 1], points[k]
    return y0 + (y1 - y0) * math.log(x / x0) / math.log(x1 / x0)


@dataclass(frozen=True, slots=True)
class KernelCurves:
    """What one operator table says of its device for one GEMM dtype (``fp8`` or the bf16/fp16 one)."""

    gpu: str
    dtype: str
    bandwidth_gbps: float
    peak_tflops: float  # the GEMM dtype's peak
    attention_peak_tflops: float
    # per layer (qkv, o, gate_up, down, lm_head): (tokens, achieved fraction of the roofline), by tokens
    layers: tuple[tuple[str, tuple[tuple[float, float], ...]], ...]
    attention_kernel_s: float  # per attention kernel (one a layer a step): the decode fit's intercept
    decode_per_seq_s: float  # per sequence, per layer
    decode_fraction: float  # of the bandwidth, reading K and V
    prefill_mfu: float
    all_reduce: tuple[int, float, float] | None  # (ranks, latency_s, bytes per second)
    created_at: str = ""

    def fraction(self, layer: str, tokens: float) -> float:
        """The measured fraction of ``layer`` at ``tokens`` (linear in log tokens between measured counts,
        held beyond them); a layer the table lacks takes the time-weighted fraction of those it has."""
        points = dict(self.layers).get(layer)
        if points:
            return interp_log(points, tokens)
        if not self.layers:
            raise InvalidInput("operators", self.gpu, f"has no GEMMs in {self.dtype}", "Measure them again")
        return statistics.fmean(interp_log(p, tokens) for _, p in self.layers)


def layer_fractions(rows: Sequence[OperatorRow], bw: float, peak: float) -> tuple[tuple[float, float], ...]:
    """(tokens, Σ roofline ÷ Σ measured) of ``rows`` by token count."""
    by_t: dict[int, tuple[float, float]] = {}
    for r in rows:
        roof, took = by_t.get(r.tokens, (0.0, 0.0))
        by_t[r.tokens] = (roof + roofline_s(r, bw, peak), took + r.seconds)
    return tuple((float(t), roof / took) for t, (roof, took) in sorted(by_t.items()))


def nnls_relative(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Non-negative least squares of ``x @ c ≈ y`` on relative residuals (an active set: few terms)."""
    a = x / y[:, None]
    target = np.ones_like(y)
    active = list(range(x.shape[1]))
    coef = np.zeros(x.shape[1])
    while active:
        sol, *_ = np.linalg.lstsq(a[:, active], target, rcond=None)
        if np.all(sol >= 0):
            coef[:] = 0
            coef[active] = sol
            break
        del active[int(np.argmin(sol))]
    return coef


def gemm_dtype(table: OperatorTable, fp8_weights: bool) -> str | None:
    """The table's GEMM dtype for bf16 or FP8 (W8A8) weights; None when it has none."""
    have = {r.dtype for r in table.of(GEMM)}
    if fp8_weights:
        return FP8 if FP8 in have else None
    return next((d for d in ("bfloat16", "float16", "float32") if d in have), None)


def decode_terms(r: OperatorRow, bw_gbps: float) -> list[float]:
    """Decode attention, one layer: a kernel, its sequences, and the K/V bytes it reads."""
    return [1.0, float(r.batch), r.bytes / (bw_gbps * 1e9)]


def prefill_terms(r: OperatorRow, peak_tflops: float) -> list[float]:
    """Prefill attention, one layer: a kernel, and its FLOPs at the peak."""
    return [1.0, r.flops / (peak_tflops * 1e12)]


def kernel_curves(table: OperatorTable, dtype: str) -> KernelCurves:
    """Fit :class:`KernelCurves` to ``table``'s rows of GEMM dtype ``dtype`` (attention in its own dtype)."""
    bw = table.bandwidth_gbps
    peak = float(table.peak_tflops.get(dtype, 0.0))
    gemms = table.of(GEMM, dtype)
    if not gemms:
        raise InvalidInput(
            "operators", table.gpu or table.device.name, f"has no {dtype} GEMMs", "Measure them"
        )
    layers = tuple(
        (layer, layer_fractions([r for r in gemms if r.layer == layer], bw, peak))
        for layer in dict.fromkeys(r.layer for r in gemms)
    )
    decode = table.of(ATTENTION_DECODE)
    attn_dtype = decode[0].dtype if decode else (table.of(ATTENTION_PREFILL) or gemms)[0].dtype
    attn_peak = float(table.peak_tflops.get(attn_dtype, peak))
    kernel, per_seq, fraction = 0.0, 0.0, math.nan
    if decode:
        x = np.array([decode_terms(r, bw) for r in decode], dtype=float)
        c = nnls_relative(x, np.array([r.seconds for r in decode]))
        kernel, per_seq = float(c[0]), float(c[1])
        fraction = 1.0 / float(c[2]) if c[2] > 0 else math.nan
    prefill = table.of(ATTENTION_PREFILL)
    mfu = math.nan
    if prefill and attn_peak:
        x = np.array([prefill_terms(r, attn_peak) for r in prefill])
        c = nnls_relative(x, np.array([r.seconds for r in prefill]))
        mfu = 1.0 / float(c[1]) if c[1] > 0 else math.nan
    reduce = table.of(ALL_REDUCE)
    fitted: tuple[int, float, float] | None = None
    if len(reduce) >= 2:
        x = np.array([[1.0, r.bytes] for r in reduce])
        c = nnls_relative(x, np.array([r.seconds for r in reduce]))
        fitted = (reduce[0].ranks, float(c[0]), 1.0 / float(c[1]) if c[1] > 0 else math.inf)
    return KernelCurves(
        gpu=table.gpu,
        dtype=dtype,
        bandwidth_gbps=bw,
        peak_tflops=peak,
        attention_peak_tflops=attn_peak,
        layers=layers,
        attention_kernel_s=kernel,
        decode_per_seq_s=per_seq,
        decode_fraction=fraction,
        prefill_mfu=mfu,
        all_reduce=fitted,
        created_at=table.created_at,
    )


def linear_curves(
    arch: ModelArch,
    curves: KernelCurves,
    *,
    tp: int,
    bandwidth_gbps: float,
    peak_tflops: float,
) -> tuple[tuple[tuple[float, float], ...], tuple[tuple[float, float], ...]]:
    """(body, head) curves of (tokens, seconds) for all of ``arch``'s linear layers on one GPU of a TP
    group: the roofline of each layer's shard (:func:`~gpuplace.types.operators.sharded_shapes`, as vLLM
    shards it) at this shape's bandwidth and peak, divided by the measured fraction at the same token
    count."""
    bw, peak = bandwidth_gbps * 1e9, peak_tflops * 1e12
    wb = 1.0 if curves.dtype == FP8 else 2.0
    counts = sorted({t for _, points in curves.layers for t, _ in points})
    grid = [*counts, float(_EXTEND)] if counts and counts[-1] < _EXTEND else counts
    shard = {name: (n, k) for name, n, k in sharded_shapes(arch, tp)}
    body: list[tuple[float, float]] = []
    head: list[tuple[float, float]] = []
    for t in grid:
        total = 0.0
        for name in BODY_LAYERS:
            n, k = shard[name]
            total += gemm_roofline_s(t, n, k, wb, bw, peak) / curves.fraction(name, t)
        body.append((t, arch.num_layers * total))
        n, k = shard["lm_head"]
        head.append((t, gemm_roofline_s(t, n, k, 2.0, bw, peak) / curves.fraction("lm_head", t)))
    return tuple(body), tuple(head)


def with_kernels(efficiencies: Efficiencies, curves: KernelCurves) -> Efficiencies:
    """``efficiencies`` with the attention MFU the table measured, and where it came from."""
    sources = dict(efficiencies.sources)
    mfu = efficiencies.attention_mfu
    if math.isfinite(curves.prefill_mfu):
        mfu = curves.prefill_mfu
        sources["attention_mfu"] = (
            f"measured on {curves.gpu} (gpuplace profile --operators {curves.created_at})"
        )
    return replace(efficiencies, attention_mfu=mfu, sources=sources)


OPERATORS_FIX = (
    "Measure the table on that GPU (gpuplace profile --operators on it), or leave --operators out to price "
    "it on the GPU-class defaults"
)


def operators_refusal(table: OperatorTable, gpu: str) -> str:
    """Why ``table`` cannot price GPU class ``gpu`` ("" when it can): kernels measured on another GPU,
    or on a CPU, say nothing of this one (a CPU never calibrates a GPU)."""
    if table.gpu == gpu:
        return ""
    d = table.device
    if d.kind != "cuda":
        return (
            f"was measured on the CPU ({d.name}), which never calibrates a GPU; {gpu} is priced on its class"
        )
    if not table.gpu:
        return f"was measured on {d.name}, which is not in the GPU catalog, not on {gpu}"
    return f"was measured on {table.gpu}, not on {gpu}"


def operator_step_model(
    arch: ModelArch,
    shape: ReplicaHardware,
    eff: Efficiencies,
    table: OperatorTable,
    precision: Precision = BF16,
) -> tuple[StepTimeModel, tuple[str, ...]]:
    """The step-time model of ``arch`` on ``shape`` with ``table``'s measured kernels in place of the
    class defaults (``table`` measured on ``shape``'s GPU class: checked by the caller), and notes."""
    dtype = gemm_dtype(table, precision.fp8_weights)
    if dtype is None:
        raise InvalidInput(
            "operators",
            table.gpu,
            f"has no {'fp8' if precision.fp8_weights else 'bf16'} GEMMs for {precision.label} weights",
            "Measure them: gpuplace profile --operators --dtypes auto",
        )
    curves = kernel_curves(table, dtype)
    base = roofline_step_model(arch, shape, with_kernels(eff, curves), precision, measured_gemms=False)
    spec = shape.spec
    bw = spec.hbm_bandwidth_gbps * shape.bandwidth_share
    peak = (
        spec.fp8_tflops
        if precision.fp8_weights
        else (spec.peak_tflops("bfloat16") or spec.peak_tflops("float16"))
    )
    body, head = linear_curves(
        arch, curves, tp=shape.tp, bandwidth_gbps=bw, peak_tflops=peak * shape.compute_share
    )
    slow = SHARED_OVERHEAD if shape.shared else 1.0
    changes: dict[str, object] = {
        "gemm_curve": tuple((t, s * slow) for t, s in body),
        "head_curve": tuple((t, s * slow) for t, s in head),
        "weights_s": 0.0,
        "gemm_s_per_token": 0.0,
        "head_s_per_sample": 0.0,
    }
    notes = [f"{spec.name}: linear layers and attention from kernels measured on it ({table.describe()})"]
    if math.isfinite(curves.decode_fraction):
        kv = kv_bytes_per_token_per_gpu(arch, shape.tp, precision.kv_bytes)
        changes["kv_s_per_token"] = kv / (bw * 1e9 * curves.decode_fraction) * slow
        changes["per_seq_s"] = base.per_seq_s + arch.num_layers * curves.decode_per_seq_s * slow
        # one attention kernel a layer a step, as measured, in place of the class overhead's share for it
        extra = arch.num_layers * (curves.attention_kernel_s - CLASS_ATTENTION_KERNEL_S)
        changes["fixed_s"] = max(0.0, base.fixed_s + extra * slow)
    if curves.all_reduce is not None and shape.tp > 1:
        ranks, latency, rate = curves.all_reduce
        if ranks == shape.tp:
            changes["comm_s_per_step"] = 2 * arch.num_layers * latency * slow
            changes["comm_s_per_token"] = 2 * arch.num_layers * arch.hidden_size * 2 / rate * slow
        else:
            notes.append(f"{spec.name}: all-reduce measured over {ranks} GPUs, not {shape.tp}: link defaults")
    if arch.name != table.model.name or shape.tp > 1:
        notes.append(
            f"{spec.name}: GEMM fractions of the roofline measured with {table.model.name}'s layers at TP 1, "
            f"applied to {arch.name} at TP {shape.tp} at the same tokens per step"
        )
    source = (
        f"measured kernels of {spec.name} ({dtype}, gpuplace profile --operators {table.created_at}) "
        f"× TP{shape.tp}"
    )
    return replace(base, source=source, **changes), tuple(notes)  # type: ignore[arg-type]
