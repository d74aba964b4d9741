"""The verdict over interleaved runs (issue 33): drift of the machine between the runs does not pick a
winner, a real difference still does, and the same distribution on both paths (A/A) ties.

Each path runs 3 times, interleaved in time as ``gpuplace run --compare`` runs them (kubeflow, native,
kubeflow, native, ...); each run's records are drawn from seeded log-normal latencies scaled by the
machine's slowdown at its place in time and by the path's own factor.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from gpuplace.compare import compare_paths
from gpuplace.compare.metrics import PathResult
from gpuplace.compare.noise import (
    MIN_EFFECT,
    MIN_RUNS,
    RUNS,
    drift_adjusted_difference,
    run_slots,
    t_quantile,
)
from gpuplace.report.render import verdict_line
from gpuplace.types.compare import Comparison
from tests.unit.test_compare_noise import WEIGHTS, _records, _result


def _run(path: str, seed: int, scale: float, slot: int) -> PathResult:
    r = _result(path, _records(seed, scale))
    return PathResult(r.path, r.deployment, replace(r.report, started_at_s=1000.0 + 60.0 * slot), r.records)


def _interleaved(slowdown: Callable[[int], float], native: float = 1.0, runs: int = MIN_RUNS) -> Comparison:
    """``runs`` runs per path, kubeflow then native in each pair; run k of the sequence on a machine
    ``slowdown(k)`` times slower, native's latencies also ``native`` times kubeflow's."""
    kf = [_run("kubeflow", 100 + 2 * i, slowdown(2 * i), 2 * i) for i in range(runs)]
    na = [_run("native", 101 + 2 * i, native * slowdown(2 * i + 1), 2 * i + 1) for i in range(runs)]
    return compare_paths(
        [na[0], kf[0]], weights=WEIGHTS, resamples=300, repeats={"native": na[1:], "kubeflow": kf[1:]}
    )


def steady(k: int) -> float:
    return 1.0


def linear(k: int) -> float:  # 20% slower with each run: the last run is twice the first
    return 1.0 + 0.2 * k


def geometric(k: int) -> float:  # a monotone slowdown that is not linear
    return 1.25**k


def test_a_a_the_same_distribution_on_both_paths_is_no_difference() -> None:
    c = _interleaved(steady)
    s = c.score
    assert s.margin_method == RUNS and s.runs == {"native": 3, "kubeflow": 3}
    assert not s.winner and not s.beyond_noise and not s.cannot_conclude
    low, high = s.margin_interval
    assert low <= 0.0 <= high
    assert verdict_line(c).startswith("**No difference beyond noise**")


@pytest.mark.parametrize("slowdown", [linear, geometric], ids=["linear", "geometric"])
def test_a_machine_that_slows_down_between_interleaved_runs_picks_no_winner(
    slowdown: Callable[[int], float],
) -> None:
    """Native always runs right after kubeflow on a machine that keeps slowing down: in every pair,
    taken alone, kubeflow is ahead beyond the requests' noise. Over the interleaved runs, with the drift
    over their order fitted, that is no difference of the paths."""
    for i in range(MIN_RUNS):  # each pair alone: kubeflow leads beyond the requests' noise
        pair = compare_paths(
            [
                _run("native", 101 + 2 * i, slowdown(2 * i + 1), 2 * i + 1),
                _run("kubeflow", 100 + 2 * i, slowdown(2 * i), 2 * i),
            ],
            weights=WEIGHTS,
            resamples=300,
        ).score
        assert pair.leader == "kubeflow" and pair.margin_interval[0] > 0
    c = _interleaved(slowdown)
    assert not c.score.winner and not c.score.beyond_noise
    assert verdict_line(c).startswith("**No difference beyond noise**")


@pytest.mark.parametrize("slowdown", [steady, linear, geometric], ids=["steady", "linear", "geometric"])
def test_a_real_difference_wins_over_the_runs_even_on_a_drifting_machine(
    slowdown: Callable[[int], float],
) -> None:
    c = _interleaved(slowdown, native=0.5)  # native twice as fast in every run
    s = c.score
    assert s.winner == "native" and s.beyond_noise and s.margin_method == RUNS
    assert s.margin_interval[0] > 0
    line = verdict_line(c)
    assert "over 3 runs per path, beyond the noise" in line and "linear drift" in line
    back = Comparison.from_json_dict(c.to_json_dict()).score
    assert back.margin_method == RUNS and back.margin_interval == pytest.approx(s.margin_interval)


def test_fewer_runs_than_the_minimum_cannot_conclude() -> None:
    c = _interleaved(steady, native=0.5, runs=MIN_RUNS - 1)  # twice as fast, but only 2 runs per path
    s = c.score
    assert not s.winner and s.leader == "native" and s.margin_interval[0] > 0
    assert s.cannot_conclude.startswith("2 runs per path") and s.margin_method != RUNS
    assert verdict_line(c).startswith("**Cannot conclude**: native is ahead")


def test_t_quantiles() -> None:
    # Student's t 97.5% points (tables): 1, 2, 3, 10 and 30 degrees of freedom
    for dof, value in ((1, 12.706), (2, 4.303), (3, 3.182), (10, 2.228), (30, 2.042)):
        assert t_quantile(0.975, dof) == pytest.approx(value, abs=1e-3)


def test_the_drift_fit_removes_a_linear_trend_and_keeps_a_difference() -> None:
    slots = [0, 1, 2, 3, 4, 5, 6, 7]
    leader = [s % 2 == 1 for s in slots]
    # a pure linear drift: every leader run is later, yet no difference
    est, low, high = drift_adjusted_difference([10.0 + 2 * s for s in slots], slots, leader)
    assert est == pytest.approx(0.0, abs=1e-9)
    # a difference of 3 on that drift, with a little noise: found, its interval excludes zero
    noisy = [
        10.0 + 2 * s + (3.0 if d else 0.0) + (0.1 if s % 4 < 2 else -0.1)
        for s, d in zip(slots, leader, strict=True)
    ]
    est, low, high = drift_adjusted_difference(noisy, slots, leader)
    assert 0 < low < 3.0 < high and est == pytest.approx(3.0, abs=0.2)
    # too few runs for the fit
    assert all(x != x for x in drift_adjusted_difference([1.0, 2.0, 3.0], [0, 1, 2], [False, True, False]))


def test_run_slots_follow_the_runs_start_times() -> None:
    assert run_slots({"native": [20.0, 40.0], "kubeflow": [10.0, 30.0]}) == {
        "native": [1.0, 3.0],
        "kubeflow": [0.0, 2.0],
    }
    # without start times, run i of each path is taken as pair i
    assert run_slots({"native": [float("nan")], "kubeflow": [5.0]}) == {"native": [0.0], "kubeflow": [0.0]}


@pytest.mark.parametrize("factor", [0.97, 0.9])
def test_a_margin_beyond_the_noise_but_under_the_minimum_effect_names_no_winner(factor: float) -> None:
    """Both paths draw the very same requests in every pair (same seeds), native's ``factor`` times
    kubeflow's: the runs agree so well that the margin's interval excludes zero even for a 3% faster
    native (0.012 points). A margin under MIN_EFFECT points names no winner ("no difference worth acting
    on"); 10% faster (0.04 points) is over it and wins. This is what keeps an A/A comparison from naming a
    winner one time in twenty."""
    kf = [_run("kubeflow", 100 + 2 * i, 1.0, 2 * i) for i in range(MIN_RUNS)]
    na = [_run("native", 100 + 2 * i, factor, 2 * i + 1) for i in range(MIN_RUNS)]
    c = compare_paths(
        [na[0], kf[0]], weights=WEIGHTS, resamples=300, repeats={"native": na[1:], "kubeflow": kf[1:]}
    )
    s = c.score
    assert s.leader == "native" and s.margin_interval[0] > 0 and s.margin_method == RUNS
    assert s.min_effect == MIN_EFFECT
    if s.margin < MIN_EFFECT:
        assert factor == 0.97 and not s.winner and not s.beyond_noise
        line = verdict_line(c)
        assert line.startswith("**No difference worth acting on**: native is ahead by 0.012 points")
    else:
        assert factor == 0.9 and s.winner == "native" and s.beyond_noise
    assert Comparison.from_json_dict(c.to_json_dict()).score.min_effect == MIN_EFFECT
