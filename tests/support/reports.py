"""Load-test reports made by hand, with the figures a test needs (no server, no summarize)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gpuplace.types import Distribution, PathMetrics
from gpuplace.types.latency import PredictedVsMeasured
from gpuplace.types.loadtest import LatencyReport
from gpuplace.types.plan import Slo


def latency_report(
    ttft: list[float],
    tpot: list[float],
    *,
    completed: int = 100,
    duration_s: float = 100.0,
    attainment: float = 1.0,
) -> LatencyReport:
    empty = Distribution.of(())
    return LatencyReport(
        requests=completed,
        completed=completed,
        failed=0,
        errors={},
        duration_s=duration_s,
        ttft=Distribution.of(ttft),
        tpot=Distribution.of(tpot),
        itl=empty,
        e2e=empty,
        arrival_lag=empty,
        request_throughput_rps=completed / duration_s,
        output_throughput_tps=0.0,
        total_token_throughput_tps=0.0,
        input_tokens=0,
        output_tokens=0,
        goodput_rps=completed * attainment / duration_s,
        slo_attainment=attainment,
        peak_concurrency=1,
        slo=Slo(ttft_p99_s=1.0, tpot_p99_s=0.1, rate_rps=1.0),
    )


def hand_metrics(
    path: str, *, ttft_p99_s: float = math.nan, tpot_p99_s: float = math.nan, **figures: Any
) -> PathMetrics:
    """A path's comparison figures made by hand: every number NaN unless given (``gpus`` 1), TTFT and TPOT
    measured with the given 99th percentiles (medians equal to them), no prediction."""
    base: dict[str, Any] = dict.fromkeys(
        (f for f, t in PathMetrics.__dataclass_fields__.items() if t.type == "float"), math.nan
    )
    base.update({"gpus": 1.0, "serving_target": "kubernetes", "completed": 1, "failed": 0, **figures})
    measured = HandLatency(
        Distribution.from_percentiles(p50=ttft_p99_s, p99=ttft_p99_s),
        Distribution.from_percentiles(p50=tpot_p99_s, p99=tpot_p99_s),
    )
    return PathMetrics(
        path=path,
        provisioning=Distribution.of(()),
        latency=PredictedVsMeasured.of(None, measured),
        **base,
    )


@dataclass(frozen=True)
class HandLatency:
    ttft: Distribution
    tpot: Distribution
