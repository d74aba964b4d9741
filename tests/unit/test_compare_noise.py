"""The noise-aware verdict on hand-made records: paths drawn from one distribution tie, 2× apart do not.

Records are drawn from seeded log-normal latencies (the shape of measured TTFT/TPOT tails) and
summarised by the load tester's own ``summarize``, so the report and the records agree as they do in a
real run; the paths' deployments are identical, so only the request-level figures can differ.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpuplace.compare import compare_paths
from gpuplace.compare.metrics import PathResult
from gpuplace.compare.noise import MIN_EFFECT, ONCE, REPEATS, REQUESTS, overlaps, percentile_interval
from gpuplace.errors import InvalidInput
from gpuplace.loadtest.metrics import summarize
from gpuplace.types import DeploymentRecord, Distribution, PodRecord
from gpuplace.types.compare import Comparison
from gpuplace.types.loadtest import RequestResult
from gpuplace.types.plan import Slo
from tests.support.plans import sample_plan

SLO = Slo(ttft_p99_s=1.0, tpot_p99_s=0.1, rate_rps=2.0)
WEIGHTS = {"ttft_p99": 0.4, "tpot_p99": 0.4, "provisioning": 0.2}


def _records(
    seed: int,
    scale: float,
    n: int = 120,
    tokens: int = 16,
    *,
    tpot_scale: float | None = None,
    ttft_sigma: float = 0.3,
    tpot_sigma: float = 0.2,
) -> tuple[RequestResult, ...]:
    rng = np.random.default_rng(seed)
    ttft = 0.02 * scale * rng.lognormal(0.0, ttft_sigma, n)
    tpot = 0.003 * (scale if tpot_scale is None else tpot_scale) * rng.lognormal(0.0, tpot_sigma, n)
    return tuple(
        RequestResult(
            index=i,
            scheduled_s=i * 0.5,
            start_s=i * 0.5,
            prompt_tokens=8,
            max_tokens=tokens,
            success=True,
            ttft_s=float(ttft[i]),
            e2e_s=float(ttft[i] + tpot[i] * (tokens - 1)),
            output_tokens=tokens,
        )
        for i in range(n)
    )


def _result(path: str, records: tuple[RequestResult, ...], provisioning_s: float = 5.0) -> PathResult:
    pod = PodRecord("p0", node="n", created_at_s=0.0, serving_at_s=provisioning_s)
    dep = DeploymentRecord(
        "local", "d", "ns", "http://x", "m", True, (pod,), serving=sample_plan().serving, served_on="cpu"
    )
    return PathResult(path, dep, summarize(records, slo=SLO), records)


def _compare(native: PathResult, kubeflow: PathResult, **kw: object) -> Comparison:
    return compare_paths([native, kubeflow], weights=WEIGHTS, resamples=400, **kw)  # type: ignore[arg-type]


def test_two_paths_from_one_distribution_tie() -> None:
    c = _compare(_result("native", _records(1, 1.0)), _result("kubeflow", _records(2, 1.0)))
    s = c.score
    assert s.noise_assessed and not s.beyond_noise and s.winner == ""
    low, high = s.margin_interval
    assert low <= 0.0 <= high  # the interval includes a zero margin
    assert {"ttft_p99", "tpot_p99"} <= set(s.tied)
    # the point figures differ a little (two samples), yet both score alike: the intervals overlap
    assert s.raw["tpot_p99"]["native"] != s.raw["tpot_p99"]["kubeflow"]
    assert s.normalised["tpot_p99"]["native"] == s.normalised["tpot_p99"]["kubeflow"] == 1.0
    assert s.interval_method["tpot_p99"] == REQUESTS
    assert s.flips == ()


def test_two_paths_twice_apart_do_not_tie() -> None:
    """2× apart is beyond the requests' noise, but one run per path cannot tell the paths from a machine
    that changed between the runs: no winner is named, and the verdict says why and what to do."""
    c = _compare(_result("native", _records(1, 1.0)), _result("kubeflow", _records(2, 2.0)))
    s = c.score
    assert not s.beyond_noise and s.winner == "" and s.leader == "native"
    assert s.cannot_conclude.startswith("1 run per path") and s.margin_method == REQUESTS
    from gpuplace.report.render import verdict_line

    line = verdict_line(c)
    assert line.startswith("**Cannot conclude**: native is ahead") and "--repeats 3" in line
    low, high = s.margin_interval
    assert 0.0 < low <= s.margin <= high
    assert "tpot_p99" not in s.tied and "ttft_p99" not in s.tied
    native, kubeflow = s.intervals["tpot_p99"]["native"], s.intervals["tpot_p99"]["kubeflow"]
    assert native[0] <= s.raw["tpot_p99"]["native"] <= native[1]
    assert not overlaps(native, kubeflow)


def test_a_figure_measured_once_scores_as_a_tie() -> None:
    # provisioning 5 s against 50 s, one pod each, latencies from one distribution: provisioning has no
    # interval without repeats, so it cannot decide the verdict
    c = _compare(_result("native", _records(1, 1.0), 5.0), _result("kubeflow", _records(2, 1.0), 50.0))
    assert c.score.interval_method["provisioning"] == ONCE
    assert "provisioning" in c.score.tied and not c.score.beyond_noise
    assert all(math.isnan(x) for x in c.score.intervals["provisioning"]["native"])


def test_repeats_pool_the_runs_and_give_provisioning_an_interval() -> None:
    native = _result("native", _records(1, 1.0), 5.0)
    kubeflow = _result("kubeflow", _records(2, 1.0), 50.0)
    repeats = {
        "native": [_result("native", _records(3, 1.0), 6.0), _result("native", _records(5, 1.0), 5.5)],
        "kubeflow": [
            _result("kubeflow", _records(4, 1.0), 52.0),
            _result("kubeflow", _records(6, 1.0), 49.0),
        ],
    }
    c = _compare(native, kubeflow, repeats=repeats)
    s = c.score
    assert s.interval_method["provisioning"] == REPEATS and s.interval_method["tpot_p99"] == REPEATS
    assert c.path("native").provisioning_s == pytest.approx(5.5)  # the mean over the three runs
    assert c.path("native").completed == 120  # counts stay the first run's; the latency figures pool
    pooled = [r.ttft_s for x in (native, *repeats["native"]) for r in x.records if r.success]
    assert c.path("native").ttft == Distribution.of(pooled)  # TTFT over every run's requests
    assert "provisioning" not in s.tied
    assert s.winner == "native" and s.beyond_noise  # 5-6 s against 49-52 s, every run
    assert s.runs == {"native": 3, "kubeflow": 3}  # the record says how many runs each path pooled
    assert Comparison.from_json_dict(c.to_json_dict()).score.runs == s.runs
    from gpuplace.report import headline_metrics
    from gpuplace.report.render import verdict_line

    assert "over 3 runs per path, beyond the noise" in verdict_line(c)
    assert headline_metrics(c)["native_load_test_runs"] == 3


def test_repeats_widen_the_interval_with_the_run_to_run_variation() -> None:
    """Two runs per path whose latencies differ between runs by more than within them: the interval over
    runs and requests is wider than the one over the first run's requests alone, and it decides the
    verdict (the paths' runs interleave, so no difference beyond noise)."""
    native = _result("native", _records(1, 1.0))
    kubeflow = _result("kubeflow", _records(2, 1.3))
    once = _compare(native, kubeflow)
    # one run each: 1.3× apart is beyond the requests' noise, but one run cannot tell it from drift
    assert once.score.leader == "native" and once.score.cannot_conclude and not once.score.winner
    repeats = {
        "native": [_result("native", _records(3, 1.6))],
        "kubeflow": [_result("kubeflow", _records(4, 1.0))],
    }
    twice = _compare(native, kubeflow, repeats=repeats)
    low1, high1 = once.score.intervals["tpot_p99"]["native"]
    low2, high2 = twice.score.intervals["tpot_p99"]["native"]
    assert high2 - low2 > 2 * (high1 - low1)
    assert twice.score.runs == {"native": 2, "kubeflow": 2} and not twice.score.winner
    from gpuplace.report.render import verdict_line

    line = verdict_line(twice)
    assert line.startswith("**No difference beyond noise**") and "over 2 runs per path" in line
    assert "resamples of the runs and their requests" in line


def test_without_records_the_verdict_says_its_noise_is_unknown() -> None:
    native, kubeflow = _result("native", _records(1, 1.0)), _result("kubeflow", _records(2, 2.0))
    bare = [PathResult(r.path, r.deployment, r.report) for r in (native, kubeflow)]
    c = compare_paths(bare, weights=WEIGHTS)
    assert not c.score.noise_assessed and c.score.winner == "native" and not c.score.intervals
    assert any("no interval" in n for n in c.notes)


def test_a_repeat_without_records_is_refused() -> None:
    native, kubeflow = _result("native", _records(1, 1.0)), _result("kubeflow", _records(2, 1.0))
    bare = PathResult("native", native.deployment, native.report)
    with pytest.raises(InvalidInput, match="native_repeat"):
        _compare(native, kubeflow, repeats={"native": [bare]})


def test_the_noise_reads_back_from_json() -> None:
    c = _compare(_result("native", _records(1, 1.0)), _result("kubeflow", _records(2, 2.0)))
    back = Comparison.from_json_dict(c.to_json_dict()).score
    assert back.margin_interval == pytest.approx(c.score.margin_interval)
    assert back.intervals["tpot_p99"]["kubeflow"] == pytest.approx(c.score.intervals["tpot_p99"]["kubeflow"])
    assert back.tied == c.score.tied and back.leader == "native" and not back.beyond_noise
    assert back.cannot_conclude == c.score.cannot_conclude != "" and back.margin_method == REQUESTS


def test_percentile_interval_and_overlap() -> None:
    assert percentile_interval(list(range(101)), 0.9) == pytest.approx((5.0, 95.0))
    assert all(math.isnan(x) for x in percentile_interval([math.nan]))
    assert (
        overlaps((1, 2), (2, 3)) and not overlaps((1, 2), (2.5, 3)) and overlaps((math.nan, math.nan), (0, 1))
    )


def _spread_records(seed: int, ttft_scale: float, tpot_scale: float) -> tuple[RequestResult, ...]:
    """Wide TTFT tails (their p99 intervals overlap), narrow TPOT (10% apart is beyond its noise)."""
    return _records(seed, ttft_scale, tpot_scale=tpot_scale, ttft_sigma=0.6, tpot_sigma=0.05)


def test_a_tied_criterion_stays_tied_in_the_resamples() -> None:
    """TTFT weighs 0.9 but the paths' p99 intervals overlap, so the point ties it and TPOT (kubeflow 10%
    faster, beyond its noise) decides. The resampled totals must tie TTFT as well: resampled afresh, the
    noise the point set aside put the interval of kubeflow's margin wholly below zero, and the verdict
    said that interval "includes zero"."""
    native = _result("native", _spread_records(10, 1.0, 1.1))
    kubeflow = _result("kubeflow", _spread_records(20, 1.2, 1.0))
    c = compare_paths([native, kubeflow], weights={"ttft_p99": 0.9, "tpot_p99": 0.1}, resamples=400)
    s = c.score
    assert "ttft_p99" in s.tied and "tpot_p99" not in s.tied
    low, high = s.margin_interval
    # one run per path: kubeflow leads beyond the requests' noise, but by under MIN_EFFECT points, which
    # names no winner however many runs follow: "no difference worth acting on", not "cannot conclude"
    assert s.leader == "kubeflow" and 0.0 < low <= s.margin <= high and s.margin < MIN_EFFECT
    assert s.under_min_effect and not s.cannot_conclude and not s.winner
    from gpuplace.report.render import verdict_line

    assert verdict_line(Comparison.from_json_dict(c.to_json_dict())).startswith(
        "**No difference worth acting on**: kubeflow is ahead"
    )
