"""The engine step-time measurement against a real `transformers serve --continuous-batching` (tiny, CPU).

One short measurement: it starts the server with the engine parameters it is given, measures decode
windows, prefills, an interference run and a wake run through the load tester, fits the step model and
stops the server.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from gpuplace.catalog import model_arch_from_config, resolve_model
from gpuplace.planner.engine import transformers_engine_params
from gpuplace.planner.steptime import measured_step_model
from gpuplace.profiling.engine_steps import EngineStepConfig
from gpuplace.steps.calibrate import profile_local_engine

pytestmark = [pytest.mark.integration, pytest.mark.measure]  # fits live timings: run alone (conftest.py)


def test_a_live_continuous_batching_engine_is_measured_and_fitted(tmp_path: Path) -> None:
    arch = model_arch_from_config("tiny", resolve_model("tiny").config)
    engine = transformers_engine_params(arch, memory_gib=0.0, num_blocks=64)
    config = EngineStepConfig(
        decode_batches=(1, 4),
        decode_output_tokens=16,
        context_batches=(4,),
        context_prompt_tokens=256,
        long_batches=(4,),
        long_prompt_tokens=512,
        staggered_batches=(4,),
        staggered_prompt_tokens=128,
        prefill_tokens=(16, 64, 256),
        repeats=1,
        wake_idle_s=(0.03, 0.3),
        wake_requests=2,
    )

    profile = profile_local_engine("tiny", workdir=tmp_path, config=config, engine=engine)

    # two decode windows, one at a long context, one at a longer one, one of staggered streams (issue 35),
    # and per prefill length one TTFT and one decode-gap sample
    assert len(profile.samples) == 2 + 1 + 1 + 1 + 2 * 3
    (late,) = [s for s in profile.samples if s.staggered]
    assert late.decode_seqs == 4 and late.context_tokens > 4 * 128
    assert sum(s.first_token for s in profile.samples) == 3
    together = [s for s in profile.samples if s.decode_seqs == 4 and not s.staggered]
    assert sorted(s.context_tokens // 4 > 256 for s in together) == [False, True, True]
    # one interference run: a stream's gaps with an arrival and quiet ones, and the work they give
    (run,) = profile.interference
    assert run.arrival_gaps_s and run.quiet_gaps_s
    assert profile.request_work_s == max(0.0, run.work_s)
    # one wake run: lone 16-token requests after 30 and 300 ms of idle (two each), the first one only
    # ending the warm-up; the curve has a point per level, in the order of the idle time
    (wake,) = profile.wake_runs
    assert len(wake.idle_s) == len(wake.ttft_s) >= 3  # one may have overlapped its predecessor
    assert all(i > 0 for i in wake.idle_s) and wake.hot_ttft_s > 0
    assert len(profile.wake) == 2 and profile.wake[0][0] < profile.wake[1][0]
    assert profile.device_kind == "cpu" and "--cb-num-blocks 64" in profile.engine
    # An engine step is never free. Not asserted on single coefficients: with one repeat the fit may put
    # the whole per-step cost in per_seq_s (fixed_s 0 in one CI run) or, decodes having as many tokens
    # as sequences, in per_token_s (fixed_s and per_seq_s both 0 in another); the fitted step of one
    # decode is what counts. (That no coefficient is negative is the fit's own clamp, checked in
    # tests/unit/test_engine_steps.py::test_the_fit_holds_a_negative_coefficient_at_zero.)
    assert profile.predict_s(1, 1, 25) > 0
    model = measured_step_model(profile, traffic_factor=1.0)  # the steps as measured
    assert model.step_s(4, 4, 4, 100) > model.step_s(1, 1, 1, 25) > 0
    # the measured decode steps reach the model: per decode count, the model's steps at the measured
    # contexts are the measured ones in the median (the line plus what it missed, decode_excess_s); from
    # the smallest staggered count up, the staggered ones are what it prices (streams at different phases)
    for n in (1, 4):
        decodes = [
            s
            for s in profile.samples
            if s.decode_seqs == n and not s.prefill_tokens and not s.first_token and (s.staggered or n < 4)
        ]
        a, b = model.decode_terms(n)
        misses = [a + b * s.context_tokens - s.step_s for s in decodes]
        assert abs(statistics.median(misses)) <= 0.05 * statistics.median(s.step_s for s in decodes)
