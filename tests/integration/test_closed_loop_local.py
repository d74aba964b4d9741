"""The closed loop on this machine (issue 11, item 6): a plan's prediction against a measurement on the
same device, through the commands a user runs.

`gpuplace profile --engine-steps` measures a local engine (`transformers serve --continuous-batching` over
`tiny`), `gpuplace plan --inventory local` plans with it and `gpuplace deploy --target local` starts the
engine the plan names. That engine's own step time is then measured
(:func:`gpuplace.deploy.calibrate.measure_local_deployment`), the plan is made again with it at a
moderate load (RATE below), `gpuplace loadtest` sends the plan's traffic to the same engine and compares,
and the engine's step time is measured once more.

Why the engine that serves is the one calibrated: on this shared 2-core virtual machine, separate server
processes of the same engine run at paces up to a third apart (docs/serving-model.md, "The closed loop"),
which is a property of the machine, not of the serving model this test checks. And why twice: if the
two calibrations disagree by more than DRIFT, the machine's pace changed during the load test, so the
comparison says nothing about the model; that attempt is reported and the loop is run again, at most
ATTEMPTS times, then the test fails saying so (it never passes on a disturbed measurement).

Marked ``closed_loop``; ``make test`` runs it, ``make closed-loop`` runs it alone. Since the calibration
holds what the step line misses (the measured decode steps beyond it, the context term, the work of each
arriving request and the wake of an idle engine, docs/serving-model.md) its runs here have passed (six,
p50 errors −17% … +30%, and one CI run); without the wake it failed a CI run on a faster machine on p50
TTFT (+51%) and had left ``make test`` (every run is in the table in docs/serving-model.md, "The closed
loop").

The assertion is that the predicted p50 TTFT and p50 TPOT are within 40% of the measured ones, as the
load test defines the error: (measured − predicted) / predicted. Loose, but a 2× error fails it. The
figures are printed (run with -s) and, as the report the load test wrote, kept in the temporary directory.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from gpuplace.cli import main

pytestmark = [pytest.mark.integration, pytest.mark.closed_loop]

BOUND = 0.40  # |error| at p50 (issue 11: loose, but it still catches a 2× error)
# About two thirds of what this 2-core machine's local engine serves with tiny (docs/benchmarks/
# fidelity.md: 11-12 req/s at 128/64 tokens). Not a share of the capacity the measured steps predict: that
# capacity (~60 req/s at 128/32 here) leaves out the server's per-request work (docs/serving-model.md).
RATE = 8.0
REQUESTS = 80
PROMPT_TOKENS, OUTPUT_TOKENS = 128, 32
DRIFT = 0.20  # the single-decode step of the two calibrations may differ by this much
ATTEMPTS = 3


def _single_decode_s(steps_file: Path) -> float:
    """The engine's pace as measured: the median of its measured 1-decode steps (not the fitted line,
    whose intercept moves with the fit's split between terms)."""
    from gpuplace.profiling.engine_steps import read_engine_steps

    steps = read_engine_steps(steps_file).samples
    return statistics.median(s.step_s for s in steps if s.decode_seqs == 1 and s.prefill_tokens == 0)


def _calibrate(record, out: Path) -> Path:  # type: ignore[no-untyped-def]
    from gpuplace.deploy.calibrate import measure_local_deployment
    from gpuplace.profiling.engine_steps import write_engine_steps

    return write_engine_steps(measure_local_deployment(record, "tiny"), out)


def _plan(steps_file: Path, out: Path) -> None:
    argv = ["plan", "--model", "tiny", "--inventory", "local", "--engine-steps", str(steps_file)]
    argv += ["--slo-tpot-ms", "1000", "--slo-ttft-ms", "10000", "--rate", str(RATE)]
    # RATE is 16-25% of tiny's capacity here; on a machine at half this pace it nears the default cap of
    # half the capacity (test_plan_local.py tests the cap), and this test checks the prediction
    argv += ["--max-load-share", "0.8"]
    argv += ["--prompt-tokens", str(PROMPT_TOKENS), "--output-tokens", str(OUTPUT_TOKENS), "--out", str(out)]
    assert main(argv) == 0


def test_the_local_plans_p50_prediction_is_within_40_percent_of_the_measurement(tmp_path: Path) -> None:
    from gpuplace.deploy import read_record, teardown

    steps_file = tmp_path / "steps.json"
    argv = ["profile", "--model", "tiny", "--device", "cpu", "--engine-steps", "--out", str(steps_file)]
    assert main(argv) == 0
    _plan(steps_file, tmp_path / "plan")
    assert main(["deploy", str(tmp_path / "plan"), "--target", "local", "--out", str(tmp_path / "dep")]) == 0
    record = read_record(tmp_path / "dep" / "deployment.json")
    disturbed: list[str] = []
    try:
        for attempt in range(ATTEMPTS):
            here = tmp_path / f"attempt{attempt}"
            before = _calibrate(record, here / "steps-before.json")
            _plan(before, here / "plan")
            argv = ["loadtest", "--deployment", str(tmp_path / "dep" / "deployment.json")]
            argv += ["--plan", str(here / "plan"), "--max-requests", str(REQUESTS), "--out", str(here / "lt")]
            assert main([*argv, "--quiet"]) == 0
            after = _calibrate(record, here / "steps-after.json")
            step_before, step_after = _single_decode_s(before), _single_decode_s(after)
            drift = step_after / step_before - 1
            print(
                f"\nattempt {attempt + 1}: single-decode step {step_before * 1e3:.2f} ms before the load "
                f"test, {step_after * 1e3:.2f} ms after ({drift:+.0%})"
            )
            if abs(drift) <= DRIFT:
                break
            disturbed.append(f"attempt {attempt + 1}: the engine's pace changed by {drift:+.0%}")
        else:
            pytest.fail(f"the machine's pace changed during every load test ({'; '.join(disturbed)})")
    finally:
        teardown(target="local", record=record)

    report = json.loads((here / "lt" / "report.json").read_text())
    assert report["completed"] == REQUESTS and report["failed"] == 0
    rows = report["predicted_vs_measured"]
    print(f"closed loop: tiny on cpu, rate {RATE} req/s, {REQUESTS} requests")
    for key in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s"):
        r = rows[key]
        print(
            f"{key:11} predicted {r['predicted_s'] * 1e3:8.2f} ms  measured {r['measured_s'] * 1e3:8.2f} ms  "
            f"error {r['error']:+.0%}"
        )
    misses = {k: rows[k]["error"] for k in ("ttft_p50_s", "tpot_p50_s") if abs(rows[k]["error"]) > BOUND}
    assert not misses, f"p50 prediction off by more than {BOUND:.0%}: {misses} (all rows: {rows})"
