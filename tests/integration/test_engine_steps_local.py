"""The engine step-time measurement against a real `transformers serve --continuous-batching` (tiny, CPU).

One short measurement: it starts the server with the engine parameters it is given, measures decode
windows, prefills, an interference run, a wake run and two closed loops through the load tester, fits
the step model and its factor under sustained traffic, and stops the server.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuplace.catalog import model_arch_from_config, resolve_model
from gpuplace.deploy.calibrate import profile_local_engine
from gpuplace.planner.engine import transformers_engine_params
from gpuplace.planner.steptime import measured_step_model
from gpuplace.profiling.engine_steps import EngineStepConfig

pytestmark = pytest.mark.integration


def test_a_live_continuous_batching_engine_is_measured_and_fitted(tmp_path: Path) -> None:
    arch = model_arch_from_config("tiny", resolve_model("tiny").config)
    engine = transformers_engine_params(arch, memory_gib=0.0, num_blocks=64)
    config = EngineStepConfig(
        decode_batches=(1, 4),
        decode_output_tokens=16,
        context_batches=(4,),
        context_prompt_tokens=256,
        prefill_tokens=(16, 64, 256),
        repeats=1,
        wake_idle_s=(0.03, 0.3),
        wake_requests=2,
        sustained_concurrency=(2, 4),
        sustained_output_tokens=8,
        sustained_requests_per_stream=2,
    )

    profile = profile_local_engine("tiny", workdir=tmp_path, config=config, engine=engine)

    # two decode windows, one at a long context, and per prefill length one TTFT and one decode-gap sample
    assert len(profile.samples) == 2 + 1 + 2 * 3
    assert sum(s.first_token for s in profile.samples) == 3
    assert {s.context_tokens // 4 > 256 for s in profile.samples if s.decode_seqs == 4} == {False, True}
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
    assert profile.fixed_s > 0  # an engine step is never free
    # closed loops at 2 and 4 streams (2 requests per stream), and the factor fitted to them, which the
    # planner's model carries
    assert [(r.concurrency, r.requests, r.output_tokens) for r in profile.sustained] == [(2, 4, 8), (4, 8, 8)]
    assert all(r.ttft_p50_s > 0 and r.tpot_p50_s > 0 and r.throughput_rps > 0 for r in profile.sustained)
    assert 0.5 < profile.sustained_scale < 3.0
    assert any(n.startswith("sustained_scale") for n in profile.notes)
    model = measured_step_model(profile)
    assert model.scale == profile.sustained_scale
    assert model.step_s(4, 4, 4, 100) > model.step_s(1, 1, 1, 25) > 0
