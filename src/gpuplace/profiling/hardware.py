"""Measured hardware ceilings for devices the catalog does not describe (the CPU, unknown GPUs).

The roofline needs a memory bandwidth and a peak FLOP/s. For catalog GPUs those are datasheet
figures; for the CPU (and a GPU missing from the catalog) they are measured here, in the same run
as the profile, so MBU compares like with like. Bandwidth is a STREAM-style copy: bytes read plus
bytes written over the best of several timed copies of a buffer far larger than the caches.
"""

from __future__ import annotations

import time

import torch

from gpuplace.profiling.timing import synchronize


def measure_copy_bandwidth_gbps(device: torch.device, size_mib: int = 256, repeats: int = 5) -> float:
    n = size_mib * 2**20 // 4
    src = torch.ones(n, dtype=torch.float32, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)  # first touch: page faults would otherwise be timed
    best = float("inf")
    for _ in range(repeats):
        synchronize(device)
        t0 = time.perf_counter()
        dst.copy_(src)
        synchronize(device)
        best = min(best, time.perf_counter() - t0)
    del src, dst
    return 2 * n * 4 / best / 1e9


def measure_matmul_tflops(
    device: torch.device, dtype: torch.dtype, size: int = 1024, repeats: int = 5
) -> float:
    a = torch.randn(size, size, device=device).to(dtype)
    b = torch.randn(size, size, device=device).to(dtype)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        synchronize(device)
        t0 = time.perf_counter()
        a @ b
        synchronize(device)
        best = min(best, time.perf_counter() - t0)
    return 2 * size**3 / best / 1e12
