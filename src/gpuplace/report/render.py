"""The comparison report as Markdown and as one self-contained HTML page.

Markdown is the source (the CLI writes it, KFP shows it as ``Output[Markdown]``); the HTML page is
the same text rendered with markdown-it, the plots inlined as base64 PNGs so the Kubeflow UI's HTML
viewer (which shows one file) displays them. Latencies are shown in milliseconds; everything else in
the unit its column names.
"""

from __future__ import annotations

import base64
import html
import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path

from gpuplace.types.compare import MARGIN_OVER_RUNS, Comparison, PathMetrics, ScoreCard
from gpuplace.units import to_ms


def _same(value: float) -> float:
    return value


def _f(value: float, digits: int = 2, unit: Callable[[float], float] = _same) -> str:
    if value is None or math.isnan(value):
        return "–"
    if math.isinf(value):
        return "∞"
    return f"{unit(value):,.{digits}f}"


# (label, PathMetrics figure, digits, its unit (to_ms for a time in seconds shown in ms), the criterion it is
# scored as: its interval is that criterion's)
_ROWS: tuple[tuple[str, str, int, Callable[[float], float], str], ...] = (
    ("provisioning (s, first created → all ready)", "provisioning_s", 2, _same, "provisioning"),
    ("TTFT p50 (ms)", "ttft_p50_s", 1, to_ms, ""),
    ("TTFT p99 (ms)", "ttft_p99_s", 1, to_ms, "ttft_p99"),
    ("TPOT p50 (ms)", "tpot_p50_s", 2, to_ms, ""),
    ("TPOT p99 (ms)", "tpot_p99_s", 2, to_ms, "tpot_p99"),
    ("goodput (req/s)", "goodput_rps", 2, _same, "goodput"),
    ("SLO attainment", "slo_attainment", 3, _same, "slo_attainment"),
    ("completed / failed requests", "", 0, _same, ""),
    ("GPUs held", "gpus", 0, _same, ""),
    ("GPU-hours per 1k requests", "gpu_hours_per_1k_requests", 3, _same, "gpu_hours_per_1k"),
    ("cost (USD/month)", "cost_usd_per_month", 0, _same, "cost"),
    ("fragmentation after placement (FGD, GPUs)", "fragmentation_gpus", 2, _same, "fragmentation"),
    ("fragmentation ratio (of the fleet's GPUs)", "fragmentation_ratio", 4, _same, ""),
    ("SLA breaches per month (expected)", "sla_breaches_per_month", 0, _same, ""),
    ("SLA-breach cost (USD/month)", "sla_breach_cost_usd_per_month", 0, _same, "sla_breach_cost"),
    ("predicted-vs-measured error (mean abs. relative)", "prediction_error", 3, _same, "prediction_error"),
    ("latency predictability (p50/p99)", "latency_predictability", 3, _same, "latency_predictability"),
    ("pods not where the plan said", "misplaced_pods", 0, _same, ""),
)


def _metric_cell(
    c: Comparison, m: PathMetrics, field: str, digits: int, unit: Callable[[float], float], crit: str
) -> str:
    if not field:
        return f"{m.completed} / {m.failed}"
    value = m.figure(field)
    cell = _f(value, digits, unit)
    interval = c.score.intervals.get(crit, {}).get(m.path)
    if interval is None or math.isnan(value):
        return cell
    if any(math.isnan(x) for x in interval):
        return f"{cell} (once: no interval)"
    if interval[0] == interval[1]:
        return cell
    return f"{cell} [{_f(interval[0], digits, unit)}, {_f(interval[1], digits, unit)}]"


def runs_text(s: ScoreCard) -> str:
    """How many load-test runs each path pooled ("2 runs per path"); "" when each ran once."""
    if not any(n > 1 for n in s.runs.values()):
        return ""
    counts = set(s.runs.values())
    if len(counts) == 1:
        return f"{counts.pop()} runs per path"
    return ", ".join(f"{n} {p} run{'s' if n > 1 else ''}" for p, n in s.runs.items())


def _interval(s: ScoreCard) -> str:
    low, high = s.margin_interval
    over = f" over {runs_text(s)}" if runs_text(s) else ""
    return f"{s.confidence:.0%} interval [{low:+.3f}, {high:+.3f}]{over}"


def _how(s: ScoreCard) -> str:
    """How the margin's interval was obtained, in words."""
    if s.margin_method == MARGIN_OVER_RUNS:
        return "t-interval over the runs in the order they ran, a linear drift of the machine removed"
    what = "runs and their requests" if runs_text(s) else "requests"
    return f"{s.resamples} bootstrap resamples of the {what}"


def verdict_line(c: Comparison) -> str:
    """The verdict in one Markdown line; the CLI, the report, KFP and MLflow all show this sentence."""
    s = c.score
    if s.cannot_conclude:
        return (
            f"**Cannot conclude**: {s.leader} is ahead by {s.margin:.3f} points and the {_interval(s)} of "
            f"its margin excludes zero ({_how(s)}), but with {s.cannot_conclude}. Repeat the runs: gpuplace "
            "run --compare --repeats 3."
        )
    if s.under_min_effect:
        return (
            f"**No difference worth acting on**: {s.leader} is ahead by {s.margin:.3f} points and the "
            f"{_interval(s)} of its margin excludes zero ({_how(s)}), but the margin is under the "
            f"{s.min_effect:.2f} points a verdict needs to name a winner (the smallest margin worth acting "
            "on)."
        )
    if s.noise_assessed and not s.winner:
        other = s.runner_up or next((p for p in s.totals if p != s.leader), "")
        why = (
            f"{s.leader} is ahead by {s.margin:.3f} points, but"
            if s.margin > 0
            else "the paths score alike once criteria whose runs do not tell them apart are tied, and"
            if s.margin_method == MARGIN_OVER_RUNS
            else "the paths score alike once criteria whose intervals overlap are tied, and"
        )
        where = (
            f"lies below zero: the resampled {'runs' if runs_text(s) else 'requests'} put {other} ahead"
            if s.margin_interval[1] < 0
            else "includes zero"
        )
        return (
            f"**No difference beyond noise**: {why} the {_interval(s)} of {s.leader}'s margin over {other} "
            f"{where} ({_how(s)})."
        )
    if not s.winner:
        totals = ", ".join(f"{p} {v:.3f}" for p, v in s.totals.items())
        return f"**Tie** at the chosen weights ({totals})."
    line = (
        f"**{s.winner}** wins: score {s.totals[s.winner]:.3f} vs {s.runner_up} {s.totals[s.runner_up]:.3f} "
        f"(margin {s.margin:.3f} points, {_f(s.relative_margin * 100, 1)}% of the runner-up's score"
    )
    if s.noise_assessed:
        return f"{line}; {_interval(s)}, beyond the noise: {_how(s)})."
    return f"{line}; noise not assessed: no per-request records)."


def flip_lines(c: Comparison) -> list[str]:
    lines = []
    for f in sorted(
        c.score.flips, key=lambda f: (not f.flips, abs(f.to_weight - f.weight) if f.flips else 0)
    ):
        if f.flips:
            verb = "Raising" if f.to_weight > f.weight else "Lowering"
            lines.append(
                f"- {verb} **{f.criterion}** from {f.weight:.2f} to {f.to_weight:.2f} (others rescaled in "
                f"proportion) makes **{f.new_winner}** win."
            )
        elif f.weight > 0 or c.score.winner:
            lines.append(f"- No weight of **{f.criterion}** in [0, 1] changes the winner.")
    return lines


def render_markdown(c: Comparison, plots: Mapping[str, str] | None = None) -> str:
    """The report; ``plots`` maps figure stems to paths relative to the Markdown file."""
    paths = [m.path for m in c.paths]
    out = ["# gpuplace comparison: native vs Kubeflow", ""]
    if c.plan is not None:
        out += [
            f"Plan `{c.plan.plan_id}`: {c.plan.model} on {c.plan.chosen.label}, "
            f"{c.plan.replicas} replica(s).",
            "",
        ]
    out += [verdict_line(c), ""]
    for note in c.notes:
        out += [f"> {note}", ""]
    out += ["## Metrics", "", "| metric | " + " | ".join(paths) + " |", "|---|" + "---:|" * len(paths)]
    for label, field, digits, unit, crit in _ROWS:
        cells = " | ".join(_metric_cell(c, m, field, digits, unit, crit) for m in c.paths)
        out.append(f"| {label} | {cells} |")
    out.append(
        "| serving target | " + " | ".join(m.serving_target for m in c.paths) + " |",
    )
    sources = [
        f"{m.path}: cost from {m.cost_source or '–'}, fragmentation from {m.fragmentation_source or '–'}"
        for m in c.paths
    ]
    out += ["", "Sources: " + "; ".join(sources) + ".", ""]
    penalty = f"{c.penalty_usd_per_breach:,.2f}"
    out += [f"SLA-breach cost uses a penalty of {penalty} USD per request that misses the SLO.", ""]
    if c.score.noise_assessed:
        out += [
            f"Brackets: the {c.score.confidence:.0%} bootstrap interval of a scored figure "
            f"({c.score.resamples} resamples of each path's requests, and of its runs when repeated"
            f"{': ' + runs_text(c.score) if runs_text(c.score) else ''}).",
            "",
        ]

    out += ["## Weighted score", ""]
    if c.score.noise_assessed:
        out += [
            "A criterion whose paths' intervals overlap scores as a tie (each path gets the best score).",
            "",
        ]
    out += ["| criterion | weight | normalisation | noise | " + " | ".join(paths) + " |"]
    out.append("|---|---:|---|---|" + "---:|" * len(paths))
    ordered = sorted(c.score.normalised.items(), key=lambda kv: -c.score.weights.get(kv[0], 0.0))
    for crit, by_path in ordered:
        w = c.score.weights.get(crit, 0.0)
        how = c.score.normalisation.get(crit, "")
        tie = "tie: intervals overlap" if crit in c.score.tied else ""
        cells = " | ".join(f"{by_path[p]:.3f}" for p in paths)
        out.append(
            f"| {crit} | {w:.2f} | {how} | {tie or c.score.interval_method.get(crit, '–')} | {cells} |"
        )
    out.append(
        "| **total** | 1.00 | Σ weight × score | "
        + (_interval(c.score).replace("interval", "margin interval") if c.score.noise_assessed else "–")
        + " | "
        + " | ".join(f"**{c.score.totals[p]:.3f}**" for p in paths)
        + " |"
    )
    out += ["", "### Sensitivity: which weight change flips the verdict", ""]
    out += flip_lines(c) or ["- (tie: no verdict to flip)"]
    out.append("")
    if c.roi is not None:
        r = c.roi
        out += [
            "## ROI",
            "",
            f"Adopting **{r.adopt}** instead of {r.baseline}: build cost {r.engineering_weeks:g} weeks × "
            f"{r.rate_usd_per_week:,.0f} USD/week = **{r.build_cost_usd:,.0f} USD**; SLA penalties avoided "
            f"{_f(r.saved_usd_per_quarter, 0)} USD per quarter ({r.saved_source}) → "
            f"**{_f(r.multiple, 1)}×** per quarter, payback in {_f(r.payback_weeks, 1)} weeks.",
            "",
        ]
    if plots:
        out += ["## Plots", ""]
        for name, rel in plots.items():
            out += [f"![{name}]({rel})", ""]
    out += ["Metric definitions, normalisations and the ROI arithmetic: docs/comparison.md.", ""]
    return "\n".join(out)


def render_html(
    markdown: str, images: Mapping[str, Path] | None = None, *, title: str = "gpuplace report"
) -> str:
    """One self-contained page: the Markdown rendered, each ``![name](...)`` inlined from ``images``."""
    from markdown_it import MarkdownIt

    text = markdown
    for name, path in (images or {}).items():
        uri = "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")
        text = re.sub(rf"!\[{re.escape(name)}\]\([^)]*\)", f"![{name}]({uri})", text)
    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(text)
    style = (
        "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:3px 8px}"
        "td{text-align:right}td:first-child{text-align:left}img{max-width:100%}"
        "blockquote{background:#fff8e1;margin:0;padding:.5em 1em;border-left:4px solid #f0a500}"
    )
    return (
        f"<!doctype html>\n<html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{style}</style></head><body>\n{body}</body></html>\n"
    )
