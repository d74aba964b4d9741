"""Checking a profile's achieved fractions of the rooflines: an MBU or MFU above 1 is a measurement
error (a disturbed bandwidth probe, a wrong peak), so the ceilings are measured again once and the
profile fails naming the point if it persists. Never clamped silently.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace

from gpuplace.profiling import roofline
from gpuplace.profiling.hardware import (
    MeasurementDisturbed,
)
from gpuplace.types import PointResult
from gpuplace.units import to_ms


def describe_point(result: PointResult) -> str:
    p = result.point
    head = f"b={p.batch_size} p={p.prompt_tokens} o={p.output_tokens} {p.dtype} {p.mode}: "
    if not result.ok:
        return head + result.error
    return head + (
        f"TTFT {to_ms(result.prefill.median):.1f} ms, TPOT {to_ms(result.tpot.median):.2f} ms, "
        f"step p99 {to_ms(result.decode_step.p99):.2f} ms"
    )


def _with_ceilings(r: PointResult, bandwidth_gbps: float, peak_tflops: float) -> PointResult:
    """``r`` with its floor, MBU and MFU recomputed against new ceilings."""
    if not r.ok:
        return r
    floor = roofline.memory_floor_s(r.decode_bytes_per_step, bandwidth_gbps)
    return replace(
        r,
        decode_floor_s=floor,
        mbu=roofline.utilisation(floor, r.decode_step.mean),
        mfu=roofline.utilisation(roofline.compute_floor_s(r.prefill_flops, peak_tflops), r.prefill.median),
    )


def check_fractions(
    results: list[PointResult],
    *,
    bandwidth_gbps: float,
    bandwidth_source: str,
    peaks: dict[str, float],
    remeasure: Callable[[], tuple[float, dict[str, float]]],
) -> tuple[list[PointResult], float, dict[str, float]]:
    """Refuse an MBU or MFU above 1: re-measure the ceilings once, then fail naming the point.

    A fraction above 1 means the ceiling it divides by was measured low (a probe disturbed by load)
    or the step was timed wrong. Measured ceilings are probed again (the higher figure, the less
    disturbed one, is kept) and the fractions recomputed; catalog ceilings are datasheet figures, so
    there a fraction above 1 fails at once. Never clamped.
    """

    def over(rs: list[PointResult]) -> list[PointResult]:
        return [r for r in rs if r.ok and (r.mbu > 1 or r.mfu > 1)]

    if not over(results):
        return results, bandwidth_gbps, peaks
    if bandwidth_source.startswith("measured"):
        again_bw, again_peaks = remeasure()
        bandwidth_gbps = max(bandwidth_gbps, again_bw)
        peaks = {d: max(p, again_peaks.get(d, p)) for d, p in peaks.items()}
        results = [_with_ceilings(r, bandwidth_gbps, peaks.get(r.point.dtype, math.nan)) for r in results]
    bad = over(results)
    if bad:
        r = bad[0]
        p = r.point
        raise MeasurementDisturbed(
            f"point b={p.batch_size} p={p.prompt_tokens} o={p.output_tokens} {p.dtype}: MBU {r.mbu:.2f}, "
            f"MFU {r.mfu:.2f} against {bandwidth_gbps:.1f} GB/s and {peaks.get(p.dtype, math.nan):.2f} "
            f"TFLOP/s ({bandwidth_source}); no hardware exceeds its peak, so the ceilings were measured "
            f"low (a probe disturbed by load) or the steps were timed wrong ({len(bad)} such points, "
            "after re-measuring). Re-run the profile on an idle machine"
        )
    return results, bandwidth_gbps, peaks
