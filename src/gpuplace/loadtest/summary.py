"""A load test's report for people and dashboards: a terminal table, Markdown, the predicted-vs-measured
lines, and the scalar metrics KFP and MLflow log. Milliseconds live here and only here (an edge).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from gpuplace.types.latency import PredictedVsMeasured
from gpuplace.types.loadtest import LatencyReport
from gpuplace.units import ms, to_ms


def format_table(report: LatencyReport) -> str:
    """The report as a plain-text table (milliseconds), for the terminal."""
    lines = [
        f"requests {report.requests}: {report.completed} completed, {report.failed} failed"
        + (f" ({', '.join(f'{k}={v}' for k, v in report.errors.items())})" if report.errors else "")
        + (" — INTERRUPTED, partial results" if report.interrupted else ""),
        f"duration {report.duration_s:.2f} s   peak concurrency {report.peak_concurrency}",
        f"throughput {report.request_throughput_rps:.2f} req/s"
        f"   output {report.output_throughput_tps:.1f} tok/s"
        f"   total {report.total_token_throughput_tps:.1f} tok/s",
        "",
        f"{'metric (ms)':14}{'mean':>10}{'p50':>10}{'p90':>10}{'p95':>10}{'p99':>10}{'n':>8}",
    ]
    for name in ("ttft", "tpot", "itl", "e2e", "arrival_lag"):
        d = getattr(report, name)
        lines.append(
            f"{name:14}{ms(d.mean):>10}{ms(d.p50):>10}{ms(d.p90):>10}{ms(d.p95):>10}{ms(d.p99):>10}{d.count:>8}"
        )
    if report.slo.bounded:
        lines += [
            "",
            f"SLO p99 TTFT ≤ {ms(report.slo.ttft_p99_s)} ms, p99 TPOT ≤ {ms(report.slo.tpot_p99_s)} ms: "
            f"{'met' if report.slo_met else 'MISSED'}; goodput {report.goodput_rps:.2f} req/s, "
            f"attainment {report.slo_attainment:.1%}",
        ]
    return "\n".join(lines)


def format_prediction(prediction: PredictedVsMeasured) -> str:
    return "\n".join(
        f"{key.removesuffix('_s').replace('_', ' ')}: predicted {ms(v['predicted_s'])} ms, "
        f"measured {ms(v['measured_s'])} ms ({v['error']:+.1%})"
        for key, v in prediction.rows().items()
    )


def format_markdown(
    report: LatencyReport, prediction: PredictedVsMeasured | None = None, notes: Sequence[str] = ()
) -> str:
    rows = "\n".join(
        f"| {name} | {ms(d.mean)} | {ms(d.p50)} | {ms(d.p90)} | {ms(d.p99)} | {d.count} |"
        for name, d in (
            ("TTFT", report.ttft),
            ("TPOT", report.tpot),
            ("ITL", report.itl),
            ("E2E", report.e2e),
        )
    )
    text = (
        "# Load test\n\n"
        f"{report.requests} requests, {report.completed} completed, {report.failed} failed"
        + (f" ({', '.join(f'{k}: {v}' for k, v in report.errors.items())})" if report.errors else "")
        + (" — interrupted, partial results" if report.interrupted else "")
        + f"; {report.duration_s:.2f} s; {report.request_throughput_rps:.2f} req/s; "
        f"{report.output_throughput_tps:.1f} output tok/s; peak concurrency {report.peak_concurrency}.\n\n"
        "| metric (ms) | mean | p50 | p90 | p99 | n |\n|---|---|---|---|---|---|\n" + rows + "\n"
    )
    if report.slo.bounded:
        text += (
            f"\nSLO (p99 TTFT ≤ {ms(report.slo.ttft_p99_s)} ms, "
            f"p99 TPOT ≤ {ms(report.slo.tpot_p99_s)} ms): "
            f"**{'met' if report.slo_met else 'missed'}**, goodput {report.goodput_rps:.2f} req/s, "
            f"attainment {report.slo_attainment:.1%}.\n"
        )
    if prediction is not None and prediction.rows():
        text += (
            "\nPredicted vs measured:\n\n"
            + "\n".join(f"- {line}" for line in format_prediction(prediction).splitlines())
            + "\n"
        )
    if notes:
        text += "\nNotes:\n\n" + "\n".join(f"- {n}" for n in notes) + "\n"
    return text


def report_metrics(report: LatencyReport, prediction: PredictedVsMeasured | None = None) -> dict[str, float]:
    """Scalar metrics for KFP/MLflow: latencies in ms, throughputs, counts; NaN-free."""
    out: dict[str, float] = {
        "requests": float(report.requests),
        "completed": float(report.completed),
        "failed": float(report.failed),
        "duration_s": report.duration_s,
        "request_throughput_rps": report.request_throughput_rps,
        "output_throughput_tps": report.output_throughput_tps,
        "goodput_rps": report.goodput_rps,
        "slo_attainment": report.slo_attainment,
        "peak_concurrency": float(report.peak_concurrency),
    }
    for name in ("ttft", "tpot", "itl", "e2e"):
        d = getattr(report, name)
        for stat in ("mean", "p50", "p90", "p99"):
            out[f"{name}_{stat}_ms"] = to_ms(getattr(d, stat))
    for key, v in (prediction.rows() if prediction is not None else {}).items():
        out[f"{key.removesuffix('_s')}_prediction_error"] = v["error"]
    return {k: v for k, v in out.items() if math.isfinite(v)}
