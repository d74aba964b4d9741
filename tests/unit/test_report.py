"""The comparison report: plots as PNG, Markdown with the verdict and tables, self-contained HTML."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from gpuplace.report import headline_metrics, write_report
from gpuplace.report.render import render_html, verdict_line
from gpuplace.steps.compare import CompareOptions, run_compare_step
from gpuplace.types.compare import Comparison
from tests.support.sample import write_sample_inputs

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Comparison]:
    root = tmp_path_factory.mktemp("cmp")
    s = write_sample_inputs(root / "in", requests=60)
    paths = s.path_inputs()
    out = run_compare_step(
        CompareOptions(
            paths=paths,
            plan=str(s.plan),
            inventory="h100-nvlink",
            penalty_usd_per_breach=0.05,
            engineering_weeks=3,
            rate_usd_per_week=5000,
        ),
        root / "out",
    )
    return root / "out", out.comparison


def test_report_files_and_plots(compared: tuple[Path, Comparison]) -> None:
    out, c = compared
    for name in ("latency_distributions", "fragmentation", "cost_vs_latency"):
        assert (out / "plots" / f"{name}.png").read_bytes().startswith(PNG)
    assert not (out / "plots" / "tpot_vs_rate.png").exists()  # one rate per path: no curve to draw
    md = (out / "report.md").read_text()
    assert verdict_line(c) in md and "No difference beyond noise" in md  # the sample's paths overlap
    assert "| TTFT p99 (ms) | 303.9 [" in md and "tie: intervals overlap" in md
    assert "| TPOT p99 (ms) |" in md and "## ROI" in md and "15,000 USD" in md
    assert "### Sensitivity" in md
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 3 and "<table>" in html


def test_html_inlines_only_the_named_images(tmp_path: Path) -> None:
    img = tmp_path / "x.png"
    img.write_bytes(PNG + b"data")
    page = render_html("# t\n\n![x](plots/x.png)\n\n![y](plots/y.png)\n", {"x": img})
    assert base64.b64encode(PNG + b"data").decode() in page
    assert 'src="plots/y.png"' in page


def test_report_rerenders_from_comparison_json_without_records(
    compared: tuple[Path, Comparison], tmp_path: Path
) -> None:
    out, _ = compared
    import json

    c = Comparison.from_json_dict(json.loads((out / "comparison.json").read_text()))
    files = write_report(c, tmp_path)
    # without per-request records the latency plot shows the p50/p99 bars instead of ECDFs
    assert files.plots["latency_distributions"].read_bytes().startswith(PNG)
    assert "tpot_vs_rate" not in files.plots


def test_headline_metrics_for_kfp(compared: tuple[Path, Comparison]) -> None:
    _, c = compared
    m = headline_metrics(c)
    assert m["native_tpot_p99_ms"] == pytest.approx(c.path("native").tpot.p99 * 1000)
    assert m["score_margin"] == pytest.approx(c.score.margin)
    low, high = c.score.intervals["tpot_p99"]["native"]
    assert (m["native_tpot_p99_ms_ci_low"], m["native_tpot_p99_ms_ci_high"]) == pytest.approx(
        (low * 1e3, high * 1e3)
    )
    # every weighted criterion ties (the sample's intervals overlap; GPU-hours is measured once), so the
    # margin's interval is the point [0, 0]: it includes zero
    assert m["beyond_noise"] == 0.0 and m["score_margin_ci_low"] <= 0 <= m["score_margin_ci_high"]
    assert "roi_multiple" in m


def test_plots_draw_only_what_informs_and_label_every_series(compared: tuple[Path, Comparison]) -> None:
    from dataclasses import replace

    from gpuplace.report.plots import close_figures, comparison_figures, fragmentation_bars, tpot_vs_rate
    from tests.support.reports import latency_report

    _, c = compared
    at = [replace(latency_report([0.1], [0.01 * k]), workload={"rate_rps": k}) for k in (1.0, 2.0, 4.0)]
    assert tpot_vs_rate({"native": at[:1], "kubeflow": at[:1]}) is None  # one rate: no curve
    curve = tpot_vs_rate({"native": at, "kubeflow": at[:2]})
    assert curve is not None
    # served locally, no path held a GPU: no fragmentation plot
    local = replace(c, paths=tuple(replace(m, gpus=float("nan")) for m in c.paths))
    assert fragmentation_bars(local) is None
    figures = comparison_figures(c)
    try:
        for fig in [*figures.values(), curve]:
            for ax in fig.axes:
                legend = ax.get_legend()
                drawn = [h for h in ax.get_legend_handles_labels()[1] if not h.startswith("_")]
                assert legend is not None and drawn, f"{ax.get_title()}: a series without a legend"
    finally:
        close_figures({**figures, "curve": curve})


@pytest.mark.parametrize(
    ("rates", "curve"),
    [
        ((3.494, 3.496), False),  # one rate: rounded to 0.01 they were 3.49 and 3.5, drawn as two
        ((3.4949, 3.5049), False),  # within 1% across a rounding boundary
        ((1.0, 1.009, 1.018), True),  # 1% steps do not chain into one rate
        ((2.0, 4.0), True),
    ],
)
def test_the_rate_plot_counts_rates_that_differ_by_noise_as_one(
    rates: tuple[float, ...], curve: bool
) -> None:
    """issue 33: two closed-loop runs at 3.494 and 3.496 req/s were drawn as a curve of two rates."""
    from dataclasses import replace

    from gpuplace.report.plots import close_figures, tpot_vs_rate
    from tests.support.reports import latency_report

    reports = [replace(latency_report([0.1], [0.01]), workload={"rate_rps": r}) for r in rates]
    fig = tpot_vs_rate({"native": reports[:1], "kubeflow": reports[1:]})
    try:
        assert (fig is not None) is curve
    finally:
        if fig is not None:
            close_figures({"curve": fig})


def test_each_metric_row_names_the_criterion_that_scores_its_field() -> None:
    from gpuplace.compare.score import CRITERIA
    from gpuplace.report.render import _ROWS

    named = {crit: field for _, field, _, _, crit in _ROWS if crit}
    assert named == {c.name: c.field for c in CRITERIA.values()}
