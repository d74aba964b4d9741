"""The prediction error band: ``prediction_band.csv`` and the function that picks a GPU's edges.

``tests/benchmarks/bench_published.py`` predicts every published measurement gpuplace can express
(``../shared/data/published-llm-serving/``) and writes, per GPU class (an architecture: ``hopper``,
``ampere``, ``ada``) and metric (``ttft_p50``, ``tpot_p50``, ``output_tokens_per_s``, ...), the lowest
and highest ratio measured ÷ predicted over the rows it used, and which rows those were
(docs/benchmarks/published.md). A prediction carries its class's edges: the measurement fell between
``low × predicted`` and ``high × predicted`` on every row of that class. The band is an envelope of
a handful of rows, not a confidence interval; a class without rows has no band, and says so.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gpuplace.catalog.gpus import DATA_DIR
from gpuplace.errors import InvalidInput
from gpuplace.types import GpuSpec

BAND_FILE = "prediction_band.csv"
BAND_COLUMNS: tuple[str, ...] = ("gpu_class", "metric", "low", "high", "rows", "source")
# latencies are sized against their high edge, throughput against its low one
LATENCY_METRICS = ("ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99", "itl_p50", "e2e_p50", "e2e_mean")


@dataclass(frozen=True, slots=True)
class BandEdge:
    """Measured ÷ predicted ranged over ``[low, high]`` on the benchmark ``rows`` of ``gpu_class``."""

    gpu_class: str
    metric: str
    low: float
    high: float
    rows: tuple[int, ...]  # lines of measurements.csv (the header is line 1)
    source: str = ""

    def pessimistic(self, predicted: float) -> float:
        """The edge a plan sizes against: the slow edge of a latency, the low edge of a throughput."""
        return predicted * (self.high if self.metric in LATENCY_METRICS else self.low)

    def describe(self) -> str:
        rows = ", ".join(f"#{r}" for r in self.rows[:8]) + (" …" if len(self.rows) > 8 else "")
        span = f"{self.low:.2f}–{self.high:.2f}"
        return f"{self.metric}: measured {span} × predicted ({self.gpu_class}; rows {rows})"


@dataclass(frozen=True, slots=True)
class PredictionBand:
    """Every edge of the band file, by (GPU class, metric)."""

    edges: Mapping[tuple[str, str], BandEdge]
    source: str

    def for_gpu(self, spec: GpuSpec) -> tuple[BandEdge, ...]:
        """The edges of ``spec``'s class (its architecture), by metric; empty when it has none."""
        return tuple(e for (cls, _), e in sorted(self.edges.items()) if cls == spec.architecture)

    def edge(self, spec: GpuSpec, metric: str) -> BandEdge | None:
        return self.edges.get((spec.architecture, metric))


def load_prediction_band(path: str | os.PathLike[str] | None = None) -> PredictionBand:
    """Read the band file (the bundled one by default); a malformed cell is refused naming it."""
    file = Path(path) if path is not None else DATA_DIR / BAND_FILE
    if not file.is_file():
        raise InvalidInput(
            "band", str(file), "no such file", "Run tests/benchmarks/bench_published.py to write it"
        )
    edges: dict[tuple[str, str], BandEdge] = {}
    with file.open(newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in BAND_COLUMNS if c not in (reader.fieldnames or ())]
        if missing:
            raise InvalidInput(
                BAND_FILE,
                ",".join(reader.fieldnames or ()),
                f"lacks columns {missing}",
                ",".join(BAND_COLUMNS),
            )
        for line, row in enumerate(reader, start=2):
            try:
                low, high = float(row["low"]), float(row["high"])
                rows = tuple(int(r) for r in row["rows"].split() if r)
            except ValueError:
                raise InvalidInput(f"{file.name}:{line}", row, "low/high/rows are not numbers", "") from None
            if not (math.isfinite(low) and math.isfinite(high) and 0 < low <= high):
                raise InvalidInput(f"{file.name}:{line}", (low, high), "needs 0 < low ≤ high", "")
            key = (row["gpu_class"], row["metric"])
            edges[key] = BandEdge(key[0], key[1], low, high, rows, row["source"])
    return PredictionBand(edges, str(file))
