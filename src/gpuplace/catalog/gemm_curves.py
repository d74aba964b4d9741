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
any model with a preset's shapes takes them; a model, dtype or TP degree the file lacks gets None and keeps
the roofline. A GPU the file lacks borrows its kernel sibling's curves (:func:`kernel_sibling`: the
measured GPU of the same architecture and compute capability with the nearest memory bandwidth, an A100
PCIe the A100 SXM's), each point scaled by the ratio of the two GPUs' rooflines at that token count
(:func:`gemm_curves_for`): the sibling's measured fraction of its roofline, carried over to the datasheet
of the GPU asked for.
"""

from __future__ import annotations

import csv
import functools
import math
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from gpuplace.catalog.gpus import DATA_DIR, GpuCatalog, load_gpu_catalog
from gpuplace.errors import InvalidInput
from gpuplace.types import GpuSpec, ModelArch
from gpuplace.types.operators import layer_shapes, sharded_shapes

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


def number_cell(cell: str, where: str, column: str, *, zero: bool = False) -> float:
    """A finite positive number (or zero, with ``zero``) from a bundled CSV cell; else refused naming the
    file, line and column."""
    try:
        value = float(cell)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and (value >= 0 if zero else value > 0)):
        need = "a non-negative number" if zero else "a positive number"
        raise InvalidInput(f"{where} {column}", cell, f"must be {need}", "Rewrite the file")
    return value


def _whole(cell: str, where: str, column: str) -> int:
    """A positive whole number (a TP degree: ``2.5`` is not one, and ``2.0`` is not how the file writes
    one)."""
    if not cell.strip().isdigit() or int(cell) < 1:
        raise InvalidInput(
            f"{where} {column}", cell, "must be a whole number of at least 1", "Rewrite the file"
        )
    return int(cell)


def data_rows(file: Path, columns: tuple[str, ...]) -> Iterator[tuple[str, dict[str, str]]]:
    """(``file:line``, row) of a bundled CSV whose header must be ``columns``."""
    with file.open(newline="") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) != columns:
            raise InvalidInput(
                file.name, ",".join(reader.fieldnames or ()), "has other columns", ",".join(columns)
            )
        for line, row in enumerate(reader, start=2):
            yield f"{file.name}:{line}", row


@functools.cache
def load_gemm_curves(path: Path | None = None) -> dict[tuple[str, str, str, int], GemmCurves]:
    """Every curve of the file (the bundled one by default), by (gpu, dtype, shapes, tp); a malformed
    cell is refused naming its line and column."""
    file = path or DATA_DIR / GEMM_CURVES_FILE
    points: dict[tuple[str, str, str, int], list[tuple[float, float, float]]] = defaultdict(list)
    sources: dict[tuple[str, str, str, int], str] = {}
    for where, row in data_rows(file, COLUMNS):
        tp, tokens = _whole(row["tp"], where, "tp"), number_cell(row["tokens"], where, "tokens")
        key = (row["gpu"], row["dtype"], row["shapes"], tp)
        layer, head = (
            number_cell(row["layer_s"], where, "layer_s"),
            number_cell(row["lm_head_s"], where, "lm_head_s"),
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


@functools.cache
def _bundled_catalog() -> GpuCatalog:
    """The bundled GPU catalog, read once: the measured tables are of its GPUs (a user's catalog may not
    name them), and the step model asks for a sibling every time it prices a shape."""
    return load_gpu_catalog(DATA_DIR / "gpus.csv")


def kernel_sibling(spec: GpuSpec, measured: set[str]) -> GpuSpec | None:
    """Of the ``measured`` GPUs (catalog names), the one whose kernels stand in for ``spec``'s: same
    architecture and compute capability (the same tensor cores and kernels), nearest memory bandwidth;
    None when ``spec`` is itself measured or none matches."""
    if spec.name in measured:
        return None
    catalog = _bundled_catalog()
    kin = [
        g
        for g in (catalog.find(name) for name in sorted(measured))
        if g is not None
        and g.architecture == spec.architecture
        and g.compute_capability == spec.compute_capability
    ]
    if not kin or spec.hbm_bandwidth_gbps <= 0:
        return None
    return min(kin, key=lambda g: abs(math.log(g.hbm_bandwidth_gbps / spec.hbm_bandwidth_gbps)))


def gemm_roofline_s(t: float, n: float, k: float, wbytes: float, bw: float, peak: float) -> float:
    """The roofline of one ``t × k`` by ``k × n`` GEMM (weights of ``wbytes`` bytes, bf16 out): bytes ÷
    ``bw`` (bytes/s) or FLOPs ÷ ``peak`` (FLOP/s), whichever is longer."""
    nbytes = n * k * wbytes + t * k * wbytes + t * n * 2
    return max(nbytes / bw, 2 * t * n * k / peak if peak else 0.0)


def _roofline(spec: GpuSpec, shapes: list[tuple[str, int, int]], t: float, dtype: str) -> tuple[float, float]:
    """(body layer, LM head) rooflines on ``spec`` at ``t`` tokens: the body in ``dtype``, the head bf16."""
    wb = 1.0 if dtype == "fp8" else 2.0
    bw = spec.hbm_bandwidth_gbps * 1e9
    peak, head_peak = spec.peak_tflops(dtype) * 1e12, spec.peak_tflops("bfloat16") * 1e12
    body = sum(gemm_roofline_s(t, n, k, wb, bw, peak) for name, n, k in shapes if name != "lm_head")
    n, k = next((n, k) for name, n, k in shapes if name == "lm_head")
    return body, gemm_roofline_s(t, n, k, 2.0, bw, head_peak)


def gemm_curves_for(spec: GpuSpec, arch: ModelArch, tp: int, dtype: str = "bfloat16") -> GemmCurves | None:
    """``spec``'s own measured curves, else its :func:`kernel_sibling`'s scaled point by point by the ratio
    of the two rooflines (so a GPU with 5% less bandwidth takes 5% longer where the sibling was
    memory-bound, and its own peak where it was compute-bound), else None."""
    own = measured_gemm_curves(spec.name, arch, tp, dtype)
    if own is not None or not spec.peak_tflops(dtype):
        return own
    key = (dtype, shapes_key(arch), tp)
    sibling = kernel_sibling(spec, {g for g, d, s, t in load_gemm_curves() if (d, s, t) == key})
    if sibling is None:
        return None
    curves = measured_gemm_curves(sibling.name, arch, tp, dtype)
    assert curves is not None  # the sibling was chosen among the GPUs with this key
    shapes = sharded_shapes(arch, tp)
    ratio = {
        t: tuple(
            a / b
            for a, b in zip(
                _roofline(spec, shapes, t, dtype), _roofline(sibling, shapes, t, dtype), strict=True
            )
        )
        for t, _ in curves.layer
    }
    return GemmCurves(
        spec.name,
        dtype,
        tp,
        tuple((t, s * ratio[t][0]) for t, s in curves.layer),
        tuple((t, s * ratio[t][1]) for t, s in curves.head),
        f"{sibling.name}'s curves ({curves.source}) scaled by the roofline ratio of {spec.name} to it",
    )
