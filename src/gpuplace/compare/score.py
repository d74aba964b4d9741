"""The weighted composite score of the comparison: criteria, normalisation, verdict and sensitivity.

A criterion is either *measured* (a :class:`~gpuplace.types.compare.PathMetrics` figure with a
direction and a documented normalisation to [0, 1], 1 = best) or *assessed*: a judgement the user
states as a number in [0, 1] per path (e.g. ``team_expertise``), shown as such in the report. The
score of a path is Σ weight × normalised score; weights are non-negative and sum to 1. Sensitivity
asks, for each criterion, how far its weight must move (the others rescaled in proportion so the sum
stays 1) before another path wins. With resampled figures (:mod:`gpuplace.compare.noise`) every
measured criterion carries an interval per path, a criterion whose intervals overlap scores as a tie, and
the verdict names a winner only when the interval of its margin excludes zero and the margin is at least
:data:`~gpuplace.compare.noise.MIN_EFFECT` points; otherwise it is "no difference beyond noise" (or,
for a margin beyond the noise but under that floor, "no difference worth acting on"). All pure
functions; docs/comparison.md has the worked examples.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpuplace.compare import noise
from gpuplace.compare.runs import margin_over_runs, retie
from gpuplace.errors import InvalidInput, UnknownName
from gpuplace.types.compare import Flip, PathMetrics, ScoreCard

WEIGHT_SUM_TOLERANCE = 1e-6


@dataclass(frozen=True, slots=True)
class Criterion:
    """How one measured figure becomes a score in [0, 1] (``normalisation`` is shown in reports)."""

    name: str
    field: str  # the PathMetrics figure (:meth:`~gpuplace.types.compare.PathMetrics.figures`)
    lower_is_better: bool
    scale: str  # "relative": ratio to the best path; "absolute": a fixed map of a bounded figure
    normalisation: str
    unit: str = ""

    def figure(self, m: PathMetrics) -> float:
        return m.figure(self.field)

    def absolute(self, x: float) -> float:
        """The fixed map of bounded figures (fractions), clamped to [0, 1]."""
        value = 1.0 - x if self.lower_is_better else x
        return min(1.0, max(0.0, value))


_RATIO_LOWER = "best / value (the lowest value scores 1; 0 when the best is 0 and this is not)"
_RATIO_HIGHER = "value / best (the highest value scores 1)"

ASSESSED = "assessed score (a judgement, not measured)"
CRITERIA: dict[str, Criterion] = {
    c.name: c
    for c in (
        Criterion("provisioning", "provisioning_s", True, "relative", _RATIO_LOWER, "s"),
        Criterion("ttft_p99", "ttft_p99_s", True, "relative", _RATIO_LOWER, "s"),
        Criterion("tpot_p99", "tpot_p99_s", True, "relative", _RATIO_LOWER, "s"),
        Criterion("goodput", "goodput_rps", False, "relative", _RATIO_HIGHER, "req/s"),
        Criterion("gpu_hours_per_1k", "gpu_hours_per_1k_requests", True, "relative", _RATIO_LOWER, "GPU·h"),
        Criterion("cost", "cost_usd_per_month", True, "relative", _RATIO_LOWER, "USD/month"),
        Criterion("sla_breach_cost", "sla_breach_cost_usd_per_month", True, "relative", _RATIO_LOWER, "USD"),
        Criterion("fragmentation", "fragmentation_gpus", True, "relative", _RATIO_LOWER, "GPUs"),
        Criterion("slo_attainment", "slo_attainment", False, "absolute", "the attainment itself", ""),
        Criterion(
            "prediction_error", "prediction_error", True, "absolute", "1 − abs(rel. error), floored at 0", ""
        ),
        Criterion(
            "latency_predictability",
            "latency_predictability",
            False,
            "absolute",
            "mean p50/p99 of TTFT and TPOT (1 = no tail)",
            "",
        ),
    )
}

DEFAULT_WEIGHTS: dict[str, float] = {
    "tpot_p99": 0.25,
    "ttft_p99": 0.15,
    "sla_breach_cost": 0.2,
    "cost": 0.1,
    "gpu_hours_per_1k": 0.1,
    "fragmentation": 0.1,
    "provisioning": 0.1,
}


def parse_weights(text: str, assessed: Mapping[str, Mapping[str, float]] | None = None) -> dict[str, float]:
    """``"tpot_p99=0.7,team_expertise=0.3"`` → weights; "" gives :data:`DEFAULT_WEIGHTS`.

    Every name must be a measured criterion or one of ``assessed``; weights must be non-negative
    numbers that sum to 1 (within 1e-6).
    """
    if not text.strip():
        return dict(DEFAULT_WEIGHTS)
    known = set(CRITERIA) | set(assessed or {})
    weights: dict[str, float] = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise InvalidInput(
                "weights", text, f"{item.strip()!r} is not NAME=WEIGHT", "e.g. tpot_p99=0.7,cost=0.3"
            )
        if name not in known:
            raise UnknownName("weights", name, known)
        if name in weights:
            raise InvalidInput("weights", text, f"{name} appears twice", "Give each criterion once")
        try:
            w = float(value)
        except ValueError:
            raise InvalidInput("weights", text, f"{name}={value.strip()!r} is not a number", "") from None
        if not w >= 0 or math.isinf(w):
            raise InvalidInput(
                "weights", text, f"{name}={w} is negative or not finite", "Weights are in [0, 1]"
            )
        weights[name] = w
    check_weights(weights, field="weights", text=text)
    return weights


def check_weights(weights: Mapping[str, float], *, field: str = "weights", text: str = "") -> None:
    total = math.fsum(weights.values())
    if abs(total - 1.0) > WEIGHT_SUM_TOLERANCE:
        raise InvalidInput(
            field,
            text or dict(weights),
            f"weights sum to {total:g}, not 1",
            "Scale them so they add up to 1 (e.g. 0.7 and 0.3)",
        )


def parse_assessed(items: Sequence[str], paths: Sequence[str]) -> dict[str, dict[str, float]]:
    """``["team_expertise=native:0.8,kubeflow:0.5"]`` → {criterion: {path: score in [0, 1]}}."""
    out: dict[str, dict[str, float]] = {}
    for item in items:
        name, sep, rest = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise InvalidInput(
                "assess", item, "is not NAME=PATH:SCORE,PATH:SCORE", "e.g. reuse=native:0.4,kubeflow:0.9"
            )
        if name in CRITERIA:
            raise InvalidInput("assess", item, f"{name} is measured, not assessed", "Pick another name")
        scores: dict[str, float] = {}
        for pair in rest.split(","):
            path, colon, value = pair.partition(":")
            path = path.strip()
            if path not in paths:
                raise UnknownName("assess", path, paths)
            try:
                v = float(value) if colon else math.nan
            except ValueError:
                v = math.nan
            if not 0.0 <= v <= 1.0:
                raise InvalidInput("assess", item, f"{path}:{value.strip()} is not a score in [0, 1]", "")
            scores[path] = v
        missing = [p for p in paths if p not in scores]
        if missing:
            raise InvalidInput("assess", item, f"no score for {', '.join(missing)}", "Score every path")
        out[name] = scores
    return out


def normalise(criterion: Criterion, figures: Mapping[str, float]) -> dict[str, float]:
    """Scores in [0, 1] for one criterion's figures (path → figure); see :data:`CRITERIA`."""
    if criterion.scale == "absolute":
        return {p: criterion.absolute(x) for p, x in figures.items()}
    values = list(figures.values())
    if all(v == values[0] for v in values):
        return dict.fromkeys(figures, 1.0)
    if criterion.lower_is_better:
        best = min(values)
        return {p: best / x if x > 0 else 1.0 for p, x in figures.items()}
    best = max(values)
    return {p: (x / best if best > 0 else 0.0) for p, x in figures.items()}


def _totals(weights: Mapping[str, float], normalised: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    paths = next(iter(normalised.values())).keys() if normalised else ()
    return {p: math.fsum(w * normalised[c][p] for c, w in weights.items()) for p in paths}


def _verdict(totals: Mapping[str, float]) -> tuple[str, str, float]:
    ranked = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))
    (first, a), (second, b) = ranked[0], ranked[1]
    margin = a - b
    if margin <= 1e-12:
        return "", "", 0.0
    return first, second, margin


def _other_shares(
    weights: Mapping[str, float], normalised: Mapping[str, Mapping[str, float]], c: str
) -> dict[str, float]:
    """How the weight not on ``c`` is split: in proportion to the current weights, equally if all are 0."""
    rest = {k: v for k, v in weights.items() if k != c and v > 0}
    total = math.fsum(rest.values())
    if total > 0:
        return {k: v / total for k, v in rest.items()}
    others = [k for k in normalised if k != c]
    return {k: 1.0 / len(others) for k in others}


def flip_points(
    weights: Mapping[str, float], normalised: Mapping[str, Mapping[str, float]], winner: str
) -> tuple[Flip, ...]:
    """For each weighted-or-scored criterion: the nearest weight at which another path overtakes.

    Moving criterion c's weight to t rescales the others by (1 − t)/(1 − w_c) (equally when w_c = 1),
    so each path's total is linear in t and the crossing with the winner solves one linear equation.
    """
    if not winner:
        return ()
    flips = []
    for c in normalised:
        w_c = weights.get(c, 0.0)
        share = _other_shares(weights, normalised, c)

        def total_at(t: float, path: str, c: str = c, share: Mapping[str, float] = share) -> float:
            rest = math.fsum(s * normalised[k][path] for k, s in share.items())
            return t * normalised[c][path] + (1 - t) * rest

        best_t, best_path = math.nan, ""
        for path in normalised[c]:
            if path == winner:
                continue
            # d(t) = winner − challenger is linear; the verdict flips where d crosses zero and the
            # challenger is strictly ahead beyond it (a tie at the end of the range is no flip).
            d0 = total_at(0.0, winner) - total_at(0.0, path)
            d1 = total_at(1.0, winner) - total_at(1.0, path)
            if d1 == d0:
                continue
            t = d0 / (d0 - d1)
            beyond = d1 if t > w_c else d0
            if not (0.0 <= t <= 1.0 and beyond < -1e-12):
                continue
            if math.isnan(best_t) or abs(t - w_c) < abs(best_t - w_c):
                best_t, best_path = t, path
        flips.append(Flip(c, w_c, best_t, best_path))
    return tuple(flips)


def score(
    metrics: Sequence[PathMetrics],
    weights: Mapping[str, float],
    assessed: Mapping[str, Mapping[str, float]] | None = None,
    *,
    replicates: Mapping[str, Sequence[Mapping[str, float]]] | None = None,
    runs: Mapping[str, int] | None = None,
    confidence: float = noise.CONFIDENCE,
    run_figures: Mapping[str, Sequence[Mapping[str, float]]] | None = None,
    run_slots: Mapping[str, Sequence[float]] | None = None,
) -> ScoreCard:
    """Normalise every criterion, weigh, rank, and find the weight changes that flip the verdict.

    A criterion with a positive weight whose figure is unknown for some path (e.g. fragmentation at node
    level) is left out of the verdict for every path — never scored as zero or filled in — and listed in
    ``excluded`` with the paths it is unknown for; the totals are over the remaining weights. When every
    weighted criterion is unknown the score is an error.

    ``replicates`` (path → resampled figure sets, :func:`gpuplace.compare.noise.path_replicates`) for every
    path turns on the noise-aware verdict; ``runs`` says how many runs each path pooled (repeats). With
    at least :data:`~gpuplace.compare.noise.MIN_RUNS` runs per path, ``run_figures`` (path → each run's own
    figures, :func:`~gpuplace.compare.noise.run_figures`) and ``run_slots`` (path → each run's place in
    time, :func:`~gpuplace.compare.noise.run_slots`), the margin's interval comes from the runs, a linear
    drift over their order removed (:func:`_over_runs`); with fewer runs no path is named the winner,
    because a change of the machine between the runs cannot be told from a difference of the paths.
    """
    assessed = assessed or {}
    _check_score_inputs(metrics, weights, assessed)
    paths = [m.path for m in metrics]
    raw, normalised, excluded, used = _scored_criteria(metrics, weights, assessed, paths)
    noisy = replicates is not None and all(replicates.get(p) for p in paths)
    extra: dict[str, object] = {}
    if noisy:
        assert replicates is not None
        extra = _noise(metrics, used, normalised, raw, replicates, runs or {}, confidence)
        over_runs = min((runs or {}).get(p, 1) for p in paths) >= noise.MIN_RUNS
        if over_runs and run_figures is not None and run_slots is not None:
            extra["normalised"], extra["tied"] = retie(
                CRITERIA, normalised, extra, run_figures, run_slots, confidence
            )
        normalised = extra.pop("normalised")  # type: ignore[assignment]
    totals = _totals(used, normalised)
    winner, runner_up, margin = _verdict(totals)
    leader = winner
    if noisy:
        # the point leader even when its margin is zero, so the interval has a sign to speak of
        leader = winner or sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
        if not _margin_names_leader(
            extra,
            leader,
            margin,
            totals=totals,
            used=used,
            normalised=normalised,
            raw=raw,
            fewest=min((runs or {}).get(p, 1) for p in paths),
            confidence=confidence,
            run_figures=run_figures,
            run_slots=run_slots,
        ):
            winner = ""
    base = totals[runner_up] if runner_up else math.nan
    return ScoreCard(
        weights=dict(weights),
        normalised=normalised,
        raw=raw,
        totals=totals,
        winner=winner,
        runner_up=runner_up,
        margin=margin,
        relative_margin=margin / base if base and base > 0 else math.nan,
        flips=flip_points(used, normalised, winner),
        normalisation={c: CRITERIA[c].normalisation if c in CRITERIA else ASSESSED for c in normalised},
        excluded=excluded,
        leader=leader,
        runs={p: (runs or {}).get(p, 1) for p in paths},
        **extra,  # type: ignore[arg-type]
    )


def _check_score_inputs(
    metrics: Sequence[PathMetrics], weights: Mapping[str, float], assessed: Mapping[str, Mapping[str, float]]
) -> None:
    """Check there are two paths or more and the weights sum to 1 over known criteria."""
    if len(metrics) < 2:
        raise InvalidInput(
            "paths",
            [m.path for m in metrics],
            "a comparison needs at least two paths",
            "Give both paths' results",
        )
    check_weights(weights)
    for name in weights:
        if name not in CRITERIA and name not in assessed:
            raise UnknownName("weights", name, set(CRITERIA) | set(assessed))


def _scored_criteria(
    metrics: Sequence[PathMetrics],
    weights: Mapping[str, float],
    assessed: Mapping[str, Mapping[str, float]],
    paths: Sequence[str],
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]], dict[str, str], dict[str, float]]:
    """(raw figures, normalised scores, weighted criteria left out and why, the weights still used)."""
    raw: dict[str, dict[str, float]] = {}
    normalised: dict[str, dict[str, float]] = {}
    excluded: dict[str, str] = {}
    for name, crit in CRITERIA.items():
        figures = {m.path: crit.figure(m) for m in metrics}
        missing = [p for p, x in figures.items() if math.isnan(x)]
        raw[name] = figures
        if missing:
            if weights.get(name, 0.0) > 0:
                excluded[name] = f"{crit.field} unknown for {', '.join(missing)}"
            continue
        normalised[name] = normalise(crit, figures)
    for name, scores in assessed.items():
        raw[name] = {p: float(scores[p]) for p in paths}
        normalised[name] = dict(raw[name])
    used = {c: w for c, w in weights.items() if w > 0 and c not in excluded}
    if not used:
        raise InvalidInput(
            "weights",
            dict(weights),
            "every weighted criterion is unknown for some path: "
            + "; ".join(f"{c}: {why}" for c, why in excluded.items()),
            "Weight criteria both paths measured (docs/comparison.md#metrics)",
        )
    return raw, normalised, excluded, used


def _margin_names_leader(
    extra: dict[str, object],
    leader: str,
    margin: float,
    *,
    totals: Mapping[str, float],
    used: Mapping[str, float],
    normalised: Mapping[str, Mapping[str, float]],
    raw: Mapping[str, Mapping[str, float]],
    fewest: int,
    confidence: float,
    run_figures: Mapping[str, Sequence[Mapping[str, float]]] | None,
    run_slots: Mapping[str, Sequence[float]] | None,
) -> bool:
    """Put the interval of ``leader``'s margin in ``extra``; True when it lets the leader be the winner."""
    signed: list[dict[str, float]] = extra.pop("signed")  # type: ignore[assignment]
    diffs = [t[leader] - max(v for p, v in t.items() if p != leader) for t in signed]
    low, high = noise.percentile_interval(diffs, confidence)
    method = noise.REPEATS if fewest > 1 else noise.REQUESTS
    if fewest >= noise.MIN_RUNS and run_figures is not None and run_slots is not None:
        low, high = margin_over_runs(
            CRITERIA, used, normalised, extra, raw, totals, leader, run_figures, run_slots, confidence
        )
        method = noise.RUNS
    elif margin >= noise.MIN_EFFECT and low > 0:  # a smaller margin names no winner however many runs
        extra["cannot_conclude"] = (
            f"{fewest} run{'s' if fewest > 1 else ''} per path: a change of the machine between the runs "
            f"cannot be told from a difference of the paths (a verdict needs {noise.MIN_RUNS} "
            "interleaved runs per path)"
        )
    extra["margin_interval"] = (low, high)
    extra["margin_method"] = method
    extra["min_effect"] = noise.MIN_EFFECT
    return margin >= noise.MIN_EFFECT and low > 0 and not extra.get("cannot_conclude")


def _noise(
    metrics: Sequence[PathMetrics],
    used: Mapping[str, float],
    normalised: Mapping[str, Mapping[str, float]],
    raw: Mapping[str, Mapping[str, float]],
    replicates: Mapping[str, Sequence[Mapping[str, float]]],
    runs: Mapping[str, int],
    confidence: float,
) -> dict[str, object]:
    """Intervals per criterion and path, ties where they overlap, and the replicate totals' margins."""
    intervals: dict[str, dict[str, tuple[float, float]]] = {}
    methods: dict[str, str] = {}
    tied: list[str] = []
    scored = {c: dict(v) for c, v in normalised.items()}
    for name in normalised:
        crit = CRITERIA.get(name)
        if crit is None:
            methods[name] = ASSESSED
            continue
        per_path: dict[str, tuple[float, float]] = {}
        for m in metrics:
            reps = replicates[m.path]
            method = noise.method_of(crit.field, runs.get(m.path, 1), reps[0] if reps else {})
            methods[name] = method
            if method in (noise.REQUESTS, noise.REPEATS):
                per_path[m.path] = noise.percentile_interval([r[crit.field] for r in reps], confidence)
            elif method == noise.FIXED:
                per_path[m.path] = (raw[name][m.path], raw[name][m.path])
            else:
                per_path[m.path] = (math.nan, math.nan)
        intervals[name] = per_path
        best = max(scored[name], key=lambda p: (scored[name][p], p))
        level = [p for p in per_path if noise.overlaps(per_path[p], per_path[best])]
        for p in level:
            scored[name][p] = scored[name][best]
        if len(level) == len(per_path) and len(set(normalised[name].values())) > 1:
            tied.append(name)
    # Each replicate is scored like the point: resampled criteria normalised afresh, measured-once ones
    # level (their noise is unknown), fixed ones as measured, and a criterion the point ties (its paths'
    # intervals overlap) level too: resampling it afresh would let a difference the point calls noise
    # decide the margin's interval, even against the point's leader.
    by_path = {m.path: m for m in metrics}
    count = min(len(replicates[p]) for p in by_path)
    signed: list[dict[str, float]] = []
    for b in range(count):
        norm_b: dict[str, dict[str, float]] = {}
        for name in used:
            if (
                name not in CRITERIA
                or name in tied
                or methods.get(name) not in (noise.REQUESTS, noise.REPEATS)
            ):
                norm_b[name] = {
                    p: (1.0 if methods.get(name) == noise.ONCE else scored[name][p]) for p in by_path
                }
                continue
            # a resampled criterion's figure is in every replicate (noise.RESAMPLED_FIELDS, provisioning)
            figures = {p: replicates[p][b][CRITERIA[name].field] for p in by_path}
            norm_b[name] = (
                dict.fromkeys(by_path, math.nan)
                if any(math.isnan(x) for x in figures.values())
                else normalise(CRITERIA[name], figures)
            )
        signed.append(_totals(used, norm_b))
    return {
        "normalised": scored,
        "intervals": intervals,
        "interval_method": methods,
        "tied": tuple(tied),
        "confidence": confidence,
        "resamples": count,
        "noise_assessed": True,
        "signed": signed,
    }
