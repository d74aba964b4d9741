"""Measured kernels (``gpuplace profile --operators``): the operations that decide an engine step's time,
timed on this device for one model's layer shapes (docs/profiling.md, "Operators").

* **GEMMs**: each linear layer of the model, fused as vLLM fuses them (``qkv``: Q, K and V; ``gate_up``:
  gate and up; ``o``, ``down``, ``lm_head``), over tokens per step from 1 to 16,384 (powers of two), in
  the dtypes the device runs: bf16 (fp32 on a CPU) and, on a GPU with FP8 tensor cores (compute
  capability ≥ 8.9), FP8 e4m3 through ``torch._scaled_mm`` with per-tensor scales (vLLM's W8A8 path uses
  CUTLASS or cuBLASLt kernels of the same kind).
* **Attention**, through torch's ``scaled_dot_product_attention`` (the backend torch picks is named in the
  table: it is not vLLM's paged kernel): prefill over a causal prompt of ``tokens`` tokens, one layer;
  decode of ``batch`` sequences each attending to ``context`` cached tokens (dense K and V), one layer.
* **All-reduce** of a message of ``bytes`` over ``ranks`` processes (NCCL on GPUs, gloo on the CPU), when
  more than one GPU is visible or ranks are asked for.

Timing: on a GPU each measurement replays a CUDA graph of back-to-back calls (as a serving engine runs
its decode steps), timed with CUDA events; the weights (or K and V) rotate over enough copies to exceed
the L2 cache four times, so a small layer is read from HBM as it is in a real step, where every layer's
weights differ. On a CPU, ``perf_counter`` around each call. Each row is the median of ``repeats`` timed
calls after ``warmup`` untimed ones, with its spread.

:mod:`gpuplace.profiling.operator_table` is the table file's one writer and reader.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

import gpuplace
from gpuplace.catalog import load_gpu_catalog
from gpuplace.catalog.models import model_arch_from_config, resolve_model
from gpuplace.errors import InvalidInput
from gpuplace.profiling.device import default_dtype, discover_device, resolve_device, torch_dtype
from gpuplace.profiling.hardware import measure_matmul_tflops, read_bandwidth
from gpuplace.profiling.timing import time_calls
from gpuplace.progress import Progress
from gpuplace.types import ModelArch
from gpuplace.types.operators import (
    ATTENTION_DECODE,
    ATTENTION_PREFILL,
    GEMM,
    OperatorRow,
    OperatorTable,
    layer_shapes,
)
from gpuplace.units import seconds

FP8 = "fp8"  # float8_e4m3fn weights and activations, bf16 out
POWERS_OF_TWO: tuple[int, ...] = tuple(2**i for i in range(15))  # 1 … 16,384
_CPU_CACHE_BYTES = 64 * 2**20  # what the CPU rotation exceeds (no portable way to read the LLC size)
_MAX_COPIES = 64


@dataclass(frozen=True, slots=True)
class OperatorConfig:
    """What to time. ``dtypes`` ``auto``: bf16 (fp32 on a CPU), and fp8 where the GPU has FP8 tensor cores."""

    model: str = "tiny"
    device: str = "auto"
    dtypes: tuple[str, ...] = ("auto",)
    gemm_tokens: tuple[int, ...] = POWERS_OF_TWO
    lm_head_max_tokens: int = 4096  # the head runs on sampled tokens only: one per sequence in a step
    prefill_tokens: tuple[int, ...] = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)
    decode_batches: tuple[int, ...] = (1, 4, 16, 64, 256)
    decode_contexts: tuple[int, ...] = (256, 1024, 4096, 16384)
    max_decode_kv_tokens: int = 2**20  # batch × context cap: the K and V of one layer must fit with copies
    allreduce_ranks: int = 0  # 0: every visible GPU when there are more than one, else none
    allreduce_bytes: tuple[int, ...] = tuple(4**i * 1024 for i in range(10))  # 1 KiB … 256 MiB
    repeats: int = 10
    warmup: int = 3
    seed: int = 0

    def validated(self) -> OperatorConfig:
        for name in ("gemm_tokens", "prefill_tokens", "decode_batches", "decode_contexts", "allreduce_bytes"):
            values = getattr(self, name)
            if any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values):
                raise InvalidInput(name, values, "must be positive integers", "e.g. 1,2,4,8")
        if not self.gemm_tokens:
            raise InvalidInput("gemm_tokens", self.gemm_tokens, "is empty", "Give at least one token count")
        for name in ("repeats", "lm_head_max_tokens", "max_decode_kv_tokens"):
            if getattr(self, name) < 1:
                raise InvalidInput(name, getattr(self, name), "must be at least 1", "")
        if self.warmup < 0 or self.allreduce_ranks < 0 or self.allreduce_ranks == 1:
            raise InvalidInput(
                "warmup/allreduce_ranks",
                (self.warmup, self.allreduce_ranks),
                "need warmup ≥ 0 and ranks 0 (auto) or ≥ 2",
                "e.g. --allreduce-ranks 2",
            )
        return self


def fp8_supported(device: torch.device) -> bool:
    if device.type != "cuda" or not hasattr(torch, "float8_e4m3fn"):
        return False
    major, minor = torch.cuda.get_device_capability(device)
    return (major, minor) >= (8, 9)


def _copies(device: torch.device, nbytes: float) -> int:
    cache = torch.cuda.get_device_properties(device).L2_cache_size if device.type == "cuda" else 0
    cover = 4 * (cache or _CPU_CACHE_BYTES)
    return max(1, min(_MAX_COPIES if device.type == "cuda" else 16, math.ceil(cover / max(nbytes, 1.0))))


def _measured(
    notes: list[str],
    what: str,
    call: Callable[[int], Any],
    copies: int,
    device: torch.device,
    config: OperatorConfig,
) -> tuple[float, float] | None:
    """:func:`time_calls`, or None with a note: one kernel that will not run (out of memory, a missing
    fp8 path) must not cost the rest of the table."""
    try:
        return time_calls(call, copies, device, repeats=config.repeats, warmup=config.warmup)
    except RuntimeError as e:
        notes.append(f"{what}: not timed ({str(e).splitlines()[0][:200]})")
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            torch.cuda.empty_cache()
        return None


def _dtype_bytes(dtype: str) -> int:
    return 1 if dtype == FP8 else torch.empty((), dtype=torch_dtype(dtype)).element_size()


def measure_gemms(
    arch: ModelArch,
    device: torch.device,
    dtype: str,
    config: OperatorConfig,
    progress: Progress,
    notes: list[str],
) -> list[OperatorRow]:
    rows: list[OperatorRow] = []
    b = _dtype_bytes(dtype)
    act = torch.bfloat16 if dtype == FP8 else torch_dtype(dtype)
    gen = torch.Generator(device=device).manual_seed(config.seed)
    for layer, n, k in layer_shapes(arch):
        copies = _copies(device, n * k * b)
        weights = [
            torch.randn(n, k, device=device, dtype=act, generator=gen) / math.sqrt(k) for _ in range(copies)
        ]
        if dtype == FP8:
            weights = [w.to(torch.float8_e4m3fn) for w in weights]
        one = torch.ones((), device=device, dtype=torch.float32)
        for t in config.gemm_tokens:
            if layer == "lm_head" and t > config.lm_head_max_tokens:
                continue
            # torch._scaled_mm takes rows in multiples of 16: fewer are timed padded (memory-bound there,
            # the weights dominate the bytes), as the table's notes say
            rows_timed = -(-t // 16) * 16 if dtype == FP8 else t
            x = torch.randn(rows_timed, k, device=device, dtype=act, generator=gen)
            if dtype == FP8:
                x8 = x.to(torch.float8_e4m3fn)

                def call(i: int, x8: torch.Tensor = x8, w: list[torch.Tensor] = weights) -> torch.Tensor:
                    return torch._scaled_mm(x8, w[i].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)  # noqa: B023

                out_bytes = 2
            else:

                def call(i: int, x8: torch.Tensor = x, w: list[torch.Tensor] = weights) -> torch.Tensor:
                    return torch.nn.functional.linear(x8, w[i])

                out_bytes = b
            timed = _measured(notes, f"gemm {dtype} {layer} {t} tokens", call, copies, device, config)
            if timed is None:
                continue
            seconds, spread = timed
            rows.append(
                OperatorRow(
                    op=GEMM,
                    dtype=dtype,
                    seconds=seconds,
                    layer=layer,
                    tokens=t,
                    n=n,
                    k=k,
                    bytes=float(n * k * b + t * k * b + t * n * out_bytes),
                    flops=2.0 * t * n * k,
                    repeats=config.repeats,
                    spread=spread,
                )
            )
            progress.advance(f"gemm {dtype} {layer} {t} tokens: {seconds * 1e6:.1f} µs")
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return rows


def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)


def measure_attention(
    arch: ModelArch,
    device: torch.device,
    dtype: str,
    config: OperatorConfig,
    progress: Progress,
    notes: list[str],
) -> list[OperatorRow]:
    rows: list[OperatorRow] = []
    dt_ = torch_dtype(dtype)
    b = _dtype_bytes(dtype)
    h, kvh, d = arch.num_attention_heads, arch.num_kv_heads, arch.head_dim
    gen = torch.Generator(device=device).manual_seed(config.seed)

    def timed(what: str, seqs: int, queries: int, keys: int, causal: bool, **row: Any) -> None:
        """Time SDPA of ``seqs`` sequences, ``queries`` × ``keys`` each, over enough copies to defeat the
        cache; a row of ``row``'s fields (op, tokens or batch and context, bytes, flops), or a note."""

        def rand(heads: int, length: int) -> torch.Tensor:
            return torch.randn(seqs, heads, length, d, device=device, dtype=dt_, generator=gen)

        copies = _copies(device, row["bytes"])
        qkv = [(rand(h, queries), rand(kvh, keys), rand(kvh, keys)) for _ in range(copies)]
        measured = _measured(notes, what, lambda i: _sdpa(*qkv[i], causal=causal), copies, device, config)
        if measured is not None:
            seconds, spread = measured
            rows.append(
                OperatorRow(dtype=dtype, seconds=seconds, repeats=config.repeats, spread=spread, **row)
            )
            progress.advance(f"{what} {dtype}: {seconds * 1e6:.1f} µs")

    for t in config.prefill_tokens:
        if t <= arch.max_position_embeddings:
            nbytes = float((2 * h + 2 * kvh) * t * d * b)
            flops = 4.0 * h * d * t * (t + 1) / 2
            timed(
                f"prefill attention {t} tokens",
                1,
                t,
                t,
                True,
                op=ATTENTION_PREFILL,
                tokens=t,
                bytes=nbytes,
                flops=flops,
            )
    for batch in config.decode_batches:
        for context in config.decode_contexts:
            if batch * context > config.max_decode_kv_tokens or context > arch.max_position_embeddings:
                continue
            nbytes = float(2 * batch * kvh * context * d * b + 2 * batch * h * d * b)
            flops = 4.0 * batch * h * d * context
            what = f"decode attention {batch}×{context}"
            timed(
                what,
                batch,
                1,
                context,
                False,
                op=ATTENTION_DECODE,
                batch=batch,
                context=context,
                bytes=nbytes,
                flops=flops,
            )
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return rows


def measure_copy_gbps(device: torch.device, size_mib: int = 1024) -> float:
    """A device-to-device copy: bytes read and written ÷ the best of 5 (nan on a CPU: the read probe is
    the CPU's bandwidth)."""
    if device.type != "cuda":
        return math.nan
    src = torch.empty(size_mib * 2**20, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    best = math.inf
    for _ in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        a.record()
        dst.copy_(src)
        b.record()
        torch.cuda.synchronize(device)
        best = min(best, seconds(a.elapsed_time(b)))
    return 2 * src.numel() / best / 1e9


def _dtypes(config: OperatorConfig, device: torch.device) -> tuple[list[str], list[str]]:
    out: list[str] = []
    notes: list[str] = []
    for d in config.dtypes:
        d = d.strip().lower()
        if d == "auto":
            out.append(default_dtype(device))
            if fp8_supported(device):
                out.append(FP8)
            else:
                notes.append(
                    f"fp8: not timed, {device} has no FP8 tensor cores (compute capability < 8.9 or a CPU)"
                )
        elif d in ("fp8", "float8", "float8_e4m3fn"):
            if not fp8_supported(device):
                raise InvalidInput("dtypes", d, f"{device} has no FP8 tensor cores", "Use bfloat16 (or auto)")
            out.append(FP8)
        elif d in ("bf16", "bfloat16", "fp16", "float16", "fp32", "float32"):
            out.append({"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}.get(d, d))
        else:
            raise InvalidInput(
                "dtypes",
                d,
                "not a dtype the operator table times",
                "Use auto, bfloat16, float16, float32 or fp8",
            )
    return list(dict.fromkeys(out)), notes


def run_operators(config: OperatorConfig, *, show_progress: bool = True) -> OperatorTable:
    """Time the model's operators on ``config.device`` (:class:`OperatorConfig`)."""
    config = config.validated()
    created = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    source = resolve_model(config.model)
    device = resolve_device(config.device)
    catalog = load_gpu_catalog()
    info = discover_device(device, catalog)
    arch = model_arch_from_config(source.name, source.config)
    dtypes, notes = _dtypes(config, device)
    if FP8 in dtypes and any(t % 16 for t in config.gemm_tokens):
        notes.append("fp8 GEMMs of a token count that is not a multiple of 16 were timed padded up to one")
    ranks = config.allreduce_ranks or (torch.cuda.device_count() if device.type == "cuda" else 0)
    if ranks < 2:
        ranks = 0
        notes.append("all-reduce: not timed, one device visible (--allreduce-ranks N times N processes)")
    elif device.type == "cuda" and ranks > torch.cuda.device_count():
        raise InvalidInput(
            "allreduce_ranks",
            ranks,
            f"only {torch.cuda.device_count()} GPUs are visible",
            "Ask for fewer ranks",
        )
    if device.type == "cuda" and info.catalog_gpu:
        spec = catalog.get(info.catalog_gpu)
        bandwidth, bw_source = spec.hbm_bandwidth_gbps, f"catalog:{spec.name}"
        peaks = {d: (spec.fp8_tflops if d == FP8 else spec.peak_tflops(d)) for d in dtypes}
    else:
        bandwidth, bw_source = read_bandwidth(device)
        peaks = {d: measure_matmul_tflops(device, torch_dtype(d)) for d in dtypes if d != FP8}
        if device.type == "cuda":
            notes.append(f"{info.name} is not in the GPU catalog: bandwidth and peaks measured")
    gemms = len(config.gemm_tokens) * 5
    total = (
        len(dtypes) * gemms
        + len(config.prefill_tokens)
        + len(config.decode_batches) * len(config.decode_contexts)
    )
    rows: list[OperatorRow] = []
    backend = f"torch {torch.__version__} scaled_dot_product_attention (dense K/V; the backend torch picks)"
    with Progress(
        total + (1 if ranks else 0), f"operators of {arch.name} on {device}", enabled=show_progress
    ) as progress:
        with torch.inference_mode():
            for d in dtypes:
                rows += measure_gemms(arch, device, d, config, progress, notes)
            attention_dtype = next((d for d in dtypes if d != FP8), default_dtype(device))
            rows += measure_attention(arch, device, attention_dtype, config, progress, notes)
        if ranks:
            from gpuplace.profiling.allreduce import measure_allreduce

            rows += measure_allreduce(device, ranks, config.allreduce_bytes, config.repeats)
            progress.advance(f"all-reduce over {ranks} ranks")
    return OperatorTable(
        device=info,
        model=arch,
        rows=tuple(rows),
        bandwidth_gbps=bandwidth,
        bandwidth_source=bw_source,
        peak_tflops=peaks,
        copy_gbps=measure_copy_gbps(device),
        attention_backend=backend,
        gpuplace_version=gpuplace.__version__,
        created_at=created,
        notes=tuple(notes),
    )
