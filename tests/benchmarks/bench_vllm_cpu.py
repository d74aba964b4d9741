"""vLLM 0.34's own engine-core CPU work per decode step, measured with its code on this CPU (issue 32).

The step model's engine costs (``step_floor_s`` a step and ``seq_cost_s`` a sequence,
``src/gpuplace/catalog/data/efficiency.csv``, read by :func:`fitted_costs`) are fitted to synchronous vLLM runs of mid-2024
(docs/benchmarks/step_floor.md). This measures the part of a V1 engine's CPU work that runs without a
GPU: ``tests/referee/vllm_cpu_driver.py``, in the vLLM referee venv, times vLLM's ``Scheduler.schedule()``
and ``update_from_output()`` on decode-only steps of 1 to 1,024 running requests, and the engine core's
hand-over of each step's outputs through vLLM's msgpack codec. The batches are interleaved within each
round. Per round, the cost per step is the step of one request, and the cost per sequence the
least-squares slope over the batches of at least ``FIT_FROM`` (below that a step is a handful of calls);
the rounds give their range.

Not measured here (they need a GPU or a real tokenizer): the model runner's input preparation, the
sampler, the front end's detokenising and the API server's streaming. The figures are this machine's
CPU (its model and a pure-Python pace probe are recorded beside them); a server CPU differs.

Writes docs/benchmarks/vllm_cpu.{md,json}. Run: `.venv/bin/python tests/benchmarks/bench_vllm_cpu.py`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # tests.support, when run as a script

from gpuplace.catalog.efficiency import DEFAULT_CLASS, load_efficiency_table  # noqa: E402
from gpuplace.profiling.device import _cpu_model  # noqa: E402
from tests.support import vllm_scheduler as vs  # noqa: E402

OUT = REPO / "docs" / "benchmarks"
DRIVER = REPO / "tests" / "referee" / "vllm_cpu_driver.py"
BATCHES = (1, 8, 32, 128, 256, 512, 1024)
FIT_FROM = 32


def fitted_costs() -> dict[str, float]:
    """The engine costs this measures a part of: efficiency.csv's default step floor and cost per sequence
    (fitted in docs/benchmarks/step_floor.md), as the step model reads them."""
    row = load_efficiency_table().rows[DEFAULT_CLASS]
    return {"step_s": row["step_floor_s"].value, "seq_s": row["seq_cost_s"].value}


def job(model_dir: Path, batches: tuple[int, ...], rounds: int, steps: int) -> dict[str, Any]:
    """The driver's input: vLLM 0.34's H100 defaults for the batch (8192 tokens, 1024 sequences, blocks of
    64), prompts of 128 tokens and a cache large enough that nothing is preempted."""
    return {
        "model_dir": str(model_dir),
        "batches": list(batches),
        "rounds": rounds,
        "steps": steps,
        "warmup": 3,
        "prompt_tokens": 128,
        "block_size": 64,
        "num_gpu_blocks": 40_000,
        "max_model_len": 2048,
        "max_num_batched_tokens": 8192,
        "max_num_seqs": max(batches),
    }


def run_driver(spec: dict[str, Any], python: Path | None = None) -> dict[str, Any]:
    proc = subprocess.run(
        [str(python or vs.vllm_python()), str(DRIVER)], input=json.dumps(spec), capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise RuntimeError(f"vllm_cpu_driver failed (rc {proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout)


def fit(rows: list[dict[str, Any]], pace_s: list[float] | None = None) -> dict[str, Any]:
    """Per round and part (the engine core's critical path, schedule + update; the hand-over, encode +
    decode): the cost per step is the step of one request, the cost per sequence the least-squares slope
    over the batches of at least ``FIT_FROM``; their medians and ranges over the rounds. With the rounds'
    pace probes, also the cost per sequence per second of probe (a figure another CPU can scale by its own
    probe)."""
    parts = {"scheduler": ("schedule_s", "update_s"), "handover": ("encode_s", "decode_s")}
    out: dict[str, Any] = {}
    for name, keys in parts.items():
        steps, seqs = [], []
        for r in sorted({row["round"] for row in rows}):
            mine = [(x["batch"], sum(x[k] for k in keys)) for x in rows if x["round"] == r]
            steps.append(min(mine)[1])  # the smallest batch's step
            big = [(b, t) for b, t in mine if b >= FIT_FROM]
            seqs.append(statistics.linear_regression([b for b, _ in big], [t for _, t in big]).slope)
        out[name] = {
            "per_seq_per_pace": statistics.median(q / p for q, p in zip(seqs, pace_s, strict=True))
            if pace_s
            else None,
            "per_step_s": statistics.median(steps),
            "per_step_range_s": [min(steps), max(steps)],
            "per_seq_s": statistics.median(seqs),
            "per_seq_range_s": [min(seqs), max(seqs)],
        }
    return out


def _us(s: float) -> str:
    return f"{s * 1e6:.1f}"


def render(data: dict[str, Any]) -> str:
    f = data["fit"]
    sch, ho, fitted = f["scheduler"], f["handover"], data["fitted"]
    batches = sorted({r["batch"] for r in data["rows"]})
    lines = [
        "# vLLM's own engine-core CPU work per decode step",
        "",
        f"Produced by `.venv/bin/python tests/benchmarks/bench_vllm_cpu.py` on {data['date']} "
        f"(vLLM {data['vllm_version']}, {data['rounds']} rounds of {data['steps']} timed decode steps per "
        f"batch, batches interleaved; CPU: {data['cpu']}, {data['cores']} cores; pace probe "
        f"{statistics.median(data['pace_s']) * 1e3:.2f} ms median, "
        f"{min(data['pace_s']) * 1e3:.2f}–{max(data['pace_s']) * 1e3:.2f} ms over the rounds). Method: the "
        "benchmark's docstring; the driver is tests/referee/vllm_cpu_driver.py and "
        "tests/referee/test_vllm_cpu_costs.py fails when it stops timing decode steps.",
        "",
        "## Per step and per sequence",
        "",
        f"Per step: the step of one request; per sequence: the least-squares slope over batches ≥ {FIT_FROM}. "
        "Median over rounds (range).",
        "",
        "| part | per step µs | per sequence µs |",
        "|---|---|---|",
        f"| scheduler: `schedule()` + `update_from_output()` | {_us(sch['per_step_s'])} "
        f"({_us(sch['per_step_range_s'][0])} to {_us(sch['per_step_range_s'][1])}) | {_us(sch['per_seq_s'])} "
        f"({_us(sch['per_seq_range_s'][0])} to {_us(sch['per_seq_range_s'][1])}) |",
        f"| hand-over: msgpack encode + decode of the outputs | {_us(ho['per_step_s'])} "
        f"({_us(ho['per_step_range_s'][0])} to {_us(ho['per_step_range_s'][1])}) | {_us(ho['per_seq_s'])} "
        f"({_us(ho['per_seq_range_s'][0])} to {_us(ho['per_seq_range_s'][1])}) |",
        f"| the step model's fitted engine costs (mid-2024 vLLM, docs/benchmarks/step_floor.md) "
        f"| {_us(fitted['step_s'])} | {_us(fitted['seq_s'])} |",
        "",
        "This machine's pace moves by tens of percent between runs; per round, the scheduler's cost per "
        f"sequence is {sch['per_seq_per_pace'] * 1e3:.1f} µs per millisecond of the pace probe (median over "
        "rounds), a figure another CPU can scale by the probe's time there (`tests/benchmarks/pace.py`'s "
        "loop).",
        "",
        f"The scheduler measured here is **{sch['per_seq_s'] / fitted['seq_s']:.0%}** of the fitted cost per "
        f"sequence and {sch['per_step_s'] / fitted['step_s']:.0%} of the fitted floor per step. The rest of the "
        "fitted costs is not measured: the model runner's input preparation, the sampler, detokenising and "
        "streaming, and any per-step GPU work the roofline misses.",
        "",
        "## Medians per batch (ms per step; median over rounds)",
        "",
        "| batch | schedule | update_from_output | encode | decode | scheduler µs per sequence |",
        "|---|---|---|---|---|---|",
    ]
    for b in batches:
        rows = [r for r in data["rows"] if r["batch"] == b]
        med = {
            k: statistics.median(r[k] for r in rows)
            for k in ("schedule_s", "update_s", "encode_s", "decode_s")
        }
        lines.append(
            f"| {b} | {med['schedule_s'] * 1e3:.3f} | {med['update_s'] * 1e3:.3f} | {med['encode_s'] * 1e3:.3f} "
            f"| {med['decode_s'] * 1e3:.3f} | {(med['schedule_s'] + med['update_s']) / b * 1e6:.1f} |"
        )
    lines += [
        "",
        "## What it means for the step model",
        "",
        "- vLLM V1's scheduler costs an amount per running sequence that grows mildly with the batch (the "
        "table), with vLLM's `freeze_gc_heap()` applied as its engine core does once it is built.",
        "- With asynchronous scheduling (vLLM's GPU default) this work runs while the GPU computes the step "
        "before. The step model still adds the engine's fitted CPU costs to the GPU's work instead of "
        "overlapping them: the measured scheduler is only part of those costs, and overlapping the fitted "
        "whole made the published rows more optimistic (docs/serving-model.md, async scheduling).",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = run_driver(job(vs.write_model_dir(Path(tmp)), BATCHES, args.rounds, args.steps))
    data = {
        "date": datetime.date.today().isoformat(),
        "vllm_version": result["vllm_version"],
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "rounds": args.rounds,
        "steps": args.steps,
        "pace_s": result["pace_s"],
        "rows": result["rows"],
        "fit": fit(result["rows"], result["pace_s"]),
        "fitted": fitted_costs(),
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "vllm_cpu.json").write_text(json.dumps(data, indent=1) + "\n")
    (OUT / "vllm_cpu.md").write_text(render(data))
    print(f"wrote {OUT / 'vllm_cpu.json'} and vllm_cpu.md")


if __name__ == "__main__":
    main()
