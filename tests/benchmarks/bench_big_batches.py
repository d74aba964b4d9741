"""Decode steps beyond the calibration's largest batch, and whether they change the fidelity predictions.

The CPU fidelity benchmark (bench_fidelity.py) saw ``tiny`` collapse at 44–71% of the fluid bound. Its
calibration measures decode steps of at most 16 sequences; the step model extrapolates a line beyond.
This benchmark starts ``transformers serve --continuous-batching`` with ``tiny`` (the fidelity
benchmark's engine parameters), calibrates it as the fidelity benchmark does, then measures decode
steps of 16 to 256 sequences (bursts of 128/48-token requests: each stream's token rate while all
decode, two repeats) against the model's step of the same batch at the same context.

It then adds those steps to the calibration of every recorded ``tiny`` cell of
docs/benchmarks/fidelity.json and simulates each cell again: does the prediction move, and how many
requests does the simulated engine run at once at most? The steps are added as measured / model ratios
(each cell's own model step at that batch × the ratio), so the pace of this server, which is not the
pace of the server those cells ran on, does not enter. ``--from-json`` redoes only that part, from the
steps in docs/benchmarks/big_batches.json.

Writes docs/benchmarks/big_batches.{md,json}. Run: `.venv/bin/python tests/benchmarks/bench_big_batches.py`
(~3 min; a line per batch size).
"""

from __future__ import annotations

import json
import math
import platform
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # tests.benchmarks.bench_fidelity, when run as a script
OUT = REPO / "docs" / "benchmarks"
BATCHES = (16, 32, 64, 128, 256)
PROMPT, OUTPUT, REPEATS = 128, 48, 2


def measure() -> dict[str, Any]:
    from gpuplace.loadtest.client import EndpointState
    from gpuplace.loadtest.prompts import PromptBuilder, load_tokenizer
    from gpuplace.loadtest.runner import RunOptions, run_load
    from gpuplace.planner.steptime import measured_step_model
    from gpuplace.profiling.engine_steps import _window_step_times
    from gpuplace.workload import RequestSpec
    from tests.benchmarks.bench_fidelity import CPU_MODELS, _cell_calibration, calibrate, served

    machine = platform.processor() or platform.machine()
    with served("tiny", "big-batches") as record:
        tokenizer = load_tokenizer("tiny")
        config = replace(_cell_calibration(), decode_output_tokens=CPU_MODELS["tiny"]["window"])
        profile = calibrate(record, tokenizer, config, "tiny", machine)
        print(f"calibration: {profile.describe()}", flush=True)
        model = measured_step_model(profile, traffic_factor=1.0)  # bursts against the bursts calibrated
        builder = PromptBuilder(tokenizer, api="completions", seed=1)
        state = EndpointState(record.endpoint, record.served_model_name)

        def burst(n: int, prompt: int, output: int) -> list[Any]:
            specs = [RequestSpec(i, math.nan, prompt, output) for i in range(n)]
            prompts = [builder.build(prompt) for _ in specs]
            return list(
                run_load(state, specs, prompts, RunOptions(concurrency=n, show_progress=False)).records
            )

        for n in BATCHES:  # warm-up: no batch shape is first seen while timed
            burst(n, 8, 4)
        steps: dict[int, list[tuple[float, float]]] = {n: [] for n in BATCHES}
        t0 = time.monotonic()
        for k in range(REPEATS):
            for n in BATCHES:
                steps[n].extend(_window_step_times(burst(n, PROMPT, OUTPUT)))
                done = k * len(BATCHES) + BATCHES.index(n) + 1
                eta = (time.monotonic() - t0) / done * (REPEATS * len(BATCHES) - done)
                print(f"[{done}/{REPEATS * len(BATCHES)}] {n} decodes (eta {eta:.0f} s)", flush=True)
        rows = []
        for n, windows in steps.items():
            if not windows:
                rows.append({"decodes": n, "measured_s": math.nan, "model_s": math.nan, "context": 0})
                continue
            context = round(n * (PROMPT + statistics.median(g for _, g in windows)))
            a, b = model.decode_terms(n)
            measured = statistics.median(s for s, _ in windows)
            rows.append(
                {"decodes": n, "measured_s": measured, "model_s": a + b * context, "context": context}
            )
        return {"machine": machine, "calibration": profile.to_json_dict(), "rows": rows}


def resimulate_with(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every recorded tiny cell of fidelity.json simulated from its own calibration, and again with the
    measured big-batch steps added to it as decode samples."""
    from gpuplace.planner.engine_sim import simulate
    from gpuplace.planner.steptime import measured_step_model
    from gpuplace.types.engine import EngineStepProfile, EngineStepSample
    from tests.benchmarks.bench_fidelity import cell_engine, cell_mixes, cell_specs

    cpu = json.loads((OUT / "fidelity.json").read_text())["cpu"]
    big = [r for r in rows if math.isfinite(r["measured_s"]) and r["decodes"] > 16]
    out = []
    tiny = [c for c in cpu["cells"] if c["model"] == "tiny"]
    for k, cell in enumerate(tiny, start=1):  # calibrations["tiny"][k]: the one taken before cell k
        profile = EngineStepProfile.from_json_dict(cpu["calibrations"]["tiny"][k])
        own = measured_step_model(profile, traffic_factor=1.0)
        extra = tuple(
            EngineStepSample(
                r["decodes"], 0, 0, r["context"], 0, r["measured_s"] / r["model_s"] * _decode_s(own, r)
            )
            for r in big
        )
        specs = cell_specs(cell_mixes("tiny")[cell["mix"]], cell["rate_rps"], cell["requests"])
        row = {"mix": cell["mix"], "load": cell["load"], "meas_tpot_p50_s": cell["meas_tpot_p50_s"]}
        for label, prof in (
            ("as_recorded", profile),
            ("with_big", replace(profile, samples=profile.samples + extra)),
        ):
            n = len(specs)
            pred = simulate(
                specs,
                cell_engine("tiny"),
                measured_step_model(prof, traffic_factor=1.0),
                discard_head=0,
                discard_tail=0,
                abort_backlog=n,
            )
            row[f"{label}_ttft_p50_s"] = pred.ttft.p50
            row[f"{label}_tpot_p50_s"] = pred.tpot.p50
            row[f"{label}_max_running"] = pred.max_running
        out.append(row)
    return out


def _decode_s(model: Any, row: dict[str, Any]) -> float:
    a, b = model.decode_terms(row["decodes"])
    return float(a + b * row["context"])


def markdown(data: dict[str, Any]) -> str:
    lines = [
        "# Decode steps beyond the calibration's largest batch (CPU)",
        "",
        "Produced by `.venv/bin/python tests/benchmarks/bench_big_batches.py` (tests/benchmarks/"
        "bench_big_batches.py says what it does).",
        "",
        f"Machine: {data['machine']}, 2 shared cores; `tiny` on `transformers serve --continuous-batching` "
        f"(bench_fidelity's engine parameters), bursts of {PROMPT}/{OUTPUT}-token requests, the median step "
        f"over {REPEATS} repeats; the model is the step model of a calibration of the same server taken right "
        "before (decode batches up to 16).",
        "",
        "| decodes | measured ms | model ms | measured / model | tokens/s measured |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in data["rows"]:
        m, p = r["measured_s"], r["model_s"]
        lines.append(
            f"| {r['decodes']} | {m * 1e3:.1f} | {p * 1e3:.1f} | {m / p:.2f} | {r['decodes'] / m:,.0f} |"
        )
    lines += [
        "",
        "The recorded tiny cells of docs/benchmarks/fidelity.json, simulated from their own calibration and "
        "again with the steps above (beyond 16) added to it, each as its measured / model ratio times the "
        "cell's own model step:",
        "",
        "| lengths | load | TTFT p50 ms (as recorded / with the big steps) | TPOT p50 ms | most running | "
        "TPOT p50 measured ms |",
        "|---|---:|---|---|---|---:|",
    ]
    for r in data["cells"]:
        lines.append(
            f"| {r['mix']} | {r['load']:.0%} | {r['as_recorded_ttft_p50_s'] * 1e3:.1f} / "
            f"{r['with_big_ttft_p50_s'] * 1e3:.1f} | {r['as_recorded_tpot_p50_s'] * 1e3:.2f} / "
            f"{r['with_big_tpot_p50_s'] * 1e3:.2f} | {r['as_recorded_max_running']} / "
            f"{r['with_big_max_running']} | {r['meas_tpot_p50_s'] * 1e3:.2f} |"
        )
    lines.append("")
    return "\n".join(lines)


def main() -> int:
    recorded = OUT / "big_batches.json"
    data = json.loads(recorded.read_text()) if "--from-json" in sys.argv[1:] else measure()
    data["cells"] = resimulate_with(data["rows"])
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "big_batches.json").write_text(json.dumps(data, indent=1) + "\n")
    (OUT / "big_batches.md").write_text(markdown(data))
    print(markdown(data))
    return 0 if all(math.isfinite(r["measured_s"]) for r in data["rows"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
