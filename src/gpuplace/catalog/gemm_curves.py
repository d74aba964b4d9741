"""Measured linear-layer times by tokens per step: ``gemm_curves.csv`` and the lookup the step model uses.

The roofline prices a step's linear layers (QKV, O, gate-up, down and the LM head) as ``max(weights ÷
(bandwidth · MBU), FLOPs ÷ (peak · MFU))`` with one MBU and one MFU per GPU class. Real GEMM kernels sit
below that roofline between the two regimes: against NVIDIA AIConfigurator's tables of vLLM's own GEMMs,
the roofline is 0.65–0.85 × the measured time at 128–1024 tokens per step on an A100, narrow TP shards
worst (docs/benchmarks/gemm_tables.md). The file holds, per GPU, dtype, the model's layer shapes and TP
degree, one layer's body GEMMs and the LM head's measured seconds at each tokens-per-step count of the
table, written by ``tests/benchmarks/write_gemm_curves.py`` from AIConfigurator 0.12.0's tables (read in
its own venv; the file names the table and vLLM version in its ``source`` column).

:func:`measured_gemm_curves` finds the rows of a model on a GPU at a TP degree by the model's shapes, so
any model with a preset's shapes takes them; a model, GPU, dtype or TP degree the file lacks gets None and
keeps the roofline.
"""

from __future__ import annotations

import csv
import functools
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from gpuplace.catalog.gpus import DATA_DIR
from gpuplace.errors import InvalidInput
from gpuplace.types import ModelArch
from gpuplace.types.operators import layer_shapes

GEMM_CURVES_FILE = "gemm_curves.csv"
COLUMNS: tuple[str, ...] = ("gpu", "dtype", "shapes", "tp", "tokens", "layer_s", "lm_head_s", "source")


@dataclass(frozen=True, slots=True)
class GemmCurves:
    """One layer's linear GEMMs (``layer``) and the LM head's (``head``) as (tokens, seconds) points."""

    gpu: str
    dtype: str
    tp: int
    layer: tuple[tuple[float, float], ...]
    head: tuple[tuple[float, float], ...]
    source: str


def shapes_key(arch: ModelArch) -> str:
    """The model's layer shapes at TP 1, as the file keys them (``qkv=6144x4096 o=...``)."""
    return " ".join(f"{name}={n}x{k}" for name, n, k in layer_shapes(arch))


def _number(cell: str, where: str, column: str) -> float:
    try:
        value = float(cell)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise InvalidInput(f"{where} {column}", cell, "must be a positive number", "Rewrite the file")
    return value


def _whole(cell: str, where: str, column: str) -> int:
    """A positive whole number (a TP degree: ``2.5`` is not one, and ``2.0`` is not how the file writes
    one)."""
    if not cell.strip().isdigit() or int(cell) < 1:
        raise InvalidInput(
            f"{where} {column}", cell, "must be a whole number of at least 1", "Rewrite the file"
        )
    return int(cell)


@functools.cache
def load_gemm_curves(path: Path | None = None) -> dict[tuple[str, str, str, int], GemmCurves]:
    """Every curve of the file (the bundled one by default), by (gpu, dtype, shapes, tp); a malformed
    cell is refused naming its line and column."""
    file = path or DATA_DIR / GEMM_CURVES_FILE
    points: dict[tuple[str, str, str, int], list[tuple[float, float, float]]] = defaultdict(list)
    sources: dict[tuple[str, str, str, int], str] = {}
    with file.open(newline="") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            raise InvalidInput(
                file.name, ",".join(reader.fieldnames or ()), "has other columns", ",".join(COLUMNS)
            )
        for line, row in enumerate(reader, start=2):
            where = f"{file.name}:{line}"
            tp, tokens = _whole(row["tp"], where, "tp"), _number(row["tokens"], where, "tokens")
            key = (row["gpu"], row["dtype"], row["shapes"], tp)
            layer, head = (
                _number(row["layer_s"], where, "layer_s"),
                _number(row["lm_head_s"], where, "lm_head_s"),
            )
            points[key].append((tokens, layer, head))
            sources[key] = row["source"]
    out = {}
    for key, pts in points.items():
        pts.sort()
        if len({t for t, _, _ in pts}) != len(pts):
            raise InvalidInput(file.name, key, "repeats a tokens count", "Rewrite the file")
        out[key] = GemmCurves(
            key[0],
            key[1],
            key[3],
            tuple((t, s) for t, s, _ in pts),
            tuple((t, h) for t, _, h in pts),
            sources[key],
        )
    return out


def measured_gemm_curves(gpu: str, arch: ModelArch, tp: int, dtype: str = "bfloat16") -> GemmCurves | None:
    """The measured curves of ``arch``'s shapes on ``gpu`` at ``tp`` in ``dtype``, or None."""
    return load_gemm_curves().get((gpu, dtype, shapes_key(arch), tp))
