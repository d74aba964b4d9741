"""The operator table: kernels timed on one device for one model's layer shapes (``gpuplace profile
--operators``), the ground a step-time prediction stands on when it was measured on the user's own GPU.

One row per timed kernel: a GEMM of ``tokens`` rows through one of the model's linear layers (``qkv``,
``o``, ``gate_up``, ``down``, ``lm_head``; fused as vLLM fuses them), prefill attention over a causal
prompt of ``tokens`` tokens, decode attention of ``batch`` sequences over ``context`` cached tokens each,
or an all-reduce of ``bytes`` over ``ranks`` GPUs. ``seconds`` is one kernel (one layer for attention).
The table names the device it ran on (:class:`~gpuplace.types.profile.DeviceInfo`), the model and the
peaks the roofline divides by, so that a reader can refuse a table measured elsewhere.

:func:`gpuplace.profiling.operator_table.write_operator_table` and :func:`read_operator_table` there are its
one writer and reader. Pure data: no torch.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from gpuplace.errors import InvalidInput
from gpuplace.types.catalog import ModelArch
from gpuplace.types.profile import DeviceInfo

OPERATORS_FORMAT = "gpuplace-operators/1"
GEMM = "gemm"
ATTENTION_PREFILL = "attention_prefill"
ATTENTION_DECODE = "attention_decode"
ALL_REDUCE = "all_reduce"
OPS: tuple[str, ...] = (GEMM, ATTENTION_PREFILL, ATTENTION_DECODE, ALL_REDUCE)
LAYERS: tuple[str, ...] = ("qkv", "o", "gate_up", "down", "lm_head")


@dataclass(frozen=True, slots=True)
class OperatorRow:
    """One timed kernel. ``n``/``k`` are a GEMM's output and input widths; ``flops`` and ``bytes`` are
    what the roofline counts for it (weights, activations in and out; K and V read)."""

    op: str
    dtype: str
    seconds: float
    layer: str = ""  # a GEMM's layer (LAYERS)
    tokens: int = 0  # GEMM rows; prefill prompt length
    n: int = 0
    k: int = 0
    batch: int = 0  # decode attention: sequences
    context: int = 0  # decode attention: cached tokens per sequence
    ranks: int = 0  # all-reduce: GPUs
    bytes: float = 0.0
    flops: float = 0.0
    repeats: int = 0
    spread: float = 0.0  # (p90 − p10) / median of the repeats

    def to_json_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in (0, 0.0, "")} | {
            "op": self.op,
            "dtype": self.dtype,
            "seconds": self.seconds,
        }

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> OperatorRow:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        row = cls(**known)
        if row.op not in OPS:
            raise ValueError(f"op {row.op!r} is not one of {', '.join(OPS)}")
        if not (math.isfinite(row.seconds) and row.seconds > 0):
            raise ValueError(f"seconds {row.seconds!r} is not a positive time")
        return row


@dataclass(frozen=True, slots=True)
class OperatorTable:
    """Kernels of ``model`` timed on ``device``; ``bandwidth_gbps``/``peak_tflops`` are the roofline's
    denominators (the catalog's for a catalogued GPU, measured on a CPU), ``copy_gbps`` a measured
    device-to-device copy (bytes read and written ÷ time)."""

    device: DeviceInfo
    model: ModelArch
    rows: tuple[OperatorRow, ...]
    bandwidth_gbps: float
    peak_tflops: Mapping[str, float]
    bandwidth_source: str = ""
    copy_gbps: float = math.nan
    attention_backend: str = ""
    gpuplace_version: str = ""
    created_at: str = ""
    notes: tuple[str, ...] = field(default=())

    @property
    def gpu(self) -> str:
        """The catalog GPU class the table was measured on; "" for a CPU or an uncatalogued GPU."""
        return self.device.catalog_gpu if self.device.kind == "cuda" else ""

    @property
    def dtypes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.dtype for r in self.rows))

    def of(self, op: str, dtype: str | None = None) -> tuple[OperatorRow, ...]:
        return tuple(r for r in self.rows if r.op == op and (dtype is None or r.dtype == dtype))

    def describe(self) -> str:
        counts = ", ".join(f"{len(self.of(op))} {op}" for op in OPS if self.of(op))
        where = self.gpu or (
            self.device.name if self.device.kind == "cuda" else f"the CPU ({self.device.name})"
        )
        return f"operators of {self.model.name} on {where} ({', '.join(self.dtypes)}): {counts}"

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "device": self.device.to_json_dict(),
            "model": asdict(self.model),
            "bandwidth_gbps": self.bandwidth_gbps,
            "bandwidth_source": self.bandwidth_source,
            "peak_tflops": dict(self.peak_tflops),
            "copy_gbps": None if math.isnan(self.copy_gbps) else self.copy_gbps,
            "attention_backend": self.attention_backend,
            "gpuplace_version": self.gpuplace_version,
            "created_at": self.created_at,
            "notes": list(self.notes),
            "rows": [r.to_json_dict() for r in self.rows],
        }

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> OperatorTable:
        copy = data.get("copy_gbps")
        return cls(
            device=DeviceInfo.from_json_dict(data["device"]),
            model=ModelArch(**data["model"]),
            rows=tuple(OperatorRow.from_json_dict(r) for r in data["rows"]),
            bandwidth_gbps=float(data["bandwidth_gbps"]),
            bandwidth_source=str(data.get("bandwidth_source", "")),
            peak_tflops={str(k): float(v) for k, v in dict(data["peak_tflops"]).items()},
            copy_gbps=math.nan if copy is None else float(copy),
            attention_backend=str(data.get("attention_backend", "")),
            gpuplace_version=str(data.get("gpuplace_version", "")),
            created_at=str(data.get("created_at", "")),
            notes=tuple(data.get("notes") or ()),
        )


def layer_shapes(arch: ModelArch) -> tuple[tuple[str, int, int], ...]:
    """(layer, n out, k in) of the model's linear layers at TP 1, fused as vLLM fuses them."""
    q = arch.num_attention_heads * arch.head_dim
    kv = arch.num_kv_heads * arch.head_dim
    return (
        ("qkv", q + 2 * kv, arch.hidden_size),
        ("o", arch.hidden_size, q),
        ("gate_up", 2 * arch.intermediate_size, arch.hidden_size),
        ("down", arch.hidden_size, arch.intermediate_size),
        ("lm_head", arch.vocab_size, arch.hidden_size),
    )


COLUMN_PARALLEL = frozenset({"qkv", "gate_up", "lm_head"})  # split n over TP; O and down split k


def kv_heads_per_gpu(arch: ModelArch, tp: int) -> int:
    """KV heads on one GPU of a TP group: split over TP, replicated (one each) when TP exceeds them."""
    return -(-arch.num_kv_heads // tp)


def sharded_shapes(arch: ModelArch, tp: int) -> list[tuple[str, int, int]]:
    """(layer, n, k) of one GPU's shard at ``tp``, as vLLM shards them: KV heads replicated when TP
    exceeds them."""
    if tp < 1:
        raise InvalidInput("tp", tp, "must be at least 1", "")
    out = []
    for name, n, k in layer_shapes(arch):
        if name == "qkv":
            kv = kv_heads_per_gpu(arch, tp) * arch.head_dim
            n = arch.num_attention_heads * arch.head_dim // tp + 2 * kv
        elif name in COLUMN_PARALLEL:
            n //= tp
        else:
            k //= tp
        out.append((name, n, k))
    return out
