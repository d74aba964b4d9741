"""What one simulated replica reports (:func:`gpuplace.planner.engine_sim.simulate`): distributions of its
requests' latencies as vLLM's benchmark defines them, the ITL of its steps, and the record of a run that
did not keep up."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from gpuplace.types import Distribution
from gpuplace.types.engine import ServingPrediction


def distribution(values: np.ndarray) -> Distribution:
    """The finite ``values``' count, moments and numpy's linear percentiles."""
    values = values[np.isfinite(values)]
    if values.size == 0:
        return Distribution.of(())
    p50, p90, p95, p99 = np.percentile(values, (50, 90, 95, 99))
    return Distribution(
        count=int(values.size),
        mean=float(values.mean()),
        median=float(p50),
        std=float(values.std()),
        min=float(values.min()),
        max=float(values.max()),
        p50=float(p50),
        p90=float(p90),
        p95=float(p95),
        p99=float(p99),
    )


def unstable(steps: int, now: float, preemptions: int, max_running: int) -> ServingPrediction:
    """The prediction of a run stopped because its queue ran away: every latency infinite."""
    inf = Distribution(
        0, math.inf, math.inf, math.nan, math.inf, math.inf, math.inf, math.inf, math.inf, math.inf
    )
    return ServingPrediction(
        inf, inf, inf, 0.0, math.nan, max_running, 0, preemptions, steps, now, False, itl=inf
    )


def latencies(
    arrival: Sequence[float], first: Sequence[float], finish: Sequence[float], out: Sequence[int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[float, float]]:
    """TTFT, TPOT (requests of more than one output token) and e2e of the kept requests, as vLLM's
    benchmark defines them, and the window from the first kept arrival to the last kept finish."""
    arr = np.asarray(arrival, dtype=float)
    fst = np.asarray(first, dtype=float)
    fin = np.asarray(finish, dtype=float)
    outs = np.asarray(out, dtype=float)
    multi = outs > 1
    tpot = (fin[multi] - fst[multi]) / (outs[multi] - 1)
    window = (float(np.nanmin(arr)), float(np.nanmax(fin))) if arr.size else (math.inf, -math.inf)
    return fst - arr, tpot, fin - arr, window


def itl_distribution(
    ends: Sequence[float], durations: Sequence[float], weights: Sequence[float], lo: float, hi: float
) -> Distribution:
    """The ITL of the steps that ended in the kept window [lo, hi], weighted by the decodes each served."""
    return Distribution.weighted(
        (dt, w) for end, dt, w in zip(ends, durations, weights, strict=True) if lo <= end <= hi
    )
