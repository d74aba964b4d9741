"""The comparison's plots, drawn with matplotlib's Agg backend (no display needed) and saved as PNG.

Four figures: latency distributions per path (ECDFs of TTFT and TPOT from the per-request records,
or the p50/p99 bars when no records were given), TPOT versus request rate (one point per load test
of a sweep), fragmentation before and after placement, and cost versus predicted latency of every
candidate the planner considered. Each function returns a Figure (or None when its data is absent)
so the tracker can log it with ``log_figure`` and the report can embed it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from gpuplace.types.compare import Comparison
from gpuplace.types.loadtest import LatencyReport, RequestResult
from gpuplace.types.plan import Candidate

PATH_COLORS = {"native": "#1f77b4", "kubeflow": "#ff7f0e"}


def _color(path: str) -> str:
    return PATH_COLORS.get(path, "#2ca02c")


def _ecdf(values: Sequence[float]) -> tuple[list[float], list[float]]:
    xs = sorted(v for v in values if not math.isnan(v))
    n = len(xs)
    return xs, [(i + 1) / n for i in range(n)]


def latency_distributions(
    comparison: Comparison, records: Mapping[str, Sequence[RequestResult]] | None = None
) -> Figure:
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, metric in zip(axes, ("ttft", "tpot"), strict=True):
        if records:
            for path, recs in records.items():
                values = [(r.ttft_s if metric == "ttft" else r.tpot_s) * 1e3 for r in recs if r.success]
                xs, ys = _ecdf(values)
                ax.step(xs, ys, where="post", label=path, color=_color(path))
            ax.set_ylabel("fraction of requests ≤ x")
        else:
            for i, m in enumerate(comparison.paths):
                p50 = getattr(m, f"{metric}_p50_s") * 1e3
                p99 = getattr(m, f"{metric}_p99_s") * 1e3
                ax.bar([i - 0.2, i + 0.2], [p50, p99], width=0.4, color=_color(m.path), alpha=0.8)
            ax.set_xticks(range(len(comparison.paths)), [m.path for m in comparison.paths])
            ax.set_ylabel("ms (left bar p50, right bar p99)")
        ax.set_xlabel(f"{metric.upper()} (ms)" if records else "")
        ax.set_title(f"{metric.upper()} per path")
        if records:
            ax.legend()
    fig.tight_layout()
    return fig


def tpot_vs_rate(sweeps: Mapping[str, Sequence[LatencyReport]]) -> Figure | None:
    """TPOT p50/p99 against the request rate of each load test in a path's sweep."""
    if not any(sweeps.values()):
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    for path, reports in sweeps.items():
        pts = sorted(
            (float(r.workload.get("rate") or r.request_throughput_rps), r.tpot.p50 * 1e3, r.tpot.p99 * 1e3)
            for r in reports
        )
        rates = [p[0] for p in pts]
        ax.plot(rates, [p[2] for p in pts], "o-", color=_color(path), label=f"{path} p99")
        ax.plot(rates, [p[1] for p in pts], "o--", color=_color(path), alpha=0.6, label=f"{path} p50")
    ax.set_xlabel("request rate (req/s)")
    ax.set_ylabel("TPOT (ms)")
    ax.set_title("TPOT vs request rate")
    ax.legend()
    fig.tight_layout()
    return fig


def fragmentation_bars(comparison: Comparison) -> Figure | None:
    labels, values, colors = [], [], []
    plan = comparison.plan
    if plan is not None and not math.isnan(plan.fragmentation_before):
        labels.append("fleet before")
        values.append(plan.fragmentation_before)
        colors.append("#7f7f7f")
    if plan is not None and not math.isnan(plan.fragmentation_after):
        labels.append("plan after")
        values.append(plan.fragmentation_after)
        colors.append("#bcbd22")
    for m in comparison.paths:
        if not math.isnan(m.fragmentation_gpus):
            labels.append(f"{m.path} after")
            values.append(m.fragmentation_gpus)
            colors.append(_color(m.path))
    if not values:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.bar(labels, values, color=colors)
    ax.set_ylabel("FGD fragmentation (GPUs the task mix cannot use)")
    ax.set_ylim(0, max(values) * 1.15 or 1.0)
    ax.set_title("GPU fragmentation before/after placement")
    fig.tight_layout()
    return fig


def _candidate_point(c: Candidate) -> tuple[float, float, bool, str] | None:
    """(USD/month, predicted p99 TPOT ms, feasible, label) of a candidate; None without a prediction."""
    p = c.prediction
    if p is None or not (math.isfinite(c.cost_usd_per_month) and math.isfinite(p.tpot_p99_s)):
        return None
    return c.cost_usd_per_month, p.tpot_p99_s * 1e3, c.verdict != "rejected", c.label


def cost_vs_latency(comparison: Comparison) -> Figure | None:
    """Every planner candidate's monthly cost against its predicted p99 TPOT, and each path's measurement."""
    plan = comparison.plan
    points = [p for p in (_candidate_point(c) for c in (plan.candidates if plan else ())) if p]
    if not points:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    ok = [p for p in points if p[2]]
    bad = [p for p in points if not p[2]]
    ax.scatter([p[0] for p in ok], [p[1] for p in ok], color="#2ca02c", label="feasible candidates")
    if bad:
        ax.scatter([p[0] for p in bad], [p[1] for p in bad], color="#d62728", marker="x", label="rejected")
    for p in points:
        if plan is not None and p[3] == plan.chosen.label:
            ax.scatter([p[0]], [p[1]], s=160, facecolors="none", edgecolors="black", label=f"chosen: {p[3]}")
    for m in comparison.paths:
        if not (math.isnan(m.cost_usd_per_month) or math.isnan(m.tpot_p99_s)):
            ax.scatter(
                [m.cost_usd_per_month],
                [m.tpot_p99_s * 1e3],
                marker="*",
                s=140,
                color=_color(m.path),
                label=f"{m.path} measured",
            )
    slo = comparison.slo.get("tpot_p99_s", math.nan)
    if not math.isnan(slo):
        ax.axhline(slo * 1e3, color="grey", linestyle=":", label="SLO p99 TPOT")
    ax.set_xlabel("cost (USD/month)")
    ax.set_ylabel("p99 TPOT (ms)")
    ax.set_title("Cost vs latency of the candidates")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def comparison_figures(
    comparison: Comparison,
    records: Mapping[str, Sequence[RequestResult]] | None = None,
    sweeps: Mapping[str, Sequence[LatencyReport]] | None = None,
) -> dict[str, Figure]:
    """The report's figures by file stem; figures whose data is missing are left out."""
    figs: dict[str, Figure | None] = {
        "latency_distributions": latency_distributions(comparison, records),
        "tpot_vs_rate": tpot_vs_rate(sweeps) if sweeps else None,
        "fragmentation": fragmentation_bars(comparison),
        "cost_vs_latency": cost_vs_latency(comparison),
    }
    return {k: v for k, v in figs.items() if v is not None}


def save_figures(figures: Mapping[str, Figure], out_dir: str | Path) -> dict[str, Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, fig in figures.items():
        paths[name] = out / f"{name}.png"
        fig.savefig(paths[name], dpi=100)
    return paths


def close_figures(figures: Mapping[str, Figure]) -> None:
    for fig in figures.values():
        plt.close(fig)
