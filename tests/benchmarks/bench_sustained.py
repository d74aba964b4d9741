"""The serving model under sustained concurrency on this CPU (issue 11): is the step model low under load,
or is the capacity it predicts too high?

The CPU fidelity table (bench_fidelity.py) has predictions low, and more so as Poisson load rises, and
``tiny`` collapsing at "80% of the predicted capacity". This benchmark separates the two causes. It
starts ``transformers serve --continuous-batching`` with ``tiny`` (the fidelity benchmark's engine
parameters and calibration), measures the engine's step time once, then runs closed loops of fixed
128/64-token requests at concurrency 4, 8, 16 and 32 (ten requests per stream) and simulates exactly
those closed loops with the calibration. A closed loop never queues beyond its concurrency, so its
error is the step model's alone. It also reports the fluid capacity bound the fidelity benchmark sizes
its loads with (``fluid_capacity_rps``) against the highest throughput measured.

Writes docs/benchmarks/sustained.{md,json}. Run: `.venv/bin/python tests/benchmarks/bench_sustained.py`
(~5 min; a line per concurrency as it goes).
"""

from __future__ import annotations

import json
import math
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # tests.benchmarks.bench_fidelity, when run as a script
OUT = REPO / "docs" / "benchmarks"
CONCURRENCY = (4, 8, 16, 32)
PROMPT, OUTPUT = 128, 64
PER_STREAM = 10


def measure() -> dict[str, Any]:
    from gpuplace.loadtest.client import EndpointState
    from gpuplace.loadtest.prompts import PromptBuilder, load_tokenizer
    from gpuplace.loadtest.runner import RunOptions, run_load
    from gpuplace.planner.engine_sim import simulate
    from gpuplace.planner.replica import fluid_capacity_rps
    from gpuplace.planner.steptime import measured_step_model
    from gpuplace.workload import RequestSpec
    from tests.benchmarks.bench_fidelity import CPU_MODELS, _cell_calibration, calibrate, cell_engine, served

    setup = CPU_MODELS["tiny"]
    machine = platform.processor() or platform.machine()
    engine = cell_engine("tiny")
    with served("tiny", "sustained") as record:
        tokenizer = load_tokenizer("tiny")
        # bench_fidelity's calibration of tiny (its first, longer one, from which it sizes its loads)
        config = replace(_cell_calibration(), decode_output_tokens=setup["window"], repeats=5)
        profile = calibrate(record, tokenizer, config, "tiny", machine)
        model = measured_step_model(profile, traffic_factor=1.0)  # bursts against the bursts calibrated
        print(f"calibration: {profile.describe()}", flush=True)
        top = replace(engine, max_num_seqs=max(config.decode_batches))
        out: dict[str, Any] = {
            "machine": machine,
            "calibration": profile.to_json_dict(),
            "fluid_capacity_rps": fluid_capacity_rps(top, model, PROMPT, OUTPUT),
            "rows": [],
        }
        state = EndpointState(record.endpoint, record.served_model_name)
        builder = PromptBuilder(tokenizer, api="completions", seed=3)
        t0 = time.monotonic()
        for k, c in enumerate(CONCURRENCY):
            specs = [RequestSpec(i, math.nan, PROMPT, OUTPUT) for i in range(c * PER_STREAM)]
            prompts = [builder.build(PROMPT) for _ in specs]
            measured = run_load(state, specs, prompts, RunOptions(concurrency=c, show_progress=False)).report
            predicted = simulate(specs, engine, model, concurrency=c, discard_head=0.1, discard_tail=0.05)
            row = {
                "concurrency": c,
                "requests": len(specs),
                "failed": measured.failed,
                "meas_rps": measured.request_throughput_rps,
                "pred_rps": predicted.throughput_rps,
            }
            for metric in ("ttft", "tpot"):
                row[f"meas_{metric}_p50_s"] = getattr(measured, metric).p50
                row[f"pred_{metric}_p50_s"] = getattr(predicted, metric).p50
            out["rows"].append(row)
            elapsed = time.monotonic() - t0
            eta = elapsed / (k + 1) * (len(CONCURRENCY) - k - 1)
            print(
                f"[{k + 1}/{len(CONCURRENCY)}] concurrency {c}: {json.dumps(row)} (eta {eta:.0f} s)",
                flush=True,
            )
        return out


def markdown(data: dict[str, Any]) -> str:
    from gpuplace.types.latency import relative_error

    rows = data["rows"]
    best = max(r["meas_rps"] for r in rows)
    lines = [
        "# The serving model under sustained concurrency (CPU)",
        "",
        "Produced by `.venv/bin/python tests/benchmarks/bench_sustained.py` (tests/benchmarks/"
        "bench_sustained.py says what it does). Error = (measured − predicted) / predicted.",
        "",
        f"Machine: {data['machine']}, 2 shared cores; `tiny` on `transformers serve --continuous-batching`, "
        f"{PROMPT}/{OUTPUT} tokens, closed loops of {PER_STREAM} requests per stream, predicted by the "
        "simulator from one calibration of the same server taken right before.",
        "",
        "| concurrency | req/s pred / meas | err | TTFT p50 pred / meas ms | err | TPOT p50 pred / meas ms | err |",
        "|---:|---|---:|---|---:|---|---:|",
    ]
    for r in rows:
        line = f"| {r['concurrency']} | {r['pred_rps']:.1f} / {r['meas_rps']:.1f} | {relative_error(r['meas_rps'], r['pred_rps']):+.0%} |"
        for metric in ("ttft", "tpot"):
            p, m = r[f"pred_{metric}_p50_s"], r[f"meas_{metric}_p50_s"]
            line += f" {p * 1e3:.2f} / {m * 1e3:.2f} | {relative_error(m, p):+.0%} |"
        lines.append(line)
    fluid = data["fluid_capacity_rps"]
    lines += [
        "",
        f"Fluid capacity bound (`fluid_capacity_rps`, the fidelity benchmark's 100%): {fluid:.1f} req/s; the "
        f"highest throughput measured here: {best:.1f} req/s ({best / fluid:.0%} of the bound).",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    data = measure()
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "sustained.json").write_text(json.dumps(data, indent=1) + "\n")
    (OUT / "sustained.md").write_text(markdown(data))
    print(markdown(data))
    return 0 if all(r["failed"] == 0 for r in data["rows"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
