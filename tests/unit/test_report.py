"""The comparison report: plots as PNG, Markdown with the verdict and tables, self-contained HTML."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from gpuplace.compare.step import CompareOptions, run_compare_step
from gpuplace.report import headline_metrics, write_report
from gpuplace.report.render import render_html
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
    for name in ("latency_distributions", "tpot_vs_rate", "fragmentation", "cost_vs_latency"):
        assert (out / "plots" / f"{name}.png").read_bytes().startswith(PNG)
    md = (out / "report.md").read_text()
    assert f"**{c.score.winner}** wins" in md
    assert "| TPOT p99 (ms) |" in md and "## ROI" in md and "15,000 USD" in md
    assert "### Sensitivity" in md
    html = (out / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 4 and "<table>" in html


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
    assert m["native_tpot_p99_ms"] == pytest.approx(c.path("native").tpot_p99_s * 1000)
    assert m["score_margin"] == pytest.approx(c.score.margin)
    assert "roi_multiple" in m
