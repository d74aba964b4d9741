"""Predicted against measured: the one type that puts a latency prediction beside a measurement.

A prediction (the plan's :class:`~gpuplace.types.plan.Prediction`) and a measurement (a load test's
:class:`~gpuplace.types.loadtest.LatencyReport`) both summarise TTFT and TPOT as a :class:`Distribution`.
:class:`PredictedVsMeasured` holds the two side by side, per metric (:class:`Checked`), and says whether
the comparison applies: a prediction is only ever checked against requests served by the device it is for.
The load test's ``report.json``, the comparison's per-path metrics and the main job's summary all read
this one type; the relative error, (measured − predicted) / predicted, is computed here and nowhere else.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from gpuplace.types.stats import Distribution, json_num

METRICS: tuple[str, ...] = ("ttft", "tpot")
# The percentiles a prediction is checked at (the median and the tail the SLO bounds).
CHECKED_PERCENTILES: tuple[int, ...] = (50, 99)


class HasLatency(Protocol):
    """Anything that summarises TTFT and TPOT: a prediction, a load-test report, a simulation."""

    @property
    def ttft(self) -> Distribution: ...

    @property
    def tpot(self) -> Distribution: ...


def relative_error(measured: float, predicted: float) -> float:
    """(measured − predicted) / predicted: how far a measurement is from its prediction, in the
    prediction's units (+0.2: measured 20% above what was predicted)."""
    return (measured - predicted) / predicted


def _at(d: Distribution, q: int) -> float:
    value: float = getattr(d, f"p{q}")
    return value


@dataclass(frozen=True, slots=True)
class Checked:
    """One latency (TTFT or TPOT) as predicted and as measured, each a :class:`Distribution` (seconds)."""

    predicted: Distribution
    measured: Distribution

    def error(self, q: int) -> float:
        """The relative error at percentile ``q``; NaN when the prediction there is not finite and positive
        (an unstable shape, or no prediction) or nothing was measured."""
        predicted, measured = _at(self.predicted, q), _at(self.measured, q)
        if not (math.isfinite(predicted) and predicted > 0) or math.isnan(measured):
            return math.nan
        return relative_error(measured, predicted)


NO_PREDICTION = Distribution.of(())


@dataclass(frozen=True, slots=True)
class PredictedVsMeasured:
    """TTFT and TPOT, predicted beside measured; ``applies`` when the requests were served by the device
    the prediction is for (else the errors are NaN: figures of two devices are not comparable)."""

    ttft: Checked
    tpot: Checked
    applies: bool = True

    @classmethod
    def of(
        cls, predicted: HasLatency | None, measured: HasLatency, *, applies: bool = True
    ) -> PredictedVsMeasured:
        """``measured`` beside ``predicted`` (None: no prediction, every predicted figure NaN)."""

        def pair(metric: str) -> Checked:
            return Checked(
                getattr(predicted, metric) if predicted is not None else NO_PREDICTION,
                getattr(measured, metric),
            )

        return cls(pair("ttft"), pair("tpot"), applies=applies and predicted is not None)

    def metric(self, name: str) -> Checked:
        if name not in METRICS:
            raise KeyError(name)
        checked: Checked = getattr(self, name)
        return checked

    def error(self, metric: str, q: int) -> float:
        """The relative error of ``metric`` at percentile ``q``; NaN when it does not apply."""
        return self.metric(metric).error(q) if self.applies else math.nan

    def errors(self) -> dict[str, float]:
        """The finite relative errors by figure name (``ttft_p99_s``, ...)."""
        out = {f"{m}_p{q}_s": self.error(m, q) for m in METRICS for q in CHECKED_PERCENTILES}
        return {k: v for k, v in out.items() if not math.isnan(v)}

    def mean_abs_p99_error(self) -> float:
        """Mean |measured − predicted| / predicted over p99 TTFT and p99 TPOT; NaN when none is known."""
        p99 = [abs(self.error(m, 99)) for m in METRICS if not math.isnan(self.error(m, 99))]
        return sum(p99) / len(p99) if p99 else math.nan

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "applies": self.applies,
            **{
                m: {"predicted": c.predicted.to_json_dict(), "measured": c.measured.to_json_dict()}
                for m in METRICS
                for c in (self.metric(m),)
            },
        }

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> PredictedVsMeasured:
        def pair(metric: str) -> Checked:
            d = data[metric]
            return Checked(
                Distribution.from_json_dict(d["predicted"]), Distribution.from_json_dict(d["measured"])
            )

        return cls(pair("ttft"), pair("tpot"), applies=bool(data.get("applies", True)))

    def rows(self) -> dict[str, dict[str, float]]:
        """``report.json``'s ``predicted_vs_measured`` view, one row per checked figure whose prediction is
        finite and positive: ``{"ttft_p99_s": {"predicted_s", "measured_s", "error"}, ...}``."""
        out: dict[str, dict[str, float]] = {}
        if not self.applies:
            return out
        for m in METRICS:
            c = self.metric(m)
            for q in CHECKED_PERCENTILES:
                predicted = _at(c.predicted, q)
                if math.isfinite(predicted) and predicted > 0:
                    out[f"{m}_p{q}_s"] = {
                        "predicted_s": predicted,
                        "measured_s": _at(c.measured, q),
                        "error": relative_error(_at(c.measured, q), predicted),
                    }
        return out

    @classmethod
    def from_rows(cls, rows: Mapping[str, Mapping[str, Any]], measured: HasLatency) -> PredictedVsMeasured:
        """From the ``predicted_vs_measured`` rows of a ``report.json`` written before it held the whole
        prediction: the predicted medians and 99th percentiles only."""

        def pair(metric: str) -> Checked:
            def value(q: int) -> float:
                return json_num((rows.get(f"{metric}_p{q}_s") or {}).get("predicted_s"))

            return Checked(
                Distribution.from_percentiles(p50=value(50), p99=value(99)), getattr(measured, metric)
            )

        return cls(pair("ttft"), pair("tpot"), applies=bool(rows))
