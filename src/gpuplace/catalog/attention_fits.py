"""Measured decode attention: ``attention_fits.csv`` and the lookup the step model uses.

The class roofline prices a decode step's attention as the K and V bytes of every cached token ÷
(bandwidth · MBU), plus a 3 µs share of the step overhead for its kernel, one a layer. NVIDIA
AIConfigurator measured vLLM's own decode-attention kernels (``generation_attention``) over batches of 1 to
2,048 sequences and 2 to 131,072 cached tokens on the A100 SXM, H100 SXM and H200 SXM. Fitted to those
tables with the same three terms as a user's operator table (``planner/kernels.py``: a kernel a layer a
step, a cost per sequence, and the K/V bytes at a fraction of the bandwidth), the kernel term is 11–18 µs,
not 3, and the bandwidth fraction differs from the GEMMs' MBU: 0.69–0.79 on the A100 (its MBU 0.75), 0.93
bf16 and 0.74–0.83 FP8 on the H100 (MBU 0.87) (docs/benchmarks/attention_fits.md).

The file holds one fit per GPU, KV-cache dtype and heads on one GPU (query heads, KV heads, head size),
written by ``tests/benchmarks/write_attention_fits.py`` from AIConfigurator 0.12.0's tables (read in its
own venv). :func:`decode_attention_fit` finds a model's fit at a TP degree; a GPU the file lacks takes its
kernel sibling's fit (:func:`~gpuplace.catalog.gemm_curves.kernel_sibling`) at its own bandwidth; heads
the file lacks get None and keep the roofline.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from gpuplace.catalog.gemm_curves import data_rows, kernel_sibling, number_cell
from gpuplace.catalog.gpus import DATA_DIR
from gpuplace.errors import InvalidInput
from gpuplace.types import GpuSpec, ModelArch
from gpuplace.types.operators import kv_heads_per_gpu

ATTENTION_FITS_FILE = "attention_fits.csv"
COLUMNS: tuple[str, ...] = (
    "gpu",
    "kv_dtype",
    "query_heads",
    "kv_heads",
    "head_dim",
    "kernel_s",
    "per_seq_s",
    "fraction",
    "points",
    "heldout_median_error",
    "source",
)


@dataclass(frozen=True, slots=True)
class AttentionFit:
    """One layer's decode attention: ``kernel_s + per_seq_s · batch + K/V bytes ÷ (bandwidth · fraction)``."""

    gpu: str
    kernel_s: float
    per_seq_s: float
    fraction: float
    source: str


def heads_on_one_gpu(arch: ModelArch, tp: int) -> tuple[int, int]:
    """(query heads, KV heads) of one GPU's shard."""
    return arch.num_attention_heads // tp, kv_heads_per_gpu(arch, tp)


def kv_dtype_name(kv_bytes: int) -> str:
    return "fp8" if kv_bytes == 1 else "bfloat16"


@functools.cache
def load_attention_fits(path: Path | None = None) -> dict[tuple[str, str, int, int, int], AttentionFit]:
    """Every fit of the file (the bundled one by default) by (gpu, kv dtype, query heads, KV heads, head
    size); a malformed cell is refused naming its line and column."""
    file = path or DATA_DIR / ATTENTION_FITS_FILE
    out: dict[tuple[str, str, int, int, int], AttentionFit] = {}
    for where, row in data_rows(file, COLUMNS):
        q, kv, dim = (int(number_cell(row[c], where, c)) for c in ("query_heads", "kv_heads", "head_dim"))
        fraction = number_cell(row["fraction"], where, "fraction")
        if fraction > 1:
            raise InvalidInput(f"{where} fraction", row["fraction"], "is above 1", "Rewrite the file")
        key = (row["gpu"], row["kv_dtype"], q, kv, dim)
        if key in out:
            raise InvalidInput(file.name, key, "repeats a fit", "Rewrite the file")
        out[key] = AttentionFit(
            row["gpu"],
            number_cell(row["kernel_s"], where, "kernel_s", zero=True),
            number_cell(row["per_seq_s"], where, "per_seq_s", zero=True),
            fraction,
            row["source"],
        )
    return out


def decode_attention_fit(spec: GpuSpec, arch: ModelArch, tp: int, kv_bytes: int) -> AttentionFit | None:
    """The measured decode attention of ``arch``'s heads at ``tp`` on ``spec`` with a KV cache of
    ``kv_bytes`` bytes a value: the GPU's own fit, else its kernel sibling's, else None."""
    q, kv = heads_on_one_gpu(arch, tp)
    dtype = kv_dtype_name(kv_bytes)
    fits = load_attention_fits()
    own = fits.get((spec.name, dtype, q, kv, arch.head_dim))
    if own is not None:
        return own
    rest = (dtype, q, kv, arch.head_dim)
    sibling = kernel_sibling(spec, {k[0] for k in fits if k[1:] == rest})
    return None if sibling is None else fits[(sibling.name, dtype, q, kv, arch.head_dim)]
