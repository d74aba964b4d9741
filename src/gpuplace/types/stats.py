"""Statistics and JSON helpers every value type uses: :class:`Distribution`, percentiles, NaN-safe JSON.

Standard library only. A :class:`Distribution` is how every latency sample is summarised (profiles,
load tests, predictions), with vLLM's percentile method so figures compare with vLLM's benchmarks.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

PERCENTILES: tuple[int, ...] = (50, 90, 95, 99)


def json_clean(value: Any) -> Any:
    """JSON has no NaN or infinity: write them as null (read back as NaN); tuples become lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: json_clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_clean(v) for v in value]
    return value


def json_num(value: Any) -> float:
    """The inverse of :func:`json_clean` for one number: null reads back as NaN."""
    return math.nan if value is None else float(value)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile of already sorted values (numpy's default, 'linear').

    vLLM's benchmark uses ``np.percentile`` with that method, so our figures are comparable.
    """
    if not sorted_values:
        return math.nan
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q={q!r} is outside [0, 100]")
    rank = (len(sorted_values) - 1) * q / 100
    lo = math.floor(rank)
    hi = math.ceil(rank)
    if lo == hi:
        return float(sorted_values[lo])
    return float(sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (rank - lo))


@dataclass(frozen=True, slots=True)
class Distribution:
    """Summary of a sample: count, mean, median, population std, min, max and percentiles.

    ``std`` is the population standard deviation (``np.std`` default), as vLLM reports it.
    """

    count: int
    mean: float
    median: float
    std: float
    min: float
    max: float
    p50: float
    p90: float
    p95: float
    p99: float

    @classmethod
    def of(cls, samples: Iterable[float]) -> Distribution:
        values = sorted(float(v) for v in samples)
        n = len(values)
        if n == 0:
            nan = math.nan
            return cls(0, nan, nan, nan, nan, nan, nan, nan, nan, nan)
        mean = math.fsum(values) / n
        std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / n)
        p = {q: percentile(values, q) for q in PERCENTILES}
        return cls(n, mean, p[50], std, values[0], values[-1], p[50], p[90], p[95], p[99])

    @classmethod
    def weighted(cls, pairs: Iterable[tuple[float, float]]) -> Distribution:
        """The summary of (value, weight) pairs, each value counted ``weight`` times (a step's duration
        is the gap before the next token of every sequence it decodes); a percentile interpolates
        between the midpoints of the values' shares. Non-finite values and weights ≤ 0 are dropped."""
        kept = sorted((float(v), float(w)) for v, w in pairs if math.isfinite(v) and w > 0)
        if not kept:
            return cls.of(())
        total = math.fsum(w for _, w in kept)
        mean = math.fsum(v * w for v, w in kept) / total
        std = math.sqrt(math.fsum(w * (v - mean) ** 2 for v, w in kept) / total)
        ranks, acc = [], 0.0
        for _, w in kept:
            ranks.append((acc + w / 2) / total * 100)
            acc += w

        def at(q: float) -> float:
            if q <= ranks[0]:
                return kept[0][0]
            k = bisect.bisect_left(ranks, q)
            if k == len(ranks):
                return kept[-1][0]
            (v0, _), (v1, _) = kept[k - 1], kept[k]
            return v0 + (v1 - v0) * (q - ranks[k - 1]) / (ranks[k] - ranks[k - 1])

        p = {q: at(q) for q in PERCENTILES}
        return cls(round(total), mean, p[50], std, kept[0][0], kept[-1][0], p[50], p[90], p[95], p[99])

    @classmethod
    def from_percentiles(cls, *, p50: float, p99: float) -> Distribution:
        """A summary known only by its median and 99th percentile (a file written before predictions
        carried whole distributions, a hand-made figure): every other statistic is NaN, the count 0."""
        nan = math.nan
        return cls(0, nan, p50, nan, nan, nan, p50, nan, nan, p99)

    def to_json_dict(self) -> dict[str, Any]:
        """The statistics by name, NaN and infinities as null (:func:`json_clean`)."""
        return dict(json_clean(asdict(self)))

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> Distribution:
        """The inverse of :meth:`to_json_dict`: null reads back as NaN."""
        stats = {name: json_num(data.get(name)) for name in cls.__dataclass_fields__ if name != "count"}
        return cls(count=int(data.get("count") or 0), **stats)

    def flat(self, prefix: str) -> dict[str, float]:
        """Columns ``<prefix>_<stat>`` for a table row (count as a float for a uniform dtype)."""
        return {f"{prefix}_{k}": float(v) for k, v in asdict(self).items()}

    @classmethod
    def from_flat(cls, row: Mapping[str, Any], prefix: str) -> Distribution:
        stats = {name: float(row[f"{prefix}_{name}"]) for name in cls.__dataclass_fields__ if name != "count"}
        count = row[f"{prefix}_count"]
        return cls(count=0 if count != count else int(count), **stats)
