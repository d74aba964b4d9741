"""How the error band is drawn from published measurements, and how its coverage is measured out of sample.

A published figure and gpuplace's prediction of it give one ratio, measured ÷ predicted, with the figure's
GPU class, metric, load regime and source (the publisher: MLPerf, the vLLM blog, Lambda, ...). The band of a
(class, metric, regime) cell is a prediction interval at the nominal level (80%) for a figure **of a
publisher not among the cell's**: in log space, a one-way random-effects model, log ratio = μ(cell) +
publisher effect + figure noise, whose two variances are pooled over every cell
(:func:`variance_components`; :func:`components_interval`). A publisher's figures share its harness, so
twenty figures of two publishers are not twenty draws (the interval that counted them so,
:func:`pooled_interval`, held 7 of 12 held-out figures at 80% nominal); and a cell's own two to five
publishers say little about how much publishers differ (the interval that estimated it per cell,
:func:`between_sources_interval`, drew bands 3.4× wide). A cell needs :data:`MIN_ROWS` rows from
:data:`MIN_SOURCES` sources; one that has fewer borrows the cell of the same metric and regime pooled over
every class (level ``all classes``), and where that too is short there is no band, said so.

The coverage reported beside the band is measured by cross-validation grouped by source
(:func:`cross_validate`): each source's rows are judged by the band drawn from the other sources' rows
only (the variance components too), so no row sits in the band that judges it, and a publisher's own bias
(its harness, its lengths) counts against the band as it would for a user's cluster.

The load regime of a prediction is its load as a share of the replica's fluid capacity
(:func:`load_regime`): ``light`` below 0.3, ``saturated`` from 0.85 or when the backlog grows,
``heavy`` between. The share comes from the prediction itself, so the benchmark and ``gpuplace predict``
classify a load the same way.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

REGIMES: tuple[str, ...] = ("light", "heavy", "saturated")
LIGHT_SHARE = 0.3  # below: a few sequences at a time, the decode step near its memory-bound floor
SATURATED_SHARE = 0.85  # from here: queues form, the engine's batch limits decide latency
NOMINAL = 0.8  # the band's nominal coverage: 4 of 5 new figures inside
MIN_ROWS = 3  # a sample standard deviation needs 2 degrees of freedom to mean anything
MIN_SOURCES = 2  # one publisher's rows share its harness: their spread is not a spread of the world
POOLED = "*"  # the gpu_class of a band pooled over every class


def load_regime(share: float, stable: bool = True) -> str:
    """``light``, ``heavy`` or ``saturated`` for a load at ``share`` of the fluid capacity."""
    if not stable or not share < SATURATED_SHARE:
        return "saturated"
    return "light" if share < LIGHT_SHARE else "heavy"


@dataclass(frozen=True, slots=True)
class RatioPoint:
    """One published figure against its prediction."""

    line: int  # the figure's line in measurements.csv (the header is line 1)
    source: str  # the publisher (the group of the cross-validation)
    gpu_class: str
    metric: str
    regime: str
    ratio: float  # measured ÷ predicted


@dataclass(frozen=True, slots=True)
class FittedEdge:
    """The band of one cell: measured ÷ predicted within [low, high] at ``nominal``, drawn from ``rows``."""

    gpu_class: str  # POOLED when borrowed from every class
    metric: str
    regime: str
    low: float
    high: float
    rows: tuple[int, ...]
    sources: tuple[str, ...]
    nominal: float = NOMINAL


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile (Hill 1970, as in Abramowitz & Stegun 26.7.5; within 0.2% from 3 degrees of
    freedom up; the closed forms for 1 and 2)."""
    if df < 1:
        raise ValueError(f"df must be at least 1, got {df}")
    if df == 1:
        return math.tan(math.pi * (p - 0.5))
    if df == 2:  # the series is weakest here; the closed form is exact
        return (2 * p - 1) * math.sqrt(2 / (4 * p * (1 - p)))
    z = statistics.NormalDist().inv_cdf(p)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def interval(ratios: Sequence[float], nominal: float = NOMINAL) -> tuple[float, float]:
    """The prediction interval of the next ratio at ``nominal`` from ``ratios`` (at least 2), in log space."""
    logs = [math.log(r) for r in ratios]
    n = len(logs)
    mean, sd = statistics.fmean(logs), statistics.stdev(logs)
    half = t_quantile(0.5 + nominal / 2, n - 1) * sd * math.sqrt(1 + 1 / n)
    return math.exp(mean - half), math.exp(mean + half)


def pooled_interval(points: Sequence[RatioPoint], nominal: float = NOMINAL) -> tuple[float, float]:
    """:func:`interval` over the points' ratios, each figure a draw of its own (the band until 2026-12-07;
    bench_published.py reports its coverage beside the band's)."""
    return interval([p.ratio for p in points], nominal)


def _logs_by_source(points: Iterable[RatioPoint]) -> dict[str, list[float]]:
    groups: dict[str, list[float]] = defaultdict(list)
    for p in points:
        groups[p.source].append(math.log(p.ratio))
    return groups


def _within(groups: Iterable[list[float]]) -> tuple[float, int]:
    """The sum of squares of each group around its own mean, and its degrees of freedom."""
    ss, df = 0.0, 0
    for logs in groups:
        m = statistics.fmean(logs)
        ss += sum((x - m) ** 2 for x in logs)
        df += len(logs) - 1
    return ss, df


def between_sources_interval(points: Sequence[RatioPoint], nominal: float = NOMINAL) -> tuple[float, float]:
    """A prediction interval for a figure of a source not among ``points``' (at least 2 sources), in log
    space: a one-way random-effects model, log ratio = μ + source effect + figure noise.

    The spread of the k source means gives the between-source variance τ² (less the figure noise each mean
    carries, floored at 0); the pooled within-source variance gives σ². The next source's figure varies by
    τ² + σ² around μ, estimated by the mean of the source means (variance: the means' spread ÷ k), and the
    quantile is Student's t with k − 1 degrees of freedom: two publishers are two draws, however many
    figures each published. Not the shipped band (one cell's publishers estimate τ² with k − 1 degrees of
    freedom): bench_published.py reports its coverage beside it.
    """
    groups = _logs_by_source(points)
    k = len(groups)
    if k < 2:
        raise ValueError(f"a between-source interval needs 2 sources, got {k}")
    means = [statistics.fmean(g) for g in groups.values()]
    within_ss, within_df = _within(groups.values())
    within = within_ss / within_df if within_df else 0.0
    spread = statistics.variance(means)
    tau2 = max(0.0, spread - within * statistics.fmean(1 / len(g) for g in groups.values()))
    half = t_quantile(0.5 + nominal / 2, k - 1) * math.sqrt(tau2 + within + spread / k)
    mu = statistics.fmean(means)
    return math.exp(mu - half), math.exp(mu + half)


@dataclass(frozen=True, slots=True)
class Components:
    """The variances of log(measured ÷ predicted), pooled over every (class, metric, regime) cell."""

    between: float  # τ²: a publisher's own offset, beyond its figures' noise
    within: float  # σ²: the figures of one publisher in one cell around their mean
    between_df: int  # Σ (publishers − 1) over the cells with two or more
    within_df: int  # Σ (figures − 1) over each publisher's figures in a cell


def variance_components(points: Iterable[RatioPoint]) -> Components:
    """The one-way random-effects variances, each cell with its own mean, pooled over the cells.

    σ²: the pooled variance of a publisher's figures around their mean in a cell. τ²: per cell with k ≥ 2
    publishers, the variance of their means less the figure noise each mean carries (σ² × the mean of
    1/figures), averaged over the cells with k − 1 weights and floored at 0 (the ANOVA estimator, pooled).
    """
    by_cell: dict[tuple[str, str, str], list[RatioPoint]] = defaultdict(list)
    for p in points:
        by_cell[(p.gpu_class, p.metric, p.regime)].append(p)
    cells = [_logs_by_source(members) for members in by_cell.values()]
    within_ss, within_df = _within(logs for groups in cells for logs in groups.values())
    within = within_ss / within_df if within_df else 0.0
    between_sum, between_df = 0.0, 0
    for groups in cells:
        k = len(groups)
        if k < 2:
            continue
        spread = statistics.variance([statistics.fmean(g) for g in groups.values()])
        between_sum += (k - 1) * (spread - within * statistics.fmean(1 / len(g) for g in groups.values()))
        between_df += k - 1
    between = max(0.0, between_sum / between_df) if between_df else 0.0
    return Components(between, within, between_df, within_df)


def components_interval(
    points: Sequence[RatioPoint], nominal: float, components: Components
) -> tuple[float, float]:
    """The band's interval for a new publisher's figure in the cell of ``points``: around the mean of the
    cell's publisher means μ, the pooled τ² + σ² plus the variance of μ itself ((τ² + σ² × the mean of
    1/figures) ÷ publishers), Student's t with the pooled between-publisher degrees of freedom."""
    groups = _logs_by_source(points)
    means = [statistics.fmean(g) for g in groups.values()]
    tau2, sigma2 = components.between, components.within
    var_mu = (tau2 + sigma2 * statistics.fmean(1 / len(g) for g in groups.values())) / len(means)
    half = t_quantile(0.5 + nominal / 2, max(components.between_df, 1)) * math.sqrt(tau2 + sigma2 + var_mu)
    mu = statistics.fmean(means)
    return math.exp(mu - half), math.exp(mu + half)


Interval = Callable[[Sequence[RatioPoint], float], tuple[float, float]]


def _edge(
    points: Sequence[RatioPoint], cls: str, metric: str, regime: str, nominal: float, draw: Interval
) -> FittedEdge | None:
    sources = tuple(sorted({p.source for p in points}))
    if len(points) < MIN_ROWS or len(sources) < MIN_SOURCES:
        return None
    low, high = draw(points, nominal)
    return FittedEdge(cls, metric, regime, low, high, tuple(sorted(p.line for p in points)), sources, nominal)


def fit_edges(
    points: Iterable[RatioPoint], nominal: float = NOMINAL, draw: Interval | None = None
) -> dict[tuple[str, str, str], FittedEdge]:
    """Every cell's band (class, metric, regime), and the pooled band of every (metric, regime) under
    gpu_class :data:`POOLED`; cells too thin for a band are absent. ``draw`` makes a cell's interval; by
    default :func:`components_interval` with the components of ``points``."""
    points = list(points)
    if draw is None:
        components = variance_components(points)

        def draw(cell: Sequence[RatioPoint], level: float) -> tuple[float, float]:
            return components_interval(cell, level, components)

    cells: dict[tuple[str, str, str], list[RatioPoint]] = defaultdict(list)
    for p in points:
        cells[(p.gpu_class, p.metric, p.regime)].append(p)
        cells[(POOLED, p.metric, p.regime)].append(p)
    out = {}
    for key, members in sorted(cells.items()):
        edge = _edge(members, *key, nominal, draw)
        if edge is not None:
            out[key] = edge
    return out


def lookup(
    edges: dict[tuple[str, str, str], FittedEdge], gpu_class: str, metric: str, regime: str
) -> FittedEdge | None:
    """The class's own band for (metric, regime), else the pooled one, else None."""
    return edges.get((gpu_class, metric, regime)) or edges.get((POOLED, metric, regime))


@dataclass(frozen=True, slots=True)
class HeldOut:
    """A figure judged by the band of the other sources' rows: inside, outside, or no band to judge by."""

    point: RatioPoint
    edge: FittedEdge | None

    @property
    def inside(self) -> bool | None:
        if self.edge is None:
            return None
        return self.edge.low <= self.point.ratio <= self.edge.high


def cross_validate(
    points: Sequence[RatioPoint], nominal: float = NOMINAL, draw: Interval | None = None
) -> list[HeldOut]:
    """Leave one source out: every figure judged by the band the other sources' figures draw (with the
    variance components of those figures only, by default)."""
    out = []
    for source in sorted({p.source for p in points}):
        edges = fit_edges((p for p in points if p.source != source), nominal, draw)
        out += [
            HeldOut(p, lookup(edges, p.gpu_class, p.metric, p.regime)) for p in points if p.source == source
        ]
    return out


def coverage(held: Iterable[HeldOut]) -> tuple[int, int, int]:
    """(inside, judged, without a band) over ``held``."""
    held = list(held)
    judged = [h for h in held if h.inside is not None]
    return sum(bool(h.inside) for h in judged), len(judged), len(held) - len(judged)
