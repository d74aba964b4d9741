"""The engine step-time fit and the decode-window arithmetic, on hand-made samples and records."""

from __future__ import annotations

import math
import subprocess
import sys
from dataclasses import replace

import pytest

from gpuplace.errors import InvalidInput
from gpuplace.profiling.engine_steps import EngineStepConfig, _window_step_times, fit_step_profile
from gpuplace.types.engine import EngineStepProfile, EngineStepSample, InterferenceRun, WakeRun
from gpuplace.types.loadtest import RequestResult

TRUE = {
    "fixed_s": 0.004,
    "per_token_s": 2e-5,
    "per_seq_s": 3e-4,
    "per_context_token_s": 1e-7,
    "per_pair_s": 2e-9,
    "request_overhead_s": 0.006,
}


def _sample(decode: int, prefill: int, ctx: int, first: bool = False) -> EngineStepSample:
    pairs = prefill * (prefill + 1) // 2
    seqs = decode + (1 if prefill else 0)
    t = (
        TRUE["fixed_s"]
        + TRUE["per_token_s"] * (decode + prefill)
        + TRUE["per_seq_s"] * seqs
        + TRUE["per_context_token_s"] * ctx
        + TRUE["per_pair_s"] * pairs
        + (TRUE["request_overhead_s"] if first else 0.0)
    )
    return EngineStepSample(decode, prefill, 1 if prefill else 0, ctx, pairs, t, first)


def test_the_fit_recovers_the_coefficients_of_noise_free_samples() -> None:
    samples = [_sample(n, 0, n * 60) for n in (1, 2, 4, 8, 16, 32)]
    samples += [_sample(0, c, 0, first=True) for c in (16, 64, 256, 512, 1024)]
    samples += [_sample(1, 0, c) for c in (16, 256, 1024)]

    coef, rms = fit_step_profile(samples)

    for name, value in TRUE.items():
        assert coef[name] == pytest.approx(value, rel=1e-6, abs=1e-12), name
    assert rms < 1e-9


def test_the_fit_holds_a_negative_coefficient_at_zero() -> None:
    # step times that fall with context would need a negative per-context cost: held at 0
    samples = [_sample(n, 0, n * 60) for n in (1, 2, 4, 8)]
    samples += [_sample(0, c, 0, first=True) for c in (16, 64, 256)]
    samples += [EngineStepSample(1, 0, 0, c, 0, 0.0045 - c * 1e-6) for c in (100, 400, 800)]

    coef, _ = fit_step_profile(samples)

    assert min(coef.values()) >= 0
    assert coef["per_context_token_s"] == 0


def test_too_few_samples_are_refused() -> None:
    with pytest.raises(InvalidInput, match="at least"):
        fit_step_profile([_sample(1, 0, 10)])


def _record(start: float, chunks: list[float]) -> RequestResult:
    return RequestResult(
        index=0,
        scheduled_s=start,
        start_s=start,
        prompt_tokens=16,
        max_tokens=len(chunks),
        success=True,
        ttft_s=chunks[0],
        e2e_s=chunks[-1],
        chunk_times_s=tuple(chunks),
        output_tokens=len(chunks),
    )


def test_the_decode_window_is_where_every_stream_decodes() -> None:
    # stream A from 0.10 s every 10 ms; stream B starts 50 ms later; both 20 tokens.
    a = _record(0.0, [0.10 + 0.01 * i for i in range(20)])
    b = _record(0.05, [0.10 + 0.01 * i for i in range(20)])

    rates = _window_step_times([a, b])

    assert len(rates) == 2
    for step, _made in rates:
        assert step == pytest.approx(0.01)
    assert _window_step_times([a, _record(0.5, [0.1, 0.2])]) == []  # no common window


def test_interference_gaps_split_the_streams_gaps_by_what_else_was_in_flight() -> None:
    from gpuplace.profiling.engine_steps import interference_gaps

    # the stream: tokens every 4 ms from 10 ms, except 6 ms from 18 to 24 (a request sent at 20 ms)
    stream = _record(0.0, [0.010, 0.014, 0.018, 0.024, 0.028, 0.032, 0.036, 0.040])
    other = replace(_record(0.020, [0.010, 0.014]), index=1)  # in flight 20-34 ms

    run = interference_gaps([stream, other])
    assert run.arrival_gaps_s == pytest.approx((0.006,))
    assert run.quiet_gaps_s == pytest.approx((0.004, 0.004, 0.004))  # 10-14, 14-18, 36-40
    assert run.work_s == pytest.approx(0.002)
    assert math.isnan(InterferenceRun((), (0.004,)).work_s)
    # a request whose first token came in the same gap: that gap holds its prefill step, not only its
    # arrival, so it is neither
    quick = replace(_record(0.019, [0.004, 0.008]), index=1)  # in flight 19-27 ms, first token at 23
    assert interference_gaps([stream, quick]).arrival_gaps_s == ()


def test_a_stall_of_the_machine_is_trimmed_from_the_work() -> None:
    quiet = (0.004,) * 18 + (0.040, 0.004)
    arrival = (0.006,) * 9 + (0.090,)
    assert InterferenceRun(arrival, quiet).work_s == pytest.approx(0.002)


def test_a_profile_with_interference_runs_survives_its_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from gpuplace.profiling.engine_steps import read_engine_steps, write_engine_steps

    run = InterferenceRun((0.006, 0.007), (0.004, 0.0041, 0.0039))
    profile = EngineStepProfile("e", "cpu", "x86", "tiny", **TRUE, interference=(run,))
    assert read_engine_steps(write_engine_steps(profile, tmp_path / "s.json")).interference == (run,)


def test_wake_points_are_the_requests_sent_while_nothing_was_in_flight() -> None:
    from gpuplace.profiling.engine_steps import wake_points

    first = _record(0.0, [0.005, 0.007])  # in flight 0-7 ms: only ends the warm-up
    idle = replace(_record(0.017, [0.006, 0.008]), index=1)  # sent 10 ms after the last token
    overlap = replace(_record(0.024, [0.004, 0.006]), index=2)  # sent before the previous one ended (25 ms)
    after = replace(_record(0.130, [0.007, 0.009]), index=3)  # 100 ms after the last token (30 ms)
    idle_s, ttft_s = wake_points([after, overlap, first, idle])  # any order: sorted by when sent
    assert idle_s == pytest.approx((0.010, 0.100))
    assert ttft_s == pytest.approx((0.006, 0.007))
    assert wake_points([first]) == ((), ())


def test_the_wake_curve_is_per_idle_level_over_the_median_lone_ttft_and_never_falls() -> None:
    from gpuplace.profiling.engine_steps import wake_curve

    # two runs, lone TTFT without idle 5 and 7 ms (median 6); levels 10 ms and 100 ms, then 300 ms
    # slightly faster than 100 ms (noise): held at the 100-ms value
    a = WakeRun(0.005, (0.011, 0.101, 0.301), (0.007, 0.009, 0.0085))
    b = WakeRun(0.007, (0.009, 0.099, 0.299), (0.007, 0.009, 0.0085))
    curve = wake_curve([a, b], 3)
    assert [x for x, _ in curve] == pytest.approx([0.010, 0.100, 0.300])
    assert [y for _, y in curve] == pytest.approx([0.001, 0.003, 0.003])
    # faster than without idle time is noise too: never a negative wake
    assert wake_curve([WakeRun(0.008, (0.01,), (0.007,))], 1) == ((pytest.approx(0.01), 0.0),)
    assert wake_curve([], 4) == ()


def test_a_profile_with_wake_runs_survives_its_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from gpuplace.profiling.engine_steps import read_engine_steps, write_engine_steps

    run = WakeRun(0.005, (0.01, 0.1), (0.006, 0.008))
    profile = EngineStepProfile("e", "cpu", "x86", "tiny", **TRUE, wake=((0.01, 0.001),), wake_runs=(run,))
    back = read_engine_steps(write_engine_steps(profile, tmp_path / "s.json"))
    assert back.wake == ((0.01, 0.001),) and back.wake_runs == (run,)
    assert "an idle engine wakes in up to 1.00 ms (after 10 ms idle)" in back.describe()


def test_config_validation_names_the_field() -> None:
    with pytest.raises(InvalidInput, match="decode_batches"):
        EngineStepConfig(decode_batches=())
    with pytest.raises(InvalidInput, match="repeats"):
        EngineStepConfig(repeats=0)
    with pytest.raises(InvalidInput, match="context_batches"):
        EngineStepConfig(context_batches=(0,))
    with pytest.raises(InvalidInput, match="injected"):
        EngineStepConfig(injected_every_steps=0)
    with pytest.raises(InvalidInput, match="wake_idle_s"):
        EngineStepConfig(wake_idle_s=(0.01, 0.0))
    with pytest.raises(InvalidInput, match="wake_requests"):
        EngineStepConfig(wake_requests=-1)
    assert EngineStepConfig(context_batches=(), injected=0, wake_requests=0).context_batches == ()  # optional


def test_importing_the_profiler_parts_needs_neither_kfp_nor_mlflow_nor_aiohttp() -> None:
    code = (
        "import sys, gpuplace.profiling.engine_steps, gpuplace.profiling\n"
        "bad = [m for m in ('kfp', 'mlflow', 'aiohttp') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_not_measured_output_is_refused_by_the_planner_naming_how_to_measure(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The profile component's engine_steps output when not asked to measure: an empty file (KFP needs
    the output), which the plan step's reader refuses with the command that measures it."""
    from gpuplace.profiling.engine_steps import read_engine_steps
    from gpuplace.steps.calibrate import engine_steps_output

    out = tmp_path / "engine_steps"
    assert engine_steps_output("tiny", out, device="cpu", measure=False) is None
    assert out.read_text() == ""
    with pytest.raises(InvalidInput, match=r"holds no measured engine steps.*--engine-steps"):
        read_engine_steps(out)


def test_the_profile_describes_its_fit_in_one_line() -> None:
    profile = EngineStepProfile("e", "cpu", "x86", "tiny", **TRUE, rms_relative_error=0.06)
    line = profile.describe()
    assert line.startswith("e on x86 (tiny): step = ")
    assert f"{TRUE['fixed_s'] * 1e3:.2f} ms" in line and "fit RMS error 6% over 0 samples" in line


def test_staggered_samples_stay_out_of_the_fit_and_price_their_n_as_measured(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Decodes measured with the streams at different phases (as under arrivals) are not fitted with the
    sent-together ones; the measured excess over the fit at their n is theirs, from the smallest staggered
    n up, and the flag survives the file."""
    from gpuplace.planner.steptime import decode_excess
    from gpuplace.profiling.engine_steps import read_engine_steps, write_engine_steps

    together = [_sample(n, 0, n * 40) for n in (1, 2, 4, 8)] + [_sample(0, c, 0, True) for c in (16, 64, 256)]
    together += [_sample(1, 0, c) for c in (16, 64, 256)]
    coef, _ = fit_step_profile(together)
    slow = replace(_sample(4, 0, 4 * 500), step_s=_sample(4, 0, 4 * 500).step_s + 0.040, staggered=True)
    coef_with, _ = fit_step_profile([*together, slow])
    assert coef_with == pytest.approx(coef)  # the staggered sample moved nothing
    profile = EngineStepProfile("e", "cuda", "H200", "tiny", **coef, samples=(*together, slow))
    excess = decode_excess(profile)
    assert excess[3] == pytest.approx(0.040, abs=1e-9)  # n = 4: the staggered step's excess
    assert excess[-1] == pytest.approx(0.040, abs=1e-9)  # held beyond it, where only together-ones were
    assert excess[0] == pytest.approx(0.0, abs=1e-9)  # a lone stream is never staggered
    again = read_engine_steps(write_engine_steps(profile, tmp_path / "s.json"))
    assert again.samples == profile.samples and again.samples[-1].staggered
