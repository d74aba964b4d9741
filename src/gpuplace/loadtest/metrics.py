"""Load-test metrics: per-request records → :class:`LatencyReport`, with vLLM's definitions.

:func:`summarize` is pure (no clock, no I/O, no printing) so that it can be checked on hand-made
records. Definitions (docs/loadtest.md): TTFT = first token − request start; TPOT = (e2e − TTFT) /
(output tokens − 1), per request; ITL = gaps between streamed chunks; e2e = last byte − request
start; throughputs and goodput divide by the run duration (start of the run → last completion).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gpuplace.types import Distribution
from gpuplace.types.loadtest import LatencyReport, RequestResult
from gpuplace.types.plan import Slo

# A p99 SLO tolerates 1% misses; more failed requests than that miss it whatever the latencies were.
SLO_FAILURE_SHARE = 0.01


def peak_concurrency(intervals: Iterable[tuple[float, float]]) -> int:
    """Most half-open intervals ``[start, end)`` open at once: ``[(0, 1), (1, 2)]`` → 1."""
    events: list[tuple[float, int]] = []
    for start, end in intervals:
        if math.isnan(start) or math.isnan(end):
            continue
        events.append((start, 1))
        events.append((end, -1))
    # At equal times the end sorts first (-1 < 1): a request that ends as another starts never overlaps it.
    events.sort()
    peak = current = 0
    for _, step in events:
        current += step
        peak = max(peak, current)
    return peak


def summarize(
    results: Sequence[RequestResult],
    *,
    duration_s: float | None = None,
    slo: Slo | None = None,
    interrupted: bool = False,
    workload: Mapping[str, Any] | None = None,
) -> LatencyReport:
    """Summarise one run's records. ``duration_s`` defaults to the last request's end (run start = 0)."""
    slo = slo or Slo()
    ok = [r for r in results if r.success]
    failed = [r for r in results if not r.success]
    if duration_s is None:
        ends = [r.end_s for r in results if not math.isnan(r.end_s)]
        duration_s = max(ends, default=0.0)
    per_s = (lambda x: x / duration_s) if duration_s > 0 else (lambda x: math.nan)
    input_tokens = sum(r.server_prompt_tokens or r.prompt_tokens for r in ok)
    output_tokens = sum(r.output_tokens for r in ok)
    good = sum(slo.good(r.ttft_s, r.tpot_s) for r in ok)
    ttft = Distribution.of(r.ttft_s for r in ok)
    tpot = Distribution.of(r.tpot_s for r in ok if not math.isnan(r.tpot_s))
    slo_met: bool | None = None
    if slo.bounded:
        slo_met = (
            bool(ok)
            and (slo.ttft_p99_s is None or ttft.p99 <= slo.ttft_p99_s)
            and (slo.tpot_p99_s is None or tpot.count == 0 or tpot.p99 <= slo.tpot_p99_s)
            and len(failed) <= SLO_FAILURE_SHARE * len(results)
        )
    return LatencyReport(
        requests=len(results),
        completed=len(ok),
        failed=len(failed),
        errors=dict(sorted(Counter(r.error_kind or "unknown" for r in failed).items())),
        duration_s=float(duration_s),
        ttft=ttft,
        tpot=tpot,
        itl=Distribution.of(gap for r in ok for gap in r.itl_s),
        e2e=Distribution.of(r.e2e_s for r in ok),
        arrival_lag=Distribution.of(
            r.start_s - r.scheduled_s for r in results if not math.isnan(r.start_s - r.scheduled_s)
        ),
        request_throughput_rps=per_s(len(ok)),
        output_throughput_tps=per_s(output_tokens),
        total_token_throughput_tps=per_s(input_tokens + output_tokens),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        goodput_rps=per_s(good),
        slo_attainment=good / len(results) if results else math.nan,
        peak_concurrency=peak_concurrency((r.start_s, r.end_s) for r in results),
        slo=slo,
        slo_met=slo_met,
        interrupted=interrupted,
        workload=dict(workload or {}),
    )
