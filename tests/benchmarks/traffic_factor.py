"""How the CPU traffic factor (``CPU_TRAFFIC_FACTOR`` in planner/steptime.py) was chosen, and how it holds.

Every CPU fidelity run keeps each cell's calibration beside its measurement (docs/benchmarks/
fidelity.json), so a factor on the measured steps can be scored against recorded runs without
measuring again: each cell is simulated from its own calibration with the steps and the work per
arriving request multiplied by k, and the figures within goal (±15% at p50, ±25% at p99; 48 per run)
are counted. The runs the factor was chosen on are read from the commits that recorded them (``git
show``; a fresh clone has them); the run in docs/benchmarks/fidelity.json, when it is none of those,
was measured after the choice and is the prospective check.

Writes docs/benchmarks/traffic_factor.{md,json}. Run: `.venv/bin/python tests/benchmarks/bench_fidelity.py
--part factor` (about a minute: 12 cells x 6 factors per run).
"""

from __future__ import annotations

import json
import math
import subprocess
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "docs" / "benchmarks"
# (commit whose docs/benchmarks/fidelity.json holds the run, what the run was)
CHOSEN_ON: tuple[tuple[str, str], ...] = (
    ("328cc0f", "CPU run with the wake of an idle engine (2026-12-01)"),
    ("8538c5e", "CPU run sized with the closed-loop factor, re-simulated without it (2026-12-01)"),
    ("46aa3d8", "first CPU run with the pace probe (2026-12-01)"),
)
FACTORS: tuple[float, ...] = (1.0, 1.1, 1.15, 1.2, 1.25, 1.3)


def recorded_run(commit: str) -> dict[str, Any]:
    """The CPU part of docs/benchmarks/fidelity.json as ``commit`` recorded it."""
    shown = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{commit}:docs/benchmarks/fidelity.json"],
        capture_output=True,
        text=True,
        check=True,
    )
    return dict(json.loads(shown.stdout)["cpu"])


def score(cpu: dict[str, Any], factor: float) -> int:
    """Figures of ``cpu``'s cells within goal when predicted with the steps × ``factor``."""
    from gpuplace.planner.engine_sim import simulate
    from gpuplace.planner.steptime import measured_step_model
    from tests.benchmarks.bench_fidelity import P50_GOAL, P99_GOAL, cell_engine, recorded_cells, rel

    within = 0
    for cell, profile, specs in recorded_cells(cpu):
        model = measured_step_model(profile, traffic_factor=factor)
        n = len(specs)
        pred = simulate(
            specs, cell_engine(cell["model"]), model, discard_head=0, discard_tail=0, abort_backlog=n
        )
        for metric in ("ttft", "tpot"):
            for q, goal in (("p50", P50_GOAL), ("p99", P99_GOAL)):
                err = rel(getattr(getattr(pred, metric), q), cell[f"meas_{metric}_{q}_s"])
                within += math.isfinite(err) and abs(err) <= goal
    return within


def run() -> dict[str, Any]:
    from gpuplace.planner.steptime import CPU_TRAFFIC_FACTOR

    runs = [(commit, what, recorded_run(commit)) for commit, what in CHOSEN_ON]
    current = json.loads((OUT / "fidelity.json").read_text()).get("cpu")
    known = {json.dumps(r["calibrations"], sort_keys=True) for _, _, r in runs}
    prospective = current and json.dumps(current["calibrations"], sort_keys=True) not in known
    if prospective:
        runs.append(
            ("fidelity.json", "measured after the factor was chosen (docs/benchmarks/fidelity.json)", current)
        )
    factors = sorted(set(FACTORS) | {CPU_TRAFFIC_FACTOR})  # the shipped one is always scored
    t0 = time.monotonic()
    table: dict[str, dict[str, int]] = {}
    for k, (label, _, cpu) in enumerate(runs):
        table[label] = {f"{f:g}": score(cpu, f) for f in factors}
        eta = (time.monotonic() - t0) / (k + 1) * (len(runs) - k - 1)
        print(f"[{k + 1}/{len(runs)}] {label}: {table[label]} (eta {eta:.0f} s)", flush=True)
    held_out = {}
    chosen = [c for c, _ in CHOSEN_ON]
    for label in chosen:
        others = [o for o in chosen if o != label]
        # the best factor on the other runs (ties: the smaller factor)
        best = max(factors, key=lambda f: (sum(table[o][f"{f:g}"] for o in others), -f))
        held_out[label] = {"factor": best, "within": table[label][f"{best:g}"]}
    return {
        "shipped": CPU_TRAFFIC_FACTOR,
        "factors": factors,
        "figures_per_run": 48,
        "runs": [{"label": label, "what": what} for label, what, _ in runs],
        "within_goal": table,
        "held_out": held_out,
        "prospective": "fidelity.json" if prospective else None,
    }


def markdown(data: dict[str, Any]) -> str:
    factors = [f"{f:g}" for f in data["factors"]]
    lines = [
        "# The CPU traffic factor: how it was chosen and how it holds",
        "",
        "Produced by `.venv/bin/python tests/benchmarks/bench_fidelity.py --part factor` "
        "(tests/benchmarks/traffic_factor.py says how). Each recorded CPU fidelity run (48 figures: p50 "
        "and p99 TTFT and TPOT of 12 cells) predicted again from each cell's own calibration with the "
        "steps and the work per arriving request × k; the figures within goal (±15% at p50, ±25% at "
        f"p99) are counted. Shipped: k = {data['shipped']:g} (`CPU_TRAFFIC_FACTOR`, CPU profiles only).",
        "",
        "| run | what | " + " | ".join(f"k = {f}" for f in factors) + " |",
        "|---|---|" + "---:|" * len(factors),
    ]
    for r in data["runs"]:
        row = data["within_goal"][r["label"]]
        lines.append(f"| {r['label']} | {r['what']} | " + " | ".join(str(row[f]) for f in factors) + " |")
    chosen = [r["label"] for r in data["runs"] if r["label"] in data["held_out"]]
    totals = {f: sum(data["within_goal"][label][f] for label in chosen) for f in factors}
    lines += [
        "| all runs the factor was chosen on | | " + " | ".join(str(totals[f]) for f in factors) + " |",
        "",
        "Held out: each run scored with the factor that is best on the other runs it was chosen on "
        "(ties to the smaller): "
        + "; ".join(
            f"{label}: k = {h['factor']:g}, {h['within']} of 48 (as measured: "
            f"{data['within_goal'][label]['1']})"
            for label, h in data["held_out"].items()
        )
        + ".",
        "",
    ]
    if data["prospective"]:
        row = data["within_goal"][data["prospective"]]
        shipped = f"{data['shipped']:g}"
        lines += [
            f"Prospective: the run in fidelity.json was measured after k = {shipped} was chosen "
            f"and shipped; with it {row[shipped]} of 48 figures are within goal, as measured "
            f"(k = 1) {row['1']} of 48.",
            "",
        ]
    return "\n".join(lines)


def main() -> int:
    data = run()
    (OUT / "traffic_factor.json").write_text(json.dumps(data, indent=1) + "\n")
    (OUT / "traffic_factor.md").write_text(markdown(data))
    print((OUT / "traffic_factor.md").read_text())
    return 0
