"""The comparison's plots, drawn with matplotlib's Agg backend (no display needed) and saved as PNG.

Five figures: latency distributions per path (ECDFs of TTFT and TPOT from the per-request records,
or the p50/p99 bars when no records were given), TPOT versus request rate (one point per load test
of a sweep, drawn only with two or more rates), fragmentation before and after placement (only when
a path held GPUs), cost versus predicted latency of every candidate the planner considered, and
``gpuplace predict``'s headroom (latency against load, with the SLO). Every series is labelled in a
legend. Each function returns a Figure (or None when it would show nothing) so the tracker can log it
with ``log_figure`` and the report can embed it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from gpuplace.types.compare import Comparison
from gpuplace.types.loadtest import LatencyReport, RequestResult
from gpuplace.types.plan import Candidate, Slo
from gpuplace.units import to_ms

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
                values = [to_ms(r.ttft_s if metric == "ttft" else r.tpot_s) for r in recs if r.success]
                xs, ys = _ecdf(values)
                ax.step(xs, ys, where="post", label=path, color=_color(path))
            ax.set_ylabel("fraction of requests ≤ x")
        else:
            for i, m in enumerate(comparison.paths):
                p50 = to_ms(getattr(m, metric).p50)
                p99 = to_ms(getattr(m, metric).p99)
                color = _color(m.path)
                ax.bar(
                    [i - 0.2], [p50], width=0.4, color=color, alpha=0.45, hatch="//", label=f"{m.path} p50"
                )
                ax.bar([i + 0.2], [p99], width=0.4, color=color, label=f"{m.path} p99")
            ax.set_xticks(range(len(comparison.paths)), [m.path for m in comparison.paths])
            ax.set_ylabel(f"{metric.upper()} (ms)")
        ax.set_xlabel(f"{metric.upper()} (ms)" if records else "")
        ax.set_title(f"{metric.upper()} per path")
        ax.legend()
    fig.tight_layout()
    return fig


def tpot_vs_rate(sweeps: Mapping[str, Sequence[LatencyReport]]) -> Figure | None:
    """TPOT p50/p99 against the request rate of each load test in a path's sweep; None unless the load
    tests ran at two or more distinct rates (one rate is no curve: the latency plot shows it)."""
    if distinct_rates(_rate(r) for reports in sweeps.values() for r in reports) < 2:
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    for path, reports in sweeps.items():
        pts = sorted((_rate(r), to_ms(r.tpot.p50), to_ms(r.tpot.p99)) for r in reports)
        rates = [p[0] for p in pts]
        ax.plot(rates, [p[2] for p in pts], "o-", color=_color(path), label=f"{path} p99")
        ax.plot(rates, [p[1] for p in pts], "o--", color=_color(path), alpha=0.6, label=f"{path} p50")
    ax.set_xlabel("request rate (req/s)")
    ax.set_ylabel("TPOT (ms)")
    ax.set_title("TPOT vs request rate")
    ax.legend()
    fig.tight_layout()
    return fig


RATE_REL_TOL = 0.01  # rates within 1% of each other are one rate (a closed loop's throughput jitters)


def distinct_rates(rates: Iterable[float], rel_tol: float = RATE_REL_TOL) -> int:
    """How many rates differ by more than ``rel_tol`` of the larger: 3.494 and 3.496 req/s are one rate (a
    grid of rounded values would split a pair that straddles a rounding boundary), 2 and 4 are two."""
    count, last = 0, -math.inf
    for rate in sorted(r for r in rates if math.isfinite(r)):
        if not math.isclose(rate, last, rel_tol=rel_tol):
            count, last = count + 1, rate
    return count


def _rate(r: LatencyReport) -> float:
    """The rate a load test was asked for (its achieved throughput when it was a closed loop)."""
    return float(r.workload.get("rate_rps") or r.workload.get("rate") or r.request_throughput_rps)


def fragmentation_bars(comparison: Comparison) -> Figure | None:
    """FGD fragmentation of the fleet before and after; None unless a path held GPUs through Kubernetes
    (served locally, nothing was placed on a GPU, so there is nothing to fragment)."""
    if not any(m.gpus > 0 for m in comparison.paths):  # NaN (no GPUs known) compares False
        return None
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
    ax.bar(labels, values, color=colors, label=labels)
    ax.legend(fontsize=8)
    ax.set_ylabel("FGD fragmentation (GPUs the task mix cannot use)")
    ax.set_ylim(0, max(values) * 1.15 or 1.0)
    ax.set_title("GPU fragmentation before/after placement")
    fig.tight_layout()
    return fig


def _candidate_point(c: Candidate) -> tuple[float, float, bool, str] | None:
    """(USD/month, predicted p99 TPOT ms, feasible, label) of a candidate; None without a prediction."""
    p = c.prediction
    if p is None or not (math.isfinite(c.cost_usd_per_month) and math.isfinite(p.tpot.p99)):
        return None
    return c.cost_usd_per_month, to_ms(p.tpot.p99), c.verdict != "rejected", c.label


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
        if not (math.isnan(m.cost_usd_per_month) or math.isnan(m.tpot.p99)):
            ax.scatter(
                [m.cost_usd_per_month],
                [to_ms(m.tpot.p99)],
                marker="*",
                s=140,
                color=_color(m.path),
                label=f"{m.path} measured",
            )
    slo = comparison.slo.tpot_p99_s
    if slo is not None:
        ax.axhline(to_ms(slo), color="grey", linestyle=":", label="SLO p99 TPOT")
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


# one point of a headroom curve: (load, p50 TTFT, p99 TTFT, p50 TPOT, p99 TPOT), seconds
CurvePoint = tuple[float, float, float, float, float]


def headroom_figure(
    title: str, slo: Slo, panels: Sequence[tuple[str, Sequence[CurvePoint], float | None]]
) -> Figure:
    """``gpuplace predict --plot``: predicted p50 (dashed) and p99 (solid) TTFT and TPOT against the load
    of each panel (the open-loop rate, the closed-loop concurrency: its label, its points and the highest
    load within the SLO), with the SLO's bounds dotted and that highest load marked."""
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2), sharey=True, squeeze=False)
    bounds = (("TTFT", 1, slo.ttft_p99_s, "#1f77b4"), ("TPOT", 3, slo.tpot_p99_s, "#ff7f0e"))
    for ax, (xlabel, points, best) in zip(axes[0], panels, strict=True):
        xs = [p[0] for p in points]
        for name, col, bound, color in bounds:
            ax.plot(xs, [to_ms(p[col]) for p in points], "--", color=color, label=f"{name} p50")
            ax.plot(xs, [to_ms(p[col + 1]) for p in points], "-o", ms=3, color=color, label=f"{name} p99")
            if bound is not None:
                ax.axhline(to_ms(bound), color=color, lw=0.8, ls=":", label=f"SLO p99 {name}")
        if best is not None:
            ax.axvline(float(best), color="#2ca02c", lw=1, label=f"highest load within the SLO ({best:.3g})")
        ax.set_xlabel(xlabel)
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left")
    axes[0][0].set_ylabel("predicted latency (ms)")
    fig.suptitle(title)
    fig.tight_layout()
    return fig
