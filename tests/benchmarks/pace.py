"""The machine's pace while a CPU fidelity cell runs, and the cell's error window by window.

A fidelity cell is predicted from a calibration taken right before it, then measured for about a
minute. On this shared two-core machine the engine's pace can change within that minute (a
diagnostic run of llama-100m's Azure cell at 27% load was 8% faster than its prediction for 100 s,
then 20–40% slower for the last 40 s; in its first 100 s the predicted p99 TTFT and TPOT were within
3% and 10% of the measured ones). One figure per cell hides that, so the benchmark also records:

* **a pace probe**: a separate process that times a fixed pure-Python loop (about 2 ms of one core)
  every 100 ms, from before the calibration to the end of the cell. Its median time over a window,
  divided by its median over the cell's calibration, is the machine's pace there as a CPU-bound
  process saw it (1 = as during the calibration; 1.3 = 30% slower). It uses about 2% of one core,
  in the calibration and the cell alike;
* **the error per window**: the cell's requests are cut into windows of ``WINDOW_S`` seconds by
  their arrival time, and per window the median of measured / predicted over its requests, for TTFT
  and TPOT, request by request (the simulation keeps each request's prediction).

The requests' measured TTFT and TPOT are stored with the cell, so ``--part resimulate`` recomputes the
windows for a changed model. Neither the windows nor the probe enter the prediction or the goal: they
say where in a cell the error arose, and whether the machine's pace moved with it.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

WINDOW_S = 10.0
PROBE_EVERY_S = 0.1
_PROBE = """
import sys, time
out = open(sys.argv[1], "w", buffering=1)
while True:
    t0 = time.perf_counter()
    s = 0
    for i in range(30000):
        s += i * i
    out.write(f"{time.time():.4f},{time.perf_counter() - t0:.6f}\\n")
    time.sleep(float(sys.argv[2]))
"""


@contextlib.contextmanager
def pace_probe(path: Path) -> Iterator[Path]:
    """Run the probe, writing ``wall time,seconds`` lines to ``path``, until the block ends."""
    path.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([sys.executable, "-c", _PROBE, str(path), str(PROBE_EVERY_S)])
    try:
        yield path
    finally:
        proc.kill()
        proc.wait()


def probe_rows(path: Path) -> list[tuple[float, float]]:
    """The probe's (wall time, seconds) samples so far (a half-written last line is skipped)."""
    rows = []
    for line in path.read_text().splitlines():
        parts = line.split(",")
        if len(parts) == 2:
            with contextlib.suppress(ValueError):
                rows.append((float(parts[0]), float(parts[1])))
    return rows


def probe_median(rows: Sequence[tuple[float, float]], start: float, end: float) -> float:
    """The probe's median time over wall times [start, end); NaN without a sample there."""
    inside = [s for t, s in rows if start <= t < end]
    return statistics.median(inside) if inside else math.nan


def measured_per_request(records: Sequence[Any], n: int) -> dict[str, list[float | None]]:
    """Each request's measured TTFT and TPOT in ms (None when it failed or has one token), by index."""
    ttft: list[float | None] = [None] * n
    tpot: list[float | None] = [None] * n
    for r in records:
        if r.success and math.isfinite(r.ttft_s):
            ttft[r.index] = round(r.ttft_s * 1e3, 3)
            if math.isfinite(r.tpot_s):
                tpot[r.index] = round(r.tpot_s * 1e3, 4)
    return {"ttft_ms": ttft, "tpot_ms": tpot}


def error_windows(
    arrivals: Sequence[float], predicted: Sequence[Any], measured: dict[str, list[float | None]]
) -> dict[str, list[float]]:
    """Per window of ``WINDOW_S`` seconds of arrival time: its start, its requests, and the median of
    measured / predicted TTFT and TPOT over them (NaN where none can be compared)."""
    count = int(max(arrivals) // WINDOW_S) + 1 if arrivals else 0
    out: dict[str, list[float]] = {"start_s": [], "requests": [], "ttft_ratio": [], "tpot_ratio": []}
    for w in range(count):
        lo, hi = w * WINDOW_S, (w + 1) * WINDOW_S
        idx = [i for i, a in enumerate(arrivals) if lo <= a < hi]
        out["start_s"].append(lo)
        out["requests"].append(len(idx))
        for metric in ("ttft", "tpot"):
            ratios = []
            for i in idx:
                meas = measured[f"{metric}_ms"][i]
                pred = getattr(predicted[i], f"{metric}_s") * 1e3
                if meas is not None and math.isfinite(pred) and pred > 0:
                    ratios.append(meas / pred)
            out[f"{metric}_ratio"].append(statistics.median(ratios) if ratios else math.nan)
    return out


def probe_windows(
    rows: Sequence[tuple[float, float]], load_start: float, starts: Sequence[float], baseline: float
) -> list[float]:
    """The probe's pace per window (its median time there / ``baseline``), windows starting at
    ``starts`` seconds after the load test began at wall time ``load_start``."""
    return [probe_median(rows, load_start + s, load_start + s + WINDOW_S) / baseline for s in starts]


def now() -> float:
    """Wall time, as the probe writes it."""
    return time.time()


def _span(values: Sequence[float]) -> str:
    finite = sorted(v for v in values if math.isfinite(v))
    if not finite:
        return "—"
    return f"{finite[0]:.2f} / {statistics.median(finite):.2f} / {finite[-1]:.2f}"


def _pearson(xs: Sequence[float], ys: Sequence[float]) -> float:
    if len(xs) < 3 or statistics.pstdev(xs) == 0 or statistics.pstdev(ys) == 0:
        return math.nan
    return statistics.correlation(xs, ys)


COLLAPSED_RATIO = 3.0  # a window whose measured TPOT is this many times the prediction has collapsed


def windows_markdown(cells: Sequence[dict[str, Any]]) -> list[str]:
    """The table of each cell's error per window and the machine's pace there, with what they say."""
    measured = [c for c in cells if "windows" in c and "probe_pace" in c["windows"]]
    if not measured:
        return []
    lines = [
        "### Where in each cell the error arose",
        "",
        f"Each cell's requests, cut into {WINDOW_S:.0f} s windows of arrival time: per window the median of "
        "measured / predicted over its requests (request by request; 1 = as predicted), and the machine's "
        "pace seen by a probe process timing a fixed loop every 100 ms (its median time in the window over "
        "its median during the cell's calibration; 1 = as fast as when the engine was calibrated). Shown: "
        "the lowest / median / highest window (tests/benchmarks/pace.py; plot: fidelity_windows.png).",
        "",
        "| model | lengths | load | windows (requests) | TTFT meas/pred | TPOT meas/pred | probe pace |",
        "|---|---|---:|---|---|---|---|",
    ]
    pairs: dict[str, tuple[list[float], list[float]]] = {"ttft": ([], []), "tpot": ([], [])}
    for c in measured:
        w = c["windows"]
        lines.append(
            f"| {c['model']} | {c['mix']} | {c['load']:.0%} | {len(w['start_s'])} ({sum(w['requests'])}) | "
            f"{_span(w['ttft_ratio'])} | {_span(w['tpot_ratio'])} | {_span(w['probe_pace'])} |"
        )
        for k, pace in enumerate(w["probe_pace"]):
            tpot = w["tpot_ratio"][k]
            if not (math.isfinite(pace) and math.isfinite(tpot)) or tpot >= COLLAPSED_RATIO:
                continue
            for metric in pairs:
                ratio = w[f"{metric}_ratio"][k]
                if math.isfinite(ratio):
                    pairs[metric][0].append(pace)
                    pairs[metric][1].append(ratio)
    corr = {m: _pearson(*pairs[m]) for m in pairs}
    paces = pairs["tpot"][0]
    lines += [
        "",
        f"Over the {len(paces)} windows that had not collapsed (measured TPOT under {COLLAPSED_RATIO:g}× the "
        f"prediction), the probe's pace ranged {_span(paces)} (lowest / median / highest) and its Pearson "
        f"correlation with the window's measured / predicted ratio was {corr['ttft']:.2f} for TTFT and "
        f"{corr['tpot']:.2f} for TPOT.",
        "",
    ]
    return lines


def plot_windows(cells: Sequence[dict[str, Any]], path: Path) -> Path | None:
    """One panel per cell: measured / predicted TTFT and TPOT per window, and the probe's pace."""
    measured = [c for c in cells if "windows" in c and "probe_pace" in c["windows"]]
    if not measured:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter

    cols = 6
    rows = -(-len(measured) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.6 * rows), sharey=True, squeeze=False)
    for ax in axes.flat[len(measured) :]:
        ax.axis("off")
    for ax, c in zip(axes.flat, measured, strict=False):
        w = c["windows"]
        x = [s + WINDOW_S / 2 for s in w["start_s"]]
        ax.axhspan(0.85, 1.15, color="0.9")
        for key, label, style in (
            ("ttft_ratio", "TTFT meas/pred", "o-"),
            ("tpot_ratio", "TPOT meas/pred", "s-"),
            ("probe_pace", "probe pace", "k--"),
        ):
            ax.plot(x, [min(max(v, 0.4), 5.0) for v in w[key]], style, ms=3, label=label)
        ax.set_yscale("log")
        ax.set_ylim(0.4, 5.0)
        ax.set_yticks([0.5, 1, 2, 4], ["0.5", "1", "2", "4"])
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_title(f"{c['model']} {c['mix'].split(' (')[0][:14]} {c['load']:.0%}", fontsize=8)
        ax.tick_params(labelsize=7)
    axes.flat[0].legend(fontsize=6, loc="upper left")
    fig.supxlabel("seconds into the cell (window centre)", fontsize=8)
    fig.supylabel("ratio (log; clipped to 0.4–5; grey: ±15%)", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
