"""The prediction error band: ``prediction_band.csv`` and the function that picks a GPU's edges.

``tests/benchmarks/bench_published.py`` predicts every published measurement gpuplace can express
(``../shared/data/published-llm-serving/``) and writes, per GPU class (an architecture: ``hopper``,
``ampere``, ``ada``), metric (``ttft_p50``, ``tpot_p50``, ``output_tokens_per_s``, ...) and load regime
(``light``, ``heavy``, ``saturated``: :func:`gpuplace.catalog.band_fit.load_regime`), an 80% prediction
interval of measured ÷ predicted (:mod:`gpuplace.catalog.band_fit`), the rows and sources it was drawn from,
and the pooled band of each (metric, regime) over every class (``gpu_class`` ``*``). Its coverage is
measured by leaving each source out in turn (docs/benchmarks/published.md), never on the rows that drew it.

A GPU takes its class's band; a Blackwell GPU, which no published row measured, borrows Hopper's and says
so; a class without a band of its own takes the pooled one and says so; where neither exists there is no
band, said so.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gpuplace.catalog.band_fit import POOLED, REGIMES
from gpuplace.catalog.gpus import DATA_DIR
from gpuplace.errors import InvalidInput
from gpuplace.types import GpuSpec

BAND_FILE = "prediction_band.csv"
BAND_COLUMNS: tuple[str, ...] = (
    "gpu_class", "metric", "regime", "low", "high", "nominal", "rows", "sources", "source",
)  # fmt: skip
# latencies are sized against their high edge, throughput against its low one
LATENCY_METRICS = ("ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99", "itl_p50", "e2e_p50", "e2e_mean")
# a class no published row measured, and the class whose band it borrows
BORROWS = {"blackwell": "hopper"}


@dataclass(frozen=True, slots=True)
class BandEdge:
    """Measured ÷ predicted within ``[low, high]`` at ``nominal`` coverage for ``metric`` in ``regime``,
    drawn from the benchmark ``rows`` of ``sources`` (``gpu_class`` ``*``: pooled over every class)."""

    gpu_class: str
    metric: str
    low: float
    high: float
    rows: tuple[int, ...]  # lines of measurements.csv (the header is line 1)
    source: str = ""
    regime: str = "heavy"
    nominal: float = 0.8
    sources: tuple[str, ...] = ()
    borrowed_by: str = ""  # the class that uses this band though it is not its own

    def pessimistic(self, predicted: float) -> float:
        """The edge a plan sizes against: the slow edge of a latency, the low edge of a throughput."""
        return predicted * (self.high if self.metric in LATENCY_METRICS else self.low)

    def origin(self) -> str:
        own = "every class" if self.gpu_class == POOLED else self.gpu_class
        return f"{own}'s band, borrowed for {self.borrowed_by}" if self.borrowed_by else own

    def describe(self) -> str:
        span = f"{self.low:.2f}–{self.high:.2f}"
        return (
            f"{self.metric} ({self.regime} load): measured {span} × predicted, {self.nominal:.0%} band "
            f"({self.origin()}; {len(self.rows)} rows of {len(self.sources)} sources)"
        )


@dataclass(frozen=True, slots=True)
class PredictionBand:
    """Every edge of the band file, by (GPU class, metric, regime)."""

    edges: Mapping[tuple[str, str, str], BandEdge]
    source: str

    def edge(self, spec: GpuSpec, metric: str, regime: str) -> BandEdge | None:
        """The band of ``spec``'s class for ``metric`` at ``regime``: its own, Hopper's for Blackwell, else
        the pooled one, else None (each but its own says whose it is)."""
        return self.edge_for_class(spec.architecture, metric, regime)

    def edge_for_class(self, gpu_class: str, metric: str, regime: str) -> BandEdge | None:
        if regime not in REGIMES:
            raise InvalidInput("regime", regime, "is not a load regime", f"One of {', '.join(REGIMES)}")
        for cls in (gpu_class, BORROWS.get(gpu_class), POOLED):
            found = self.edges.get((cls, metric, regime)) if cls else None
            if found is not None:
                if cls == gpu_class:
                    return found
                return BandEdge(
                    found.gpu_class, found.metric, found.low, found.high, found.rows, found.source,
                    found.regime, found.nominal, found.sources, borrowed_by=gpu_class,
                )  # fmt: skip
        return None

    def latency_edges(self, gpu_class: str, regime: str) -> tuple[BandEdge | None, BandEdge | None]:
        """The (TTFT, TPOT) edges an SLO on p99s is judged with for ``gpu_class`` at ``regime``: the p99's
        band where the benchmark has one, else the p50's (TPOT: else ITL's)."""

        def first(*metrics: str) -> BandEdge | None:
            found = (self.edge_for_class(gpu_class, m, regime) for m in metrics)
            return next((e for e in found if e is not None), None)

        return first("ttft_p99", "ttft_p50"), first("tpot_p99", "tpot_p50", "itl_p50")

    def for_gpu(self, spec: GpuSpec, regime: str) -> tuple[BandEdge, ...]:
        """The edges ``spec`` takes at ``regime``, one per metric; empty when it has none."""
        metrics = sorted({m for _, m, r in self.edges if r == regime})
        found = (self.edge(spec, m, regime) for m in metrics)
        return tuple(e for e in found if e is not None)


def load_prediction_band(path: str | os.PathLike[str] | None = None) -> PredictionBand:
    """Read the band file (the bundled one by default); a malformed cell is refused naming it."""
    file = Path(path) if path is not None else DATA_DIR / BAND_FILE
    if not file.is_file():
        raise InvalidInput(
            "band", str(file), "no such file", "Run tests/benchmarks/bench_published.py to write it"
        )
    edges: dict[tuple[str, str, str], BandEdge] = {}
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
                low, high, nominal = float(row["low"]), float(row["high"]), float(row["nominal"])
                rows = tuple(int(r) for r in row["rows"].split() if r)
            except ValueError:
                raise InvalidInput(
                    f"{file.name}:{line}", row, "low/high/nominal/rows are not numbers", ""
                ) from None
            if not (math.isfinite(low) and math.isfinite(high) and 0 < low <= high):
                raise InvalidInput(f"{file.name}:{line}", (low, high), "needs 0 < low ≤ high", "")
            if row["regime"] not in REGIMES:
                raise InvalidInput(
                    f"{file.name}:{line}", row["regime"], "is not a load regime", ", ".join(REGIMES)
                )
            key = (row["gpu_class"], row["metric"], row["regime"])
            edges[key] = BandEdge(
                key[0], key[1], low, high, rows, row["source"], key[2], nominal, tuple(row["sources"].split())
            )
    return PredictionBand(edges, str(file))
