"""The verdict of a comparison over repeated runs (at least :data:`~gpuplace.compare.noise.MIN_RUNS` per
path): which criteria tie and the interval of the leader's margin, both from the runs in the order they
ran with a linear drift of the machine over that order removed (:func:`gpuplace.compare.noise.
drift_adjusted_difference`). ``gpuplace run --compare`` interleaves the paths' runs, so a machine that
slows down between them shows as drift, which these fits remove or count as noise, not as a difference
of the paths. ``criteria`` is :data:`gpuplace.compare.score.CRITERIA` (passed in: score imports this).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpuplace.compare import noise


def _against(crit: Any, x: float, best: float) -> float:
    """One run's figure scored against the best path's (pooled) figure, as :func:`normalise` scores it."""
    if crit.scale == "absolute":
        return float(crit.absolute(x))
    if crit.lower_is_better:
        return best / x if x > 0 else 1.0
    return x / best if best > 0 else 0.0


def retie(
    criteria: Mapping[str, Any],
    normalised: Mapping[str, Mapping[str, float]],
    noisy: Mapping[str, object],
    run_figures: Mapping[str, Sequence[Mapping[str, float]]],
    run_slots: Mapping[str, Sequence[float]],
    confidence: float,
) -> tuple[dict[str, dict[str, float]], tuple[str, ...]]:
    """The ties of a comparison over runs: a resampled criterion ties a path with the best one when the
    difference of their runs' figures, fitted with a linear drift over the runs' order removed
    (:func:`gpuplace.compare.noise.drift_adjusted_difference`), has an interval that includes zero; the
    overlap of the paths' pooled intervals would count the drift between the runs as each path's noise."""
    scored = {c: dict(v) for c, v in noisy["normalised"].items()}  # type: ignore[attr-defined]
    methods: Mapping[str, str] = noisy["interval_method"]  # type: ignore[assignment]
    tied: list[str] = list(noisy["tied"])  # type: ignore[call-overload]
    for name, crit in criteria.items():
        if name not in normalised or methods.get(name) not in (noise.REQUESTS, noise.REPEATS):
            continue
        scored[name] = dict(normalised[name])
        best = max(normalised[name], key=lambda p: (normalised[name][p], p))
        level = [best]
        for other in normalised[name]:
            if other == best:
                continue
            values, slots, is_best = [], [], []
            for path in (best, other):
                values += [f[crit.field] for f in run_figures[path]]
                slots += list(run_slots[path])
                is_best += [path == best] * len(run_figures[path])
            _, low, high = noise.drift_adjusted_difference(values, slots, is_best, confidence)
            if not low > 0 and not high < 0:  # includes zero (or cannot be told: NaN)
                scored[name][other] = scored[name][best]
                level.append(other)
        if name in tied:
            tied.remove(name)
        if len(level) == len(normalised[name]) and len(set(normalised[name].values())) > 1:
            tied.append(name)
    return scored, tuple(tied)


def margin_over_runs(
    criteria: Mapping[str, Any],
    used: Mapping[str, float],
    scored: Mapping[str, Mapping[str, float]],
    noisy: Mapping[str, object],
    raw: Mapping[str, Mapping[str, float]],
    totals: Mapping[str, float],
    leader: str,
    run_figures: Mapping[str, Sequence[Mapping[str, float]]],
    run_slots: Mapping[str, Sequence[float]],
    confidence: float,
) -> tuple[float, float]:
    """The interval of the leader's margin over the runner-up from the runs themselves: each run of the
    two is scored on its own (a resampled criterion that the point does not tie against the best path's
    figure; the others as the point scores them), and the leader's advantage is fitted over the runs in
    the order they ran with a linear drift removed (:func:`gpuplace.compare.noise.drift_adjusted_difference`).
    """
    methods: Mapping[str, str] = noisy["interval_method"]  # type: ignore[assignment]
    tied: Sequence[str] = noisy["tied"]  # type: ignore[assignment]
    other = max((p for p in totals if p != leader), key=lambda p: (totals[p], p))
    values, slots, is_leader = [], [], []
    for path in (leader, other):
        for figures, slot in zip(run_figures[path], run_slots[path], strict=True):
            total = 0.0
            for name, w in used.items():
                crit = criteria.get(name)
                if crit is None or name in tied or methods.get(name) not in (noise.REQUESTS, noise.REPEATS):
                    total += w * (1.0 if methods.get(name) == noise.ONCE else scored[name][path])
                    continue
                lower = crit.lower_is_better
                best = (min if lower else max)(raw[name].values())
                total += w * _against(crit, figures[crit.field], best)
            values.append(total)
            slots.append(slot)
            is_leader.append(path == leader)
    _, low, high = noise.drift_adjusted_difference(values, slots, is_leader, confidence)
    return low, high
