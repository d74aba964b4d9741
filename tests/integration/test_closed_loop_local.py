"""The closed loop on this machine (issue 11, item 6): a plan's prediction against a measurement on the
same device, through the commands a user runs.

`gpuplace profile --engine-steps` measures a local engine (`transformers serve --continuous-batching` over
`tiny`), `gpuplace plan --inventory local` plans with it and `gpuplace deploy --target local` starts the
engine the plan names. That engine's own step time is then measured
(:func:`gpuplace.steps.calibrate.measure_local_deployment`), the plan is made again with it at a
moderate load (RATE_SHARE below), `gpuplace loadtest` sends the plan's traffic to the same engine and
compares, and the engine's step time is measured once more.

Why the engine that serves is the one calibrated: on this shared 2-core virtual machine, separate server
processes of the same engine run at paces up to a third apart (docs/serving-model.md, "The closed loop"),
which is a property of the machine, not of the serving model this test checks. And why twice: if the
two calibrations disagree by more than DRIFT, the machine's pace changed during the load test, so the
comparison against the first calibration alone says nothing about the model. Such an attempt is planned
again with the second calibration, and the measurement is judged against the span of the two predictions
(the pace during the load test lay somewhere between the two): a measured p50 inside the span is no error,
one outside it is as far off as it is from the nearer end. An attempt whose calibrations differ by more than
MAX_DRIFT is not judged; the loop is run again, at most ATTEMPTS times, then the test fails saying so.
(Before, every drift beyond DRIFT was a retry, and a fresh-clone CI run on 2026-12-02 failed with all three
attempts disturbed, +29%, -38%, -26%, though every p50 error was within 35%: the check fails on the
machine's noise, not on the model.)

Marked ``closed_loop``; ``make test`` runs it, ``make closed-loop`` runs it alone. Marked ``measure`` too:
``make test`` runs it after the parallel phase, with nothing else running. On a CI run of 2026-12-02 it ran
beside the other pytest worker and measured p50s 42% and 44% below the predictions (its calibration and
its load test had shared the two cores with different work), a miss of the test's own making.

Since the calibration holds what the step line misses (the measured decode steps beyond it, the context
term, the work of each arriving request and the wake of an idle engine, docs/serving-model.md) its runs
here have passed (six, p50 errors −17% … +30%, and one CI run); without the wake it failed a CI run on a
faster machine on p50 TTFT (+51%) and had left ``make test`` (every run is in the table in
docs/serving-model.md, "The closed loop").

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

pytestmark = [pytest.mark.integration, pytest.mark.closed_loop, pytest.mark.measure]

BOUND = 0.40  # |error| at p50 (issue 11: loose, but it still catches a 2× error)
# The rate is this share of the local engine's capacity as the plan computes it from the steps measured
# here (planner/local.py, measured_capacity_rps): a fixed rate did not survive this machine's pace. 8 req/s
# was 16-25% of that capacity in 2026-12; on 2026-12-05 the machine ran 3x slower (a pure-Python probe:
# 12 ms where fidelity.md's runs took 3.4-4.3 ms), the capacity was 9.8 req/s and the plan refused 8 req/s
# as 81% of it. A quarter keeps the test inside the plan's load cap (half, on a CPU) at any pace.
RATE_SHARE = 0.25
REQUESTS = 80
PROMPT_TOKENS, OUTPUT_TOKENS = 128, 32
DRIFT = 0.20  # within this, the two calibrations agree: the first one's prediction is judged alone
# beyond this the attempt is not judged: with the bound, a span this wide still fails a 2x error (1.4 x 1.4)
MAX_DRIFT = 0.40
ATTEMPTS = 3
JUDGED = ("ttft_p50_s", "tpot_p50_s")


def _single_decode_s(steps_file: Path) -> float:
    """The engine's pace as measured: the median of its measured 1-decode steps (not the fitted line,
    whose intercept moves with the fit's split between terms)."""
    from gpuplace.profiling.engine_steps import read_engine_steps

    steps = read_engine_steps(steps_file).samples
    return statistics.median(s.step_s for s in steps if s.decode_seqs == 1 and s.prefill_tokens == 0)


def _calibrate(record, out: Path) -> Path:  # type: ignore[no-untyped-def]
    from gpuplace.profiling.engine_steps import write_engine_steps
    from gpuplace.steps.calibrate import measure_local_deployment

    return write_engine_steps(measure_local_deployment(record, "tiny"), out)


def _predicted_p50_s(plan_dir: Path) -> dict[str, float]:
    """The chosen shape's predicted p50 TTFT and TPOT (seconds) in the plan at ``plan_dir``."""
    from gpuplace.plandir import read_plan_dir

    prediction = read_plan_dir(plan_dir).plan.prediction
    assert prediction is not None, f"{plan_dir}: the local plan has no prediction"
    return {"ttft_p50_s": prediction.ttft.p50, "tpot_p50_s": prediction.tpot.p50}


def span_error(measured: float, predicted: tuple[float, ...]) -> float:
    """The load test's error, (measured - predicted) / predicted, against the nearer end of the span of
    ``predicted``; 0 inside the span."""
    low, high = min(predicted), max(predicted)
    if measured < low:
        return (measured - low) / low
    if measured > high:
        return (measured - high) / high
    return 0.0


def _rate(steps_file: Path) -> float:
    """RATE_SHARE of the capacity the local plan computes from the steps at ``steps_file`` (req/s, two
    decimals)."""
    from gpuplace.catalog.models import model_arch_from_config, resolve_model
    from gpuplace.planner.engine import local_engine_params
    from gpuplace.planner.local import measured_capacity_rps
    from gpuplace.profiling.engine_steps import read_engine_steps

    engine = local_engine_params(model_arch_from_config("tiny", resolve_model("tiny").config))
    capacity = measured_capacity_rps(engine, read_engine_steps(steps_file), PROMPT_TOKENS, OUTPUT_TOKENS)
    return round(RATE_SHARE * capacity, 2)


def _plan(steps_file: Path, out: Path, rate: float) -> None:
    argv = ["plan", "--model", "tiny", "--inventory", "local", "--engine-steps", str(steps_file)]
    argv += ["--slo-tpot-ms", "1000", "--slo-ttft-ms", "10000", "--rate", str(rate)]
    # each attempt's plan keeps the first profile's rate, on its own calibration: at 25% of that capacity
    # the cap is met unless the pace falls more than 3.2x (test_plan_local.py tests the cap itself)
    argv += ["--max-load-share", "0.8"]
    argv += ["--prompt-tokens", str(PROMPT_TOKENS), "--output-tokens", str(OUTPUT_TOKENS), "--out", str(out)]
    assert main(argv) == 0


def test_the_local_plans_p50_prediction_is_within_40_percent_of_the_measurement(tmp_path: Path) -> None:
    from gpuplace.deploy import read_record, teardown

    steps_file = tmp_path / "steps.json"
    argv = ["profile", "--model", "tiny", "--device", "cpu", "--engine-steps", "--out", str(steps_file)]
    assert main(argv) == 0
    rate = _rate(steps_file)
    _plan(steps_file, tmp_path / "plan", rate)
    assert main(["deploy", str(tmp_path / "plan"), "--target", "local", "--out", str(tmp_path / "dep")]) == 0
    record = read_record(tmp_path / "dep" / "deployment.json")
    disturbed: list[str] = []
    try:
        for attempt in range(ATTEMPTS):
            here = tmp_path / f"attempt{attempt}"
            before = _calibrate(record, here / "steps-before.json")
            _plan(before, here / "plan", rate)
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
            spans = {k: (v,) for k, v in _predicted_p50_s(here / "plan").items()}
            if abs(drift) <= MAX_DRIFT:
                if abs(drift) > DRIFT:
                    _plan(after, here / "plan-after", rate)
                    for k, v in _predicted_p50_s(here / "plan-after").items():
                        spans[k] += (v,)
                    print(f"judged against the span of the predictions from both calibrations: {spans}")
                break
            disturbed.append(f"attempt {attempt + 1}: the engine's pace changed by {drift:+.0%}")
        else:
            pytest.fail(
                f"the machine's pace changed by more than {MAX_DRIFT:.0%} during every load test "
                f"({'; '.join(disturbed)})"
            )
    finally:
        teardown(target="local", record=record)

    report = json.loads((here / "lt" / "report.json").read_text())
    assert report["completed"] == REQUESTS and report["failed"] == 0
    rows = report["predicted_vs_measured"]
    print(f"closed loop: tiny on cpu, {rate} req/s ({RATE_SHARE:.0%} of capacity), {REQUESTS} requests")
    for key in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s"):
        r = rows[key]
        print(
            f"{key:11} predicted {r['predicted_s'] * 1e3:8.2f} ms  measured {r['measured_s'] * 1e3:8.2f} ms  "
            f"error {r['error']:+.0%}"
        )
    errors = {k: span_error(rows[k]["measured_s"], spans[k]) for k in JUDGED}
    misses = {k: e for k, e in errors.items() if abs(e) > BOUND}
    assert not misses, f"p50 prediction off by more than {BOUND:.0%}: {misses} (spans {spans}, rows: {rows})"


@pytest.mark.parametrize(
    ("measured", "predicted", "error"),
    [
        (1.0, (1.0,), 0.0),
        (1.5, (1.0,), 0.5),
        (0.5, (1.0,), -0.5),
        (1.2, (1.0, 1.4), 0.0),
        (2.8, (1.0, 1.4), 1.0),
        (0.5, (1.4, 1.0), -0.5),
    ],
)
def test_span_error_is_the_load_tests_error_against_the_nearer_end(
    measured: float, predicted: tuple[float, ...], error: float
) -> None:
    assert span_error(measured, predicted) == pytest.approx(error)
