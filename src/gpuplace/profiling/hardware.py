"""Measured hardware ceilings for devices the catalog does not describe (the CPU, unknown GPUs).

The roofline needs a memory bandwidth and a peak FLOP/s. For catalog GPUs those are datasheet
figures; for the CPU (and a GPU missing from the catalog) they are measured here, in the same run
as the profile, so MBU compares like with like. Bandwidth is what a decode step does with the
weights: read them. The probe times a reduction over a buffer far larger than the caches (bytes read
over the best of several timed passes) in several rounds. Load from another process only ever slows a
round, so the ceiling is the best round, and it is trusted once a second round confirms it (the two
best agree): a lone fast round is noise, and rounds that never agree mean another process kept using
the memory system. A probe disturbed by load would make every MBU too high, so it is re-measured
after a growing pause, and after a few disturbed attempts it fails (:class:`MeasurementDisturbed`)
rather than return a number that is wrong. On the CPU (:func:`read_bandwidth`) a disturbed probe is not
fatal: a CPU's roofline fractions calibrate nothing (the local plan uses the engine's measured steps), and on
a busy 2-core machine the probe was refused in the main job of a CI run (2026-12-05). There the best round
of every attempt is used and its source says so; a fraction above 1 is still refused
(profiling/fractions.py).
"""

from __future__ import annotations

import sys
import time

import torch

from gpuplace.errors import GpuplaceError
from gpuplace.profiling.timing import synchronize


class MeasurementDisturbed(GpuplaceError):
    """A hardware probe or a roofline fraction that the machine's load made unreliable."""


class BandwidthDisturbed(MeasurementDisturbed):
    """The bandwidth probe's rounds never agreed; ``best_gbps`` is its best round over every attempt."""

    def __init__(self, message: str, best_gbps: float) -> None:
        super().__init__(message)
        self.best_gbps = best_gbps


def _best_read_s(src: torch.Tensor, device: torch.device, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        synchronize(device)
        t0 = time.perf_counter()
        src.sum()
        synchronize(device)
        best = min(best, time.perf_counter() - t0)
    return best


def measure_read_bandwidth_gbps(
    device: torch.device,
    size_mib: int = 256,
    repeats: int = 5,
    rounds: int = 5,
    tolerance: float = 0.15,
    attempts: int = 4,
) -> float:
    """Memory read bandwidth (GB/s): the best of ``rounds`` rounds of ``repeats`` timed reductions.

    Accepted when the two best rounds agree within ``tolerance`` (relative to the best); otherwise
    measured again after a pause that doubles each time, up to ``attempts`` times, then
    :class:`MeasurementDisturbed`.
    """
    n = size_mib * 2**20 // 4
    src = torch.ones(n, dtype=torch.float32, device=device)
    src.sum()  # first touch: page faults would otherwise be timed
    figures: list[float] = []
    best = 0.0
    try:
        for attempt in range(attempts):
            figures = sorted(
                (n * 4 / _best_read_s(src, device, repeats) / 1e9 for _ in range(rounds)), reverse=True
            )
            best = max(best, figures[0])
            if (figures[0] - figures[1]) / figures[0] <= tolerance:
                return figures[0]
            if attempt + 1 < attempts:
                time.sleep(0.5 * 2**attempt)
    finally:
        del src
    shown = ", ".join(f"{f:.1f}" for f in figures)
    raise BandwidthDisturbed(
        f"memory bandwidth probe on {device}: its rounds gave {shown} GB/s, the two best more than "
        f"{tolerance:.0%} apart, in each of {attempts} attempts: another process is using the memory "
        "system, and a bandwidth measured low would make every MBU too high. Re-run the profile on an "
        "idle machine",
        best,
    )


def read_bandwidth(device: torch.device) -> tuple[float, str]:
    """The measured read bandwidth (GB/s) and its source: ``measured``, or on a CPU whose probe stayed
    disturbed, the best round of every attempt as ``measured (disturbed: best round)``, with a note on
    stderr. Elsewhere a disturbed probe raises :class:`BandwidthDisturbed`."""
    try:
        return measure_read_bandwidth_gbps(device), "measured"
    except BandwidthDisturbed as e:
        if device.type != "cpu":
            raise
        print(
            f"note: {e}; on a CPU, where the fractions calibrate nothing, the best round "
            f"({e.best_gbps:.1f} GB/s) is used and the MBU may read high",
            file=sys.stderr,
        )
        return e.best_gbps, "measured (disturbed: best round)"


def measure_matmul_tflops(
    device: torch.device, dtype: torch.dtype, size: int = 1024, repeats: int = 5, rounds: int = 3
) -> float:
    """Peak matmul throughput (TFLOP/s): the best of ``rounds`` bursts of ``repeats`` timed products,
    the bursts a short pause apart, so that a burst of load from another process (which only slows a
    product) does not set the ceiling every MFU divides by."""
    a = torch.randn(size, size, device=device).to(dtype)
    b = torch.randn(size, size, device=device).to(dtype)
    a @ b
    best = float("inf")
    for burst in range(rounds):
        if burst:
            time.sleep(0.2)
        for _ in range(repeats):
            synchronize(device)
            t0 = time.perf_counter()
            a @ b
            synchronize(device)
            best = min(best, time.perf_counter() - t0)
    return 2 * size**3 / best / 1e12
