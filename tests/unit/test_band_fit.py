"""The error band (issue 32): a prediction interval drawn per GPU class, metric and load regime, its coverage
measured with each publisher left out, the file it is written to, and what a GPU takes from it."""

from __future__ import annotations

import math
import random
import statistics
from pathlib import Path

import pytest

from gpuplace.catalog import load_gpu_catalog
from gpuplace.catalog.band import load_prediction_band
from gpuplace.catalog.band_fit import (
    NOMINAL,
    POOLED,
    RatioPoint,
    between_sources_interval,
    components_interval,
    coverage,
    cross_validate,
    fit_edges,
    interval,
    load_regime,
    lookup,
    pooled_interval,
    t_quantile,
    variance_components,
)
from gpuplace.errors import InvalidInput

# Student's t quantiles from a printed table (Abramowitz & Stegun, Table 26.10)
T_TABLE = {(0.9, 1): 3.078, (0.9, 2): 1.886, (0.9, 3): 1.638, (0.9, 5): 1.476, (0.9, 10): 1.372,
           (0.95, 4): 2.132, (0.975, 3): 3.182, (0.975, 30): 2.042}  # fmt: skip


def test_t_quantiles_match_the_printed_table() -> None:
    for (p, df), want in T_TABLE.items():
        assert t_quantile(p, df) == pytest.approx(want, rel=2e-3), (p, df)


def test_the_interval_covers_the_next_draw_at_its_nominal_level() -> None:
    """Monte Carlo: from 4 log-normal draws, the interval holds the fifth 80% of the time (a min–max
    envelope of 4 would hold it 60%, and a ±1 sd band far less than 80% at n = 4)."""
    rng = random.Random(7)
    trials, inside = 4000, 0
    for _ in range(trials):
        draws = [math.exp(rng.gauss(0.3, 0.4)) for _ in range(5)]
        low, high = interval(draws[:4])
        inside += low <= draws[4] <= high
    assert abs(inside / trials - NOMINAL) < 0.025, inside / trials


def test_load_regimes() -> None:
    assert load_regime(0.1) == "light"
    assert load_regime(0.5) == "heavy"
    assert load_regime(0.9) == "saturated"
    assert load_regime(0.1, stable=False) == "saturated"
    assert load_regime(math.inf) == "saturated"


def _points(source: str, ratios: list[float], cls: str = "hopper", line0: int = 10) -> list[RatioPoint]:
    return [RatioPoint(line0 + i, source, cls, "tpot_p50", "heavy", r) for i, r in enumerate(ratios)]


def test_a_cell_needs_three_figures_from_two_publishers_else_it_borrows_the_pooled_band() -> None:
    one_source = _points("a", [1.1, 1.2, 1.3, 1.4])
    assert fit_edges(one_source) == {}  # one publisher's rows share its harness: no band
    two = _points("a", [1.1, 1.2]) + _points("b", [1.3], line0=20)
    edges = fit_edges(two)
    assert set(edges) == {("hopper", "tpot_p50", "heavy"), (POOLED, "tpot_p50", "heavy")}
    ampere = _points("c", [2.0], cls="ampere", line0=30)
    edges = fit_edges(two + ampere)
    assert ("ampere", "tpot_p50", "heavy") not in edges
    borrowed = lookup(edges, "ampere", "tpot_p50", "heavy")
    assert borrowed is not None and borrowed.gpu_class == POOLED and 30 in borrowed.rows
    assert lookup(edges, "ampere", "tpot_p50", "light") is None


def test_a_figure_is_never_judged_by_a_band_its_own_publisher_drew() -> None:
    """Publisher c measures 3× what is predicted; a and b about 1×. Drawn from every row, the band holds
    c's figures; held out by publisher, c's figures fall outside the band a and b draw."""
    points = _points("a", [0.9, 1.0, 1.1]) + _points("b", [1.0, 1.05, 0.95], line0=20)
    points += _points("c", [3.0, 3.1, 2.9], line0=30)
    whole = fit_edges(points)[("hopper", "tpot_p50", "heavy")]
    assert whole.low <= 3.0 <= whole.high
    held = cross_validate(points)
    for h in held:
        assert h.edge is not None and h.point.line not in h.edge.rows
    by_c = [h for h in held if h.point.source == "c"]
    assert [h.inside for h in by_c] == [False, False, False]
    inside, judged, no_band = coverage(held)
    assert (judged, no_band) == (9, 0) and inside <= 6


def test_with_a_publisher_effect_only_the_between_sources_interval_holds_a_new_publishers_figure() -> None:
    """Monte Carlo: 5 publishers, each with its own bias (sd 0.3 in log space) and 4 figures of small
    spread (sd 0.1); the next figure comes from a sixth publisher. The pooled interval, which counts 20
    figures as 20 draws, holds it well under 80%; the between-sources one, which counts 5 publishers as 5,
    holds it about 80%. Sources are what the coverage is judged by, so this is what it reveals."""
    rng = random.Random(11)
    trials, between, pooled = 3000, 0, 0
    for _ in range(trials):
        points = []
        for s in range(5):
            bias = rng.gauss(0, 0.3)
            ratios = [math.exp(bias + rng.gauss(0, 0.1)) for _ in range(4)]
            points += _points(str(s), ratios)
        new = math.exp(rng.gauss(0, 0.3) + rng.gauss(0, 0.1))
        low, high = between_sources_interval(points)
        between += low <= new <= high
        low, high = pooled_interval(points)
        pooled += low <= new <= high
    assert abs(between / trials - NOMINAL) < 0.03, between / trials
    assert pooled / trials < NOMINAL - 0.08, pooled / trials


def test_the_between_sources_interval_widens_with_disagreeing_publishers_and_needs_two() -> None:
    agree = _points("a", [1.0, 1.1, 0.9]) + _points("b", [1.05, 0.95, 1.0], line0=20)
    disagree = _points("a", [1.0, 1.1, 0.9]) + _points("b", [2.0, 2.2, 1.8], line0=20)
    lo_a, hi_a = between_sources_interval(agree)
    lo_d, hi_d = between_sources_interval(disagree)
    assert hi_d / lo_d > 5 * (hi_a / lo_a)
    # two publishers are two draws: t with 1 degree of freedom, wider than the pooled interval of 6
    assert hi_d / lo_d > (lambda e: e[1] / e[0])(pooled_interval(disagree))
    with pytest.raises(ValueError, match="2 sources"):
        between_sources_interval(_points("a", [1.0, 1.1, 0.9]))
    held = cross_validate(disagree + _points("c", [1.5, 1.6], line0=30), draw=between_sources_interval)
    assert all(h.edge is not None and h.point.source not in h.edge.sources for h in held)


def _random_effects_world(
    rng: random.Random, cells: int, publishers: int, figures: int
) -> tuple[list[RatioPoint], list[float]]:
    """Cells with their own mean (returned, in log space); in each, publishers with their own offset (sd
    0.3 in log space) and figures of small spread (sd 0.1) around it."""
    points, means = [], []
    for c in range(cells):
        mu = rng.gauss(0, 0.2)
        means.append(mu)
        for s in range(publishers):
            bias = rng.gauss(0, 0.3)
            points += [
                RatioPoint(1000 * c + 10 * s + i, f"p{s}", f"class{c}", "tpot_p50", "heavy",
                           math.exp(mu + bias + rng.gauss(0, 0.1)))
                for i in range(figures)
            ]  # fmt: skip
    return points, means


def test_the_variance_components_are_recovered_from_many_cells() -> None:
    points, _ = _random_effects_world(random.Random(3), cells=60, publishers=4, figures=5)
    comps = variance_components(points)
    assert comps.between == pytest.approx(0.09, rel=0.25)
    assert comps.within == pytest.approx(0.01, rel=0.1)
    assert (comps.between_df, comps.within_df) == (60 * 3, 60 * 4 * 4)


def test_the_band_holds_a_new_publishers_figure_at_its_nominal_level_with_few_publishers_a_cell() -> None:
    """Monte Carlo: 6 cells of 3 publishers with 3 figures each; the next figure comes from a fourth
    publisher in the first cell. The band (variances pooled over the cells) holds it about 80% of the
    time and is narrower than the interval that estimates the publishers' spread from the cell's own 3
    (which also holds it, with 2 degrees of freedom); counting figures as draws holds it far less often."""
    rng = random.Random(5)
    trials, held, as_draws, widths, own_widths = 2000, 0, 0, [], []
    for _ in range(trials):
        points, means = _random_effects_world(rng, cells=6, publishers=3, figures=3)
        cell = [p for p in points if p.gpu_class == "class0"]
        new = math.exp(means[0] + rng.gauss(0, 0.3) + rng.gauss(0, 0.1))
        low, high = components_interval(cell, NOMINAL, variance_components(points))
        held += low <= new <= high
        widths.append(high / low)
        own_low, own_high = between_sources_interval(cell)
        own_widths.append(own_high / own_low)
        low, high = pooled_interval(cell)
        as_draws += low <= new <= high
    assert abs(held / trials - NOMINAL) < 0.04, held / trials
    assert as_draws / trials < NOMINAL - 0.1, as_draws / trials
    assert statistics.median(widths) < 0.9 * statistics.median(own_widths)


def test_each_fold_draws_its_band_and_its_variances_without_the_held_out_publisher() -> None:
    """Publisher c is far off in another cell: its offset would widen every band through τ². Each fold's
    bands are exactly those fit_edges draws from the other publishers' figures alone."""
    points = _points("a", [0.9, 1.0, 1.1]) + _points("b", [1.0, 1.05, 0.95], line0=20)
    points += _points("c", [1.2], line0=30)
    points += [RatioPoint(40 + i, s, "ampere", "ttft_p50", "heavy", r)
               for i, (s, r) in enumerate([("a", 1.0), ("a", 1.1), ("c", 5.0), ("c", 5.5)])]  # fmt: skip
    held = cross_validate(points)
    for h in held:
        others = fit_edges(p for p in points if p.source != h.point.source)
        assert h.edge == lookup(others, h.point.gpu_class, h.point.metric, h.point.regime)
    with_c = fit_edges(points)[("hopper", "tpot_p50", "heavy")]
    without_c = next(h.edge for h in held if h.point.source == "c" and h.edge is not None)
    assert with_c.high / with_c.low > 2 * (without_c.high / without_c.low)


def test_the_band_file_and_what_a_gpu_takes_from_it(tmp_path: Path) -> None:
    """Hopper takes its own band, Blackwell borrows Hopper's and says so, Ampere takes the pooled one."""
    file = tmp_path / "band.csv"
    file.write_text(
        "gpu_class,metric,regime,low,high,nominal,rows,sources,source\n"
        "hopper,tpot_p50,heavy,1.1,1.5,0.8,2 3 4,a b,x\n"
        "*,tpot_p50,heavy,0.9,2.0,0.8,2 3 4 5,a b c,x\n"
    )
    band = load_prediction_band(file)
    catalog = load_gpu_catalog()
    h100, b200, a100 = (catalog.get(n) for n in ("H100-SXM5-80GB", "B200-SXM-180GB", "A100-SXM4-80GB"))
    own = band.edge(h100, "tpot_p50", "heavy")
    assert own is not None and (own.high, own.borrowed_by) == (1.5, "")
    lent = band.edge(b200, "tpot_p50", "heavy")
    assert (
        lent is not None and lent.high == 1.5 and "hopper's band, borrowed for blackwell" in lent.describe()
    )
    pooled = band.edge(a100, "tpot_p50", "heavy")
    assert pooled is not None and pooled.high == 2.0 and "every class" in pooled.describe()
    assert band.edge(h100, "tpot_p50", "light") is None
    with pytest.raises(InvalidInput, match="regime"):
        band.edge(h100, "tpot_p50", "busy")
    file.write_text(
        "gpu_class,metric,regime,low,high,nominal,rows,sources,source\nhopper,tpot_p50,peak,1,2,0.8,2,a,x\n"
    )
    with pytest.raises(InvalidInput, match="peak"):
        load_prediction_band(file)


def test_the_shipped_band_is_a_prediction_interval_with_its_sources() -> None:
    band = load_prediction_band()
    assert band.edges
    for edge in band.edges.values():
        assert edge.nominal == NOMINAL and len(edge.rows) >= 3 and len(edge.sources) >= 2
