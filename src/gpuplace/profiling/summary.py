"""Views of a profile: the table ``gpuplace profile`` prints, a Markdown summary, and its scalar metrics
(KFP's Metrics artifact and MLflow)."""

from __future__ import annotations

import math

from gpuplace.types import LatencyProfile, PointResult
from gpuplace.units import ms, to_ms

_HEADERS = (
    "batch",
    "prompt",
    "output",
    "dtype",
    "mode",
    "TTFT p50 ms",
    "TPOT p50 ms",
    "step p50 ms",
    "step p99 ms",
    "tok/s",
    "MBU",
    "peak GiB",
)


# What the columns are, printed under the table and in the Markdown (docs/profiling.md, "Output")
LEGEND = (
    "TTFT = prefill + first token at zero load (p50 of the repeats); "
    "TPOT = vLLM's (e2e − TTFT)/(output − 1), one per generation (p50 of the repeats); "
    "step = single decode steps of every repeat, pooled (p50, p99); "
    "tok/s = batch / mean step; MBU = decode memory-traffic floor / mean step"
)


def _pct(v: float) -> str:
    return "-" if math.isnan(v) else f"{v * 100:.1f}%"


def _rows(profile: LatencyProfile) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for r in profile.results:
        p = r.point
        head = (str(p.batch_size), str(p.prompt_tokens), str(p.output_tokens), p.dtype, p.mode)
        if not r.ok:
            rows.append((*head, "FAILED", r.error[:60], "", "", "", "", ""))
            continue
        rows.append(
            (
                *head,
                ms(r.prefill.median, 2),
                ms(r.tpot.median, 2),
                ms(r.decode_step.median, 2),
                ms(r.decode_step.p99, 2),
                "-" if math.isnan(r.decode_tokens_per_s) else f"{r.decode_tokens_per_s:.0f}",
                _pct(r.mbu),
                "-" if math.isnan(r.peak_memory_gib) else f"{r.peak_memory_gib:.2f}",
            )
        )
    return rows


def _context(profile: LatencyProfile) -> str:
    d = profile.device
    where = d.name + (f" ({d.mig_device})" if d.mig_device else "")
    return (
        f"model {profile.model.name} ({profile.model.num_params / 1e6:.1f}M params) on {d.kind}: {where}; "
        f"roofline bandwidth {profile.memory_bandwidth_gbps:.1f} GB/s ({profile.bandwidth_source})"
    )


def format_table(profile: LatencyProfile) -> str:
    rows = [_HEADERS, *_rows(profile)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(_HEADERS))]
    lines = [_context(profile)]
    for n, row in enumerate(rows):
        lines.append("  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)))
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.append(LEGEND)
    return "\n".join(lines)


def format_markdown(profile: LatencyProfile) -> str:
    lines = [
        f"# Latency profile: {profile.model.name}",
        "",
        _context(profile) + ".",
        "",
        LEGEND + " (docs/profiling.md).",
        "",
        "| " + " | ".join(_HEADERS) + " |",
        "|" + "---|" * len(_HEADERS),
    ]
    lines += ["| " + " | ".join(r) + " |" for r in _rows(profile)]
    failed = [r for r in profile.results if not r.ok]
    if failed:
        lines += ["", f"{len(failed)} point(s) failed:"] + [f"- `{r.point}`: {r.error}" for r in failed]
    return "\n".join(lines) + "\n"


def point_key(r: PointResult) -> str:
    p = r.point
    return f"b{p.batch_size}_p{p.prompt_tokens}_o{p.output_tokens}_{p.dtype}_{p.mode}"


def profile_metrics(profile: LatencyProfile) -> dict[str, float]:
    """Scalar metrics for KFP's Metrics artifact and MLflow: counts, then ms and MBU per point."""
    metrics: dict[str, float] = {
        "points": float(len(profile.results)),
        "failed_points": float(sum(not r.ok for r in profile.results)),
        "memory_bandwidth_gbps": profile.memory_bandwidth_gbps,
    }
    for r in profile.ok_results:
        key = point_key(r)
        metrics[f"{key}_ttft_p50_ms"] = to_ms(r.prefill.median)
        metrics[f"{key}_tpot_p50_ms"] = to_ms(r.decode_step.median)
        metrics[f"{key}_tpot_p99_ms"] = to_ms(r.decode_step.p99)
        if not math.isnan(r.mbu):
            metrics[f"{key}_mbu"] = r.mbu
    return metrics
