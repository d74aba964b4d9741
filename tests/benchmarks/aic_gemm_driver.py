"""Read GEMM latencies from NVIDIA AIConfigurator's measured tables (in its own venv, offline).

Run by ``bench_gemm_tables.py`` with ``.venv-aic/bin/python``; imports only the standard library, pandas
and ``aiconfigurator_core``'s data directory (never gpuplace). Reads a JSON job on stdin:
``{"system": "h100_sxm", "dtype": "bfloat16", "points": [[m, n, k], ...]}`` and writes
``{"framework_version": ..., "device": ..., "latency_ms": [...], "grid_m": [...]}`` on stdout: per point the
table's latency at that ``m`` (which must be a measured ``m``), log-bilinear in ``n`` and ``k`` between the
measured sizes around them, each corner scaled by the FLOPs ratio to the asked shape (beyond the widest
measured size, that size scaled; NaN below the grid or at an unmeasured ``m``).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any


def _table(system: str) -> tuple[Any, str]:
    import aiconfigurator_core
    import pandas as pd

    root = Path(aiconfigurator_core.__file__).parent / "systems" / "data" / system / "gemm" / "vllm"
    versions = sorted(p.name for p in root.iterdir() if p.is_dir())
    version = versions[-1]
    return pd.read_parquet(root / version / "gemm_perf.parquet"), version


def _bracket(grid: list[int], x: int) -> list[tuple[int, float]]:
    """The measured sizes around ``x`` and their weights, linear in log size."""
    if x in grid:
        return [(x, 1.0)]
    above = [g for g in grid if g > x]
    below = [g for g in grid if g < x]
    if not above and below:
        return [(below[-1], 1.0)]  # wider than the widest measured (an LM head): scaled by its FLOPs
    if not below:
        return []
    lo, hi = below[-1], above[0]
    w = (math.log(x) - math.log(lo)) / (math.log(hi) - math.log(lo))
    return [(lo, 1 - w), (hi, w)]


def main() -> None:
    job = json.load(sys.stdin)
    df, version = _table(job["system"])
    df = df[df["gemm_dtype"] == job["dtype"]]
    lookup = {(int(r.m), int(r.n), int(r.k)): float(r.latency) for r in df.itertuples()}
    ns = sorted({int(n) for n in df["n"].unique()})
    ks = sorted({int(k) for k in df["k"].unique()})
    out = []
    for m, n, k in job["points"]:
        total, ok = 0.0, True
        corners = [(a, wa, b, wb) for a, wa in _bracket(ns, n) for b, wb in _bracket(ks, k)]
        if not corners:
            ok = False
        for a, wa, b, wb in corners:
            lat = lookup.get((m, a, b))
            if lat is None:
                ok = False
                break
            total += wa * wb * lat * (n * k) / (a * b)
        out.append(total if ok else math.nan)
    json.dump(
        {
            "framework_version": version,
            "device": str(df["device"].iloc[0]),
            "latency_ms": out,
            "grid_m": sorted({int(m) for m in df["m"].unique()}),
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()
