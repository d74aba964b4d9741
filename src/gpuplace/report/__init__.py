"""Reports of a comparison: plots (PNG), Markdown, self-contained HTML, and KFP headline metrics.

:func:`write_report` is what ``gpuplace compare``/``gpuplace report`` and the ``compare_paths``
component call: it draws the figures, writes ``report.md``, ``report.html`` and ``plots/*.png`` into
one folder, and returns where each went. :func:`headline_metrics` gives the few numbers a KFP
``Metrics`` output shows (the full set goes to MLflow).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuplace.types.compare import Comparison
from gpuplace.types.loadtest import LatencyReport, RequestResult
from gpuplace.units import to_ms


@dataclass(frozen=True, slots=True)
class ReportFiles:
    markdown: Path
    html: Path
    plots: Mapping[str, Path]
    figures: Mapping[str, Any] = field(default_factory=dict)  # kept open only with keep_figures=True


def write_report(
    comparison: Comparison,
    out_dir: str | Path,
    *,
    records: Mapping[str, Sequence[RequestResult]] | None = None,
    sweeps: Mapping[str, Sequence[LatencyReport]] | None = None,
    keep_figures: bool = False,
) -> ReportFiles:
    """Draw the plots and write ``report.md`` and ``report.html`` under ``out_dir``.

    With ``keep_figures`` the matplotlib figures stay open in the result (for ``log_figure``); the
    caller closes them with :func:`gpuplace.report.plots.close_figures`.
    """
    from gpuplace.report.plots import close_figures, comparison_figures, save_figures
    from gpuplace.report.render import render_html, render_markdown

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    figures = comparison_figures(comparison, records, sweeps)
    try:
        plots = save_figures(figures, out / "plots")
    finally:
        if not keep_figures:
            close_figures(figures)
    markdown = render_markdown(comparison, {k: f"plots/{p.name}" for k, p in plots.items()})
    md_path = out / "report.md"
    md_path.write_text(markdown)
    html_path = out / "report.html"
    html_path.write_text(render_html(markdown, plots, title="gpuplace comparison"))
    return ReportFiles(md_path, html_path, plots, figures if keep_figures else {})


def headline_metrics(comparison: Comparison) -> dict[str, float]:
    """The numbers a KFP Metrics output shows: per path p99 latencies (ms) with their interval bounds
    (``_ci_low``/``_ci_high``), provisioning, goodput, breach cost and score; the margin, its interval, and
    ``beyond_noise`` (1 when the winner's margin interval excludes zero, 0 when it does not)."""
    s = comparison.score
    out: dict[str, float] = {}
    for m in comparison.paths:
        for name, crit, value, unit in (
            ("ttft_p99_ms", "ttft_p99", m.ttft.p99, to_ms),
            ("tpot_p99_ms", "tpot_p99", m.tpot.p99, to_ms),
            ("provisioning_s", "provisioning", m.provisioning_s, float),
            ("goodput_rps", "goodput", m.goodput_rps, float),
            ("sla_breach_cost_usd_per_month", "sla_breach_cost", m.sla_breach_cost_usd_per_month, float),
        ):
            out[f"{m.path}_{name}"] = unit(value)
            low, high = s.intervals.get(crit, {}).get(m.path, (math.nan, math.nan))
            if low != high:  # an interval of one point (no sampling noise) says nothing more
                out[f"{m.path}_{name}_ci_low"] = unit(low)
                out[f"{m.path}_{name}_ci_high"] = unit(high)
        out[f"{m.path}_score"] = s.totals[m.path]
        out[f"{m.path}_load_test_runs"] = float(s.runs.get(m.path, 1))
    out["score_margin"] = s.margin
    if s.noise_assessed:
        out["score_margin_ci_low"], out["score_margin_ci_high"] = s.margin_interval
        out["beyond_noise"] = float(s.beyond_noise)
    if comparison.roi is not None:
        out["roi_multiple"] = comparison.roi.multiple
    return {k: v for k, v in out.items() if math.isfinite(v)}
