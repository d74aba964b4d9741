"""The profile step as the pipeline runs it: profile, then write every output file in one go.

Shared by ``gpuplace profile`` and the ``profile_latency`` component so both write the same files
and report the same metrics. Nothing is half-written: the Parquet file is written atomically and
the other files only after it.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from gpuplace.errors import InvalidInput
from gpuplace.profiling.io import save_profile, write_device_json
from gpuplace.profiling.profiler import ProfileConfig, run_profile
from gpuplace.profiling.summary import format_markdown
from gpuplace.types import LatencyProfile, PointResult


@dataclass(frozen=True, slots=True)
class ProfileOutputs:
    profile: LatencyProfile
    parquet: Path
    device_json: Path
    markdown: Path | None


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
        metrics[f"{key}_ttft_p50_ms"] = r.prefill.median * 1e3
        metrics[f"{key}_tpot_p50_ms"] = r.decode_step.median * 1e3
        metrics[f"{key}_tpot_p99_ms"] = r.decode_step.p99 * 1e3
        if not math.isnan(r.mbu):
            metrics[f"{key}_mbu"] = r.mbu
    return metrics


def run_profile_step(
    config: ProfileConfig,
    parquet: str | os.PathLike[str],
    device_json: str | os.PathLike[str],
    markdown: str | os.PathLike[str] | None = None,
    *,
    show_progress: bool = True,
) -> ProfileOutputs:
    out = Path(parquet)
    if out.suffix and out.suffix != ".parquet":
        raise InvalidInput("out", str(parquet), "must end in .parquet", "e.g. --out profile.parquet")
    profile = run_profile(config, show_progress=show_progress)
    save_profile(profile, out)
    dev = write_device_json(profile, device_json)
    md = None
    if markdown is not None:
        md = Path(markdown)
        md.parent.mkdir(parents=True, exist_ok=True)
        md.write_text(format_markdown(profile))
    return ProfileOutputs(profile=profile, parquet=out, device_json=dev, markdown=md)
