"""How sure the comparison is: bootstrap intervals of every scored figure, and the noise-aware verdict.

A path's request-level figures (p99 TTFT and TPOT, goodput, SLO attainment and the breach cost that
follows from it, GPU-hours per 1k requests, latency predictability, the prediction error) are
recomputed on resamples of its per-request load-test records, drawn with replacement; when a path was
measured several times with the same workload (repeats), each resample first draws the runs with
replacement and then the requests within each drawn run (a two-level bootstrap), so run-to-run
variation counts too. Provisioning is one figure per run: it gets an interval only from repeats.
Figures computed from the measured placement (cost, fragmentation) have no sampling noise.

:func:`path_replicates` gives a path's resampled figures; :mod:`gpuplace.compare.score` turns them into
per-criterion intervals (overlapping intervals score as a tie) and an interval of the winner's margin
(a margin interval that includes zero is "no difference beyond noise"). Pure numpy, seeded: the same
records give the same verdict.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from gpuplace.compare.metrics import (
    gpu_hours_per_1k_requests,
    sla_breach_cost_usd_per_month,
    sla_breaches_per_month,
)
from gpuplace.types import Distribution
from gpuplace.types.compare import MARGIN_OVER_RUNS, PathMetrics
from gpuplace.types.loadtest import LatencyReport, RequestResult

RESAMPLES = 1000
CONFIDENCE = 0.95
SEED = 20261201

# How a figure's interval was obtained (the report and MLflow say which).
REQUESTS = "bootstrap over requests"
REPEATS = "bootstrap over runs and requests"
FIXED = "no sampling noise (computed from the measured placement)"
ONCE = "measured once: no interval (repeat the run to get one)"
# How the margin's interval was obtained with at least MIN_RUNS runs per path (score.py): every run scored
# on its own, the leader's advantage estimated from the runs in the order they ran with a linear drift
# of the machine over that order removed (least squares), and a t-interval on the runs' residuals.
RUNS = MARGIN_OVER_RUNS
# Runs per path a verdict needs: with fewer, a change of the machine between the runs cannot be told
# from a difference of the paths, so no path is named the winner.
MIN_RUNS = 3
# The smallest margin, in score points (0-1), that the verdict names a winner for, however narrow its
# interval: an A/A comparison (one engine behind both paths) of 3 runs a path excludes zero at 95% about one
# time in twenty by chance, with margins of a few thousandths of a point; a margin under this floor is
# reported as "no difference worth acting on" (docs/comparison.md#noise), a practical-significance floor
# on top of the statistical one.
MIN_EFFECT = 0.02

# The PathMetrics fields a resample recomputes; every other field keeps its measured value.
RESAMPLED_FIELDS = (
    "ttft_p50_s",
    "ttft_p99_s",
    "tpot_p50_s",
    "tpot_p99_s",
    "goodput_rps",
    "slo_attainment",
    "sla_breaches_per_month",
    "sla_breach_cost_usd_per_month",
    "gpu_hours_per_1k_requests",
    "latency_predictability",
    "prediction_error",
)


# Resampled fields whose noise one run's requests do not show (they divide by the run's duration).
ONCE_PER_RUN = ("gpu_hours_per_1k_requests",)


@dataclass(frozen=True, slots=True)
class MeasuredRun:
    """One load test of a path, with its per-request records and the provisioning it measured."""

    report: LatencyReport
    records: Sequence[RequestResult]
    provisioning_s: float = math.nan


@dataclass(frozen=True, slots=True)
class _Arrays:
    ttft: np.ndarray  # NaN for a failed request
    tpot: np.ndarray  # NaN for a failed request or one with a single output token
    good: np.ndarray  # meets every SLO bound
    ok: np.ndarray
    duration_s: float


def _arrays(run: MeasuredRun) -> _Arrays:
    slo = run.report.slo
    ok = np.array([r.success for r in run.records], dtype=bool)
    ttft = np.array([r.ttft_s if r.success else math.nan for r in run.records], dtype=float)
    tpot = np.array([r.tpot_s if r.success else math.nan for r in run.records], dtype=float)
    good = np.array([r.success and slo.good(r.ttft_s, r.tpot_s) for r in run.records], dtype=bool)
    return _Arrays(ttft, tpot, good, ok, run.report.duration_s)


def _pct(values: np.ndarray, q: float) -> float:
    finite = values[~np.isnan(values)]
    return float(np.percentile(finite, q)) if finite.size else math.nan


def _figures(
    base: PathMetrics, picked: Sequence[tuple[_Arrays, np.ndarray]], rate_rps: float, penalty: float
) -> dict[str, float]:
    """The resampled figures of one replicate: ``picked`` holds (run, request indices) pairs, pooled."""
    ttft = np.concatenate([a.ttft[i] for a, i in picked])
    tpot = np.concatenate([a.tpot[i] for a, i in picked])
    good = int(sum(int(a.good[i].sum()) for a, i in picked))
    completed = int(sum(int(a.ok[i].sum()) for a, i in picked))
    n = int(sum(i.size for _, i in picked))
    duration = math.fsum(a.duration_s for a, _ in picked)
    attainment = good / n if n else math.nan
    breaches = sla_breaches_per_month(attainment, rate_rps)
    out = {
        "ttft_p50_s": _pct(ttft, 50),
        "ttft_p99_s": _pct(ttft, 99),
        "tpot_p50_s": _pct(tpot, 50),
        "tpot_p99_s": _pct(tpot, 99),
        "goodput_rps": good / duration if duration > 0 else math.nan,
        "slo_attainment": attainment,
        "sla_breaches_per_month": breaches,
        "sla_breach_cost_usd_per_month": sla_breach_cost_usd_per_month(breaches, penalty),
        "gpu_hours_per_1k_requests": gpu_hours_per_1k_requests(base.gpus, duration, completed),
    }
    ratios = [
        out[f"{k}_p50_s"] / out[f"{k}_p99_s"]
        for k in ("ttft", "tpot")
        if not math.isnan(out[f"{k}_p99_s"]) and out[f"{k}_p99_s"] > 0
    ]
    out["latency_predictability"] = sum(ratios) / len(ratios) if ratios else math.nan
    errors = [
        abs(out[f"{m}_p99_s"] - pred) / pred
        for m in ("ttft", "tpot")
        for pred in (base.latency.metric(m).predicted.p99,)
        if not math.isnan(base.prediction_error) and pred > 0 and not math.isnan(out[f"{m}_p99_s"])
    ]
    out["prediction_error"] = sum(errors) / len(errors) if errors else math.nan
    return out


def path_replicates(
    base: PathMetrics,
    runs: Sequence[MeasuredRun],
    *,
    penalty_usd_per_breach: float,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> tuple[dict[str, float], list[dict[str, float]]]:
    """(the point figures pooled over ``runs``, ``resamples`` resampled figure sets), one dict per set.

    With one run the point figures are the run's own; provisioning is resampled (as the mean over the
    drawn runs) only with several runs. Every run must have records.
    """
    if not runs or any(not r.records for r in runs):
        raise ValueError(f"path {base.path}: every run needs its per-request records to be resampled")
    arrays = [_arrays(r) for r in runs]
    rate = runs[0].report.slo.rate_rps
    if rate is None:
        rate = base.request_throughput_rps
    rng = np.random.default_rng(seed)
    everything = [(a, np.arange(a.ok.size)) for a in arrays]
    point = _figures(base, everything, rate, penalty_usd_per_breach)
    provisioning = np.array([r.provisioning_s for r in runs], dtype=float)
    if len(runs) > 1:
        point["provisioning_s"] = float(np.mean(provisioning))
    out = []
    for _ in range(resamples):
        chosen = rng.integers(len(arrays), size=len(arrays)) if len(arrays) > 1 else np.zeros(1, dtype=int)
        picked = [(arrays[k], rng.integers(arrays[k].ok.size, size=arrays[k].ok.size)) for k in chosen]
        figures = _figures(base, picked, rate, penalty_usd_per_breach)
        if len(runs) > 1:
            figures["provisioning_s"] = float(np.mean(provisioning[chosen]))
        out.append(figures)
    return point, out


def pooled(m: PathMetrics, runs: Sequence[MeasuredRun], point: Mapping[str, float]) -> PathMetrics:
    """``m`` with the figures pooled over its ``runs`` in place of its own: TTFT and TPOT over every run's
    requests (beside the same prediction), the other resampled figures from ``point``."""
    arrays = [_arrays(r) for r in runs]

    def over_runs(metric: str) -> Distribution:
        values = np.concatenate([getattr(a, metric) for a in arrays])
        return Distribution.of(values[~np.isnan(values)].tolist())

    latency = replace(
        m.latency,
        ttft=replace(m.latency.ttft, measured=over_runs("ttft")),
        tpot=replace(m.latency.tpot, measured=over_runs("tpot")),
    )
    scalars = {k: v for k, v in point.items() if PathMetrics.__dataclass_fields__.get(k) is not None}
    return replace(m, latency=latency, **scalars)  # type: ignore[arg-type]  # only float fields are resampled


def percentile_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The central ``confidence`` interval of bootstrap values (percentile method); NaN if none is finite."""
    finite = np.array([v for v in values if not math.isnan(v)], dtype=float)
    if not finite.size:
        return math.nan, math.nan
    tail = (1.0 - confidence) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(low), float(high)


def overlaps(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Whether two intervals share a point; an unknown (NaN) interval overlaps everything."""
    if any(math.isnan(x) for x in (*a, *b)):
        return True
    return a[0] <= b[1] and b[0] <= a[1]


def method_of(field: str, runs: int, resampled: Mapping[str, object]) -> str:
    """How the interval of ``field`` was obtained, for a path measured ``runs`` times."""
    if field in ONCE_PER_RUN:
        # GPU-hours per 1k requests is the run's duration over its requests: resampling the requests
        # leaves the duration as measured, so one run gives it no interval
        return REPEATS if runs > 1 else ONCE
    if field in RESAMPLED_FIELDS:
        return REPEATS if runs > 1 else REQUESTS
    if field == "provisioning_s":
        return REPEATS if runs > 1 and field in resampled else ONCE
    return FIXED


def run_figures(
    base: PathMetrics, runs: Sequence[MeasuredRun], *, penalty_usd_per_breach: float
) -> list[dict[str, float]]:
    """Each run's own figures (every request of that run alone, and its provisioning), in run order."""
    rate = runs[0].report.slo.rate_rps if runs else None
    if rate is None:
        rate = base.request_throughput_rps
    out = []
    for run in runs:
        a = _arrays(run)
        figures = _figures(base, [(a, np.arange(a.ok.size))], rate, penalty_usd_per_breach)
        figures["provisioning_s"] = run.provisioning_s
        out.append(figures)
    return out


def run_slots(started: Mapping[str, Sequence[float]]) -> dict[str, list[float]]:
    """Where each path's runs fall in time: their rank among every run's start (path → one slot per run).
    Without a start for every run (hand-made reports), run i of every path gets slot i: the paths'
    runs are taken as paired, one pair after the other."""
    if all(math.isfinite(t) for ts in started.values() for t in ts):
        order = sorted((t, p, i) for p, ts in started.items() for i, t in enumerate(ts))
        slots: dict[str, list[float]] = {p: [math.nan] * len(ts) for p, ts in started.items()}
        for rank, (_, p, i) in enumerate(order):
            slots[p][i] = float(rank)
        return slots
    return {p: [float(i) for i in range(len(ts))] for p, ts in started.items()}


def t_quantile(p: float, dof: int) -> float:
    """The ``p`` quantile (p > 0.5) of Student's t with ``dof`` degrees of freedom, by bisection on its
    closed-form CDF for a whole number of degrees (Abramowitz & Stegun 26.7.3–4)."""

    def central(t: float) -> float:  # P(|T| < t)
        theta = math.atan(t / math.sqrt(dof))
        c2, s = math.cos(theta) ** 2, math.sin(theta)
        if dof % 2:
            term, total = math.cos(theta), 0.0
            for k in range(1, (dof - 1) // 2 + 1):
                total += term
                term *= c2 * (2 * k) / (2 * k + 1)
            return 2 / math.pi * (theta + s * total) if dof > 1 else 2 * theta / math.pi
        term, total = 1.0, 0.0
        for k in range(1, dof // 2 + 1):
            total += term
            term *= c2 * (2 * k - 1) / (2 * k)
        return s * total

    target = 2 * p - 1
    low, high = 0.0, 1.0
    while central(high) < target:
        high *= 2
    for _ in range(200):
        mid = (low + high) / 2
        low, high = (mid, high) if central(mid) < target else (low, mid)
    return (low + high) / 2


def drift_adjusted_difference(
    values: Sequence[float], slots: Sequence[float], leader: Sequence[bool], confidence: float = CONFIDENCE
) -> tuple[float, float, float]:
    """(estimate, low, high) of the leader's advantage over the other path in runs' ``values``, fitting
    value = a + b·slot + δ·leader by least squares: a drift of the machine that is linear in the runs'
    order is removed, and one that is not is left in the residuals, so it widens the t-interval of δ
    (n runs − 3 degrees of freedom) instead of deciding it. NaN when fewer than 4 runs have a value."""
    v, x, d = (np.asarray(a, dtype=float) for a in (values, slots, leader))
    keep = ~np.isnan(v)
    v, x, d = v[keep], x[keep], d[keep]
    design = np.column_stack([np.ones_like(x), x, d])
    dof = v.size - 3
    if dof < 1 or np.linalg.matrix_rank(design) < 3:
        return math.nan, math.nan, math.nan
    coef, *_ = np.linalg.lstsq(design, v, rcond=None)
    residual = v - design @ coef
    sigma2 = float(residual @ residual) / dof
    se = math.sqrt(sigma2 * float(np.linalg.inv(design.T @ design)[2, 2]))
    half = t_quantile((1 + confidence) / 2, dof) * se
    return float(coef[2]), float(coef[2] - half), float(coef[2] + half)
