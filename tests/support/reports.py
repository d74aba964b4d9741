"""Load-test reports made by hand, with the figures a test needs (no server, no summarize)."""

from __future__ import annotations

from gpuplace.types import Distribution
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
