"""The closed loop on this machine (issue 11, item 6): a plan's prediction against a measurement on the
same device, through the commands a user runs.

`gpuplace profile --engine-steps` measures the local engine (`transformers serve --continuous-batching`
over `tiny`), `gpuplace plan --inventory local` predicts this machine's latency with it at a moderate
load (RATE below), `gpuplace deploy --target local` starts the engine
the plan names and `gpuplace loadtest` sends the plan's traffic and compares. The assertion is that the
predicted p50 TTFT and p50 TPOT are within 40% of the measured ones, as the load test defines the error:
(measured − predicted) / predicted. Loose, but a 2× error fails it. The figures are printed (run with -s)
and, as the report the load test wrote, kept in the test's temporary directory.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuplace.cli import main

pytestmark = pytest.mark.integration

BOUND = 0.40  # |error| at p50 (issue 11: loose, but it still catches a 2× error)
# About half of what this 2-core machine's local engine serves with tiny (docs/benchmarks/fidelity.md:
# 11-12 req/s at 128/64 tokens). Not a share of the capacity the measured steps predict: that capacity
# (~60 req/s at 128/32 here) leaves out the server's per-request work, and at half of it the prediction
# misses by 2x (docs/serving-model.md, "The closed loop").
RATE = 8.0
REQUESTS = 80
PROMPT_TOKENS, OUTPUT_TOKENS = 128, 32


def test_the_local_plans_p50_prediction_is_within_40_percent_of_the_measurement(tmp_path: Path) -> None:
    from gpuplace.catalog import model_arch_from_config, resolve_model
    from gpuplace.deploy import read_record, teardown
    from gpuplace.planner.engine import local_engine_params
    from gpuplace.planner.replica import fluid_capacity_rps
    from gpuplace.planner.steptime import measured_step_model
    from gpuplace.profiling.engine_steps import read_engine_steps

    steps_file = tmp_path / "steps.json"
    assert (
        main(["profile", "--model", "tiny", "--device", "cpu", "--engine-steps", "--out", str(steps_file)])
        == 0
    )
    steps = read_engine_steps(steps_file)
    engine = local_engine_params(model_arch_from_config("tiny", resolve_model("tiny").config))
    capacity = fluid_capacity_rps(engine, measured_step_model(steps), PROMPT_TOKENS, OUTPUT_TOKENS)
    rate = RATE

    plan = tmp_path / "plan"
    argv = ["plan", "--model", "tiny", "--inventory", "local", "--engine-steps", str(steps_file)]
    argv += ["--slo-tpot-ms", "1000", "--slo-ttft-ms", "10000", "--rate", str(rate)]
    argv += ["--prompt-tokens", str(PROMPT_TOKENS), "--output-tokens", str(OUTPUT_TOKENS), "--out", str(plan)]
    assert main(argv) == 0
    assert main(["deploy", str(plan), "--target", "local", "--out", str(tmp_path / "dep")]) == 0
    record = read_record(tmp_path / "dep" / "deployment.json")
    try:
        argv = ["loadtest", "--deployment", str(tmp_path / "dep" / "deployment.json"), "--plan", str(plan)]
        argv += ["--max-requests", str(REQUESTS), "--out", str(tmp_path / "lt"), "--quiet"]
        assert main(argv) == 0
    finally:
        teardown(target="local", record=record)

    report = json.loads((tmp_path / "lt" / "report.json").read_text())
    assert report["completed"] == REQUESTS and report["failed"] == 0
    rows = report["predicted_vs_measured"]
    print(
        f"\nclosed loop: tiny on cpu, rate {rate} req/s, {REQUESTS} requests "
        f"(the measured steps predict a capacity of {capacity:.1f} req/s)"
    )
    print(f"step: fixed {steps.fixed_s * 1e3:.2f} ms, fit RMS error {steps.rms_relative_error:.0%}")
    for key in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s"):
        r = rows[key]
        print(
            f"{key:11} predicted {r['predicted_s'] * 1e3:8.2f} ms  measured {r['measured_s'] * 1e3:8.2f} ms  "
            f"error {r['error']:+.0%}"
        )
    misses = {k: rows[k]["error"] for k in ("ttft_p50_s", "tpot_p50_s") if abs(rows[k]["error"]) > BOUND}
    assert not misses, f"p50 prediction off by more than {BOUND:.0%}: {misses} (all rows: {rows})"
