"""summarize() and friends on tiny hand-made records: vLLM's definitions, checked by hand."""

from __future__ import annotations

import json
import math

import pytest

from gpuplace.errors import InvalidInput
from gpuplace.loadtest.metrics import peak_concurrency, summarize
from gpuplace.types import Distribution
from gpuplace.types.latency import PredictedVsMeasured
from gpuplace.types.loadtest import LatencyReport, RequestResult
from gpuplace.types.plan import Slo
from tests.support.plans import predicted


def ok(
    index: int, start: float, chunks: tuple[float, ...], e2e: float, tokens: int | None = None
) -> RequestResult:
    return RequestResult(
        index=index,
        scheduled_s=start,
        start_s=start,
        prompt_tokens=10,
        max_tokens=len(chunks),
        success=True,
        ttft_s=chunks[0],
        e2e_s=e2e,
        chunk_times_s=chunks,
        output_tokens=len(chunks) if tokens is None else tokens,
        output_tokens_source="chunks" if tokens is None else "usage",
    )


def bad(index: int, start: float, kind: str, e2e: float = 0.5) -> RequestResult:
    return RequestResult(index, start, start, 10, 4, success=False, e2e_s=e2e, error_kind=kind, error="x")


def test_peak_concurrency_of_touching_intervals_is_one() -> None:
    assert peak_concurrency([(0, 1), (1, 2)]) == 1
    assert peak_concurrency([(0, 2), (1, 3), (1.5, 1.6)]) == 3
    assert peak_concurrency([]) == 0
    assert peak_concurrency([(0, math.nan)]) == 0


def test_tpot_excludes_the_first_token_and_itl_is_chunk_gaps() -> None:
    # TTFT 0.1; tokens at 0.1, 0.3, 0.6; e2e 0.7 → TPOT (0.7 - 0.1) / 2 = 0.3; ITL 0.2, 0.3
    r = ok(0, 0.0, (0.1, 0.3, 0.6), 0.7)
    assert r.tpot_s == pytest.approx(0.3)
    assert r.itl_s == pytest.approx((0.2, 0.3))
    report = summarize([r])
    assert report.ttft.mean == pytest.approx(0.1)
    assert report.tpot.mean == pytest.approx(0.3)
    assert report.itl.count == 2 and report.itl.max == pytest.approx(0.3)
    assert report.e2e.p50 == pytest.approx(0.7)


def test_usage_token_count_overrides_chunk_count_for_tpot() -> None:
    # 2 chunks but the server says 5 tokens (several tokens per chunk): TPOT = (1.0 - 0.2) / 4
    r = ok(0, 0.0, (0.2, 0.9), 1.0, tokens=5)
    assert r.tpot_s == pytest.approx(0.2)


def test_one_output_token_has_no_tpot() -> None:
    report = summarize([ok(0, 0.0, (0.1,), 0.1)])
    assert report.tpot.count == 0
    assert report.ttft.count == 1


def test_throughput_and_duration_and_errors() -> None:
    results = [
        ok(0, 0.0, (0.1, 0.2), 1.0, tokens=2),
        ok(1, 0.5, (0.1, 0.2, 0.3), 1.5, tokens=3),  # ends at 2.0
        bad(2, 0.2, "http_5xx"),
        bad(3, 0.3, "stream_cut"),
        bad(4, 0.4, "stream_cut"),
    ]
    report = summarize(results)
    assert report.duration_s == pytest.approx(2.0)  # last end, the run starts at 0
    assert (report.requests, report.completed, report.failed) == (5, 2, 3)
    assert report.errors == {"http_5xx": 1, "stream_cut": 2}
    assert report.request_throughput_rps == pytest.approx(1.0)
    assert report.output_throughput_tps == pytest.approx(2.5)
    assert report.input_tokens == 20 and report.output_tokens == 5
    assert report.total_token_throughput_tps == pytest.approx(12.5)
    assert report.peak_concurrency == 5  # the failures overlap the successes too
    assert report.slo_met is None


def test_goodput_counts_requests_meeting_every_bound() -> None:
    fast = ok(0, 0.0, (0.1, 0.2), 0.2)  # ttft .1, tpot .1
    slow_ttft = ok(1, 0.0, (0.5, 0.6), 0.6)  # ttft .5
    slow_tpot = ok(2, 0.0, (0.1, 0.5), 0.5)  # tpot .4
    failed = bad(3, 0.0, "timeout")
    slo = Slo(ttft_p99_s=0.2, tpot_p99_s=0.2)
    report = summarize([fast, slow_ttft, slow_tpot, failed], duration_s=2.0, slo=slo)
    assert report.goodput_rps == pytest.approx(0.5)
    assert report.slo_attainment == pytest.approx(0.25)
    assert report.slo_met is False
    assert summarize([fast], slo=slo).slo_met is True
    # a 1-token request cannot miss the TPOT bound
    assert slo.good(0.1, math.nan)


def test_arrival_lag_is_start_minus_schedule() -> None:
    r = RequestResult(0, 1.0, 1.004, 10, 2, success=False, e2e_s=0.1, error_kind="connect")
    assert summarize([r]).arrival_lag.mean == pytest.approx(0.004)


def test_empty_run() -> None:
    report = summarize([])
    assert report.requests == 0 and report.duration_s == 0.0
    assert math.isnan(report.request_throughput_rps) and math.isnan(report.slo_attainment)


def test_report_json_round_trip_has_no_nan() -> None:
    report = summarize([ok(0, 0.0, (0.1,), 0.1), bad(1, 0.0, "connect")], slo=Slo(ttft_p99_s=0.5))
    text = json.dumps(report.to_json_dict(), allow_nan=False)
    back = LatencyReport.from_json_dict(json.loads(text))
    assert back.ttft == report.ttft
    assert back.tpot.count == 0 and math.isnan(back.tpot.p99)
    assert back.slo == report.slo and back.errors == {"connect": 1}


def test_request_result_json_round_trip() -> None:
    r = bad(3, 0.25, "stream_cut")
    assert RequestResult.from_json_dict(json.loads(json.dumps(r.to_json_dict()))) == r


def test_prediction_error_relative_to_the_plan_and_skips_unstable_figures() -> None:
    report = summarize([ok(0, 0.0, (0.2, 0.3, 0.4), 0.4)])  # ttft .2, tpot .1
    checked = PredictedVsMeasured.of(predicted((0.25, math.inf), (0.08, 0.08)), report)
    out = checked.rows()
    assert set(out) == {"ttft_p50_s", "tpot_p50_s", "tpot_p99_s"}  # an infinite prediction is skipped
    assert out["tpot_p99_s"]["error"] == pytest.approx(0.25) == checked.error("tpot", 99)
    assert out["ttft_p50_s"]["error"] == pytest.approx(-0.2) == checked.error("ttft", 50)
    assert math.isnan(checked.error("ttft", 99))
    # the measured side is the report's own distributions, not a copy of some of their figures
    assert checked.ttft.measured == report.ttft and checked.tpot.measured == report.tpot


SLO = Slo(ttft_p99_s=0.1, tpot_p99_s=0.05, rate_rps=3.0)


def test_slo_bounds_are_optional_but_never_non_positive() -> None:
    with pytest.raises(InvalidInput, match="ttft_p99_s"):
        Slo(ttft_p99_s=0)
    with pytest.raises(InvalidInput, match="rate_rps"):
        Slo(rate_rps=float("nan"))
    assert Slo.from_json_dict(SLO.to_json_dict()) == SLO
    assert Slo.from_json_dict(Slo().to_json_dict()) == Slo() and not Slo().bounded
    assert Distribution.of([]).count == 0


def test_slo_from_the_edges_milliseconds_with_zero_unset() -> None:
    assert Slo.from_ms(ttft_ms=2000, tpot_ms=50, rate_rps=5) == Slo(
        ttft_p99_s=2.0, tpot_p99_s=0.05, rate_rps=5.0
    )
    assert Slo.from_ms(ttft_ms=0, tpot_ms=50) == Slo(tpot_p99_s=0.05)
    assert Slo(tpot_p99_s=0.05).good(ttft_s=99.0, tpot_s=0.04)
    assert not Slo(tpot_p99_s=0.05).good(0.0, 0.06)
    with pytest.raises(InvalidInput, match="rate_rps"):
        Slo(ttft_p99_s=0.1, tpot_p99_s=0.05).bound("rate_rps")


def test_zero_ms_is_no_bound_for_a_plan_too_which_refuses_it() -> None:
    """One meaning of 0 for an SLO bound: the plan's parameters read it as the load test's do, as no bound,
    and a plan, which needs both bounds, says so by the field's name."""
    from gpuplace.catalog import load_gpu_catalog
    from gpuplace.steps.plan_params import plan_request

    params = {"model": "tiny", "slo_tpot_ms": 50, "slo_ttft_ms": 2000, "rate": 2}
    catalog = load_gpu_catalog()
    assert plan_request(params, catalog).slo == Slo.from_ms(ttft_ms=2000, tpot_ms=50, rate_rps=2)
    for name, field in (("slo_tpot_ms", "tpot_p99_s"), ("slo_ttft_ms", "ttft_p99_s")):
        with pytest.raises(InvalidInput, match=rf"^{field}=None: is required here.*0 ms means no bound"):
            plan_request({**params, name: 0}, catalog)
