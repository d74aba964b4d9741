"""The step time under sustained traffic: closed loops measured in the calibration, replayed by the
serving model, and the one factor on the step time fitted to them (gpuplace.planner.sustained)."""

from __future__ import annotations

import math
import statistics
from dataclasses import replace

import pytest

from gpuplace.errors import InvalidInput
from gpuplace.planner.engine_sim import simulate
from gpuplace.planner.steptime import StepTimeModel, measured_step_model
from gpuplace.planner.sustained import fit_sustained_scale, loop_misfit, simulate_loops, with_sustained
from gpuplace.profiling.engine_steps import EngineStepConfig, read_engine_steps, sustained_run
from gpuplace.profiling.engine_steps import write_engine_steps as write
from gpuplace.types.engine import EngineParams, EngineStepProfile, SustainedRun
from gpuplace.types.loadtest import RequestResult
from gpuplace.workload import RequestSpec

PROFILE = EngineStepProfile(
    engine="transformers serve",
    device_kind="cpu",
    device_name="x86_64",
    model="tiny",
    fixed_s=2e-3,
    per_token_s=2e-5,
    per_seq_s=1e-4,
    per_context_token_s=1.5e-6,
    request_overhead_s=1e-3,
    request_work_s=1e-3,
    wake=((0.01, 1e-3), (0.3, 3e-3)),
)
MODEL = measured_step_model(PROFILE)  # no closed loops: scale 1
SHAPES = [SustainedRun(c, 64, 32, 3 * c, math.nan, math.nan, math.nan) for c in (4, 8)]


def _measured_as(model: StepTimeModel) -> list[SustainedRun]:
    """The loops as ``model`` would have them measured (the simulator stands in for the server)."""
    return [
        replace(run, ttft_p50_s=t, tpot_p50_s=p)
        for run, (t, p) in zip(SHAPES, simulate_loops(model, SHAPES), strict=True)
    ]


def _engine() -> EngineParams:
    return EngineParams(
        max_num_batched_tokens=8192,
        max_num_seqs=8,
        block_size=16,
        gpu_memory_utilization=0.9,
        max_model_len=512,
        enable_chunked_prefill=True,
        num_gpu_blocks=1024,
    )


def test_the_scale_multiplies_every_step_term_but_not_the_request_overheads() -> None:
    scaled = replace(MODEL, scale=1.5, decode_excess_s=(1e-3,))
    plain = replace(MODEL, decode_excess_s=(1e-3,))
    assert scaled.step_s(130, 5, 5, 700, 900, decodes=4) == pytest.approx(
        1.5 * plain.step_s(130, 5, 5, 700, 900, decodes=4)
    )
    a, b = scaled.decode_terms(3)
    assert (a, b) == pytest.approx((1.5 * plain.decode_terms(3)[0], 1.5 * MODEL.kv_s_per_token))
    assert scaled.wake_s(0.3) == plain.wake_s(0.3) == 3e-3
    assert scaled.request_overhead_s == plain.request_overhead_s


def test_the_simulator_runs_a_scaled_engine_that_much_slower() -> None:
    """Hand-worked: an engine of fixed 4 ms steps, one 10-token request alone: first token after one
    step (the prompt), then 9 decode steps; at scale 2 every step is 8 ms. The decode span the
    simulator jumps over in closed form is scaled too (its context term)."""
    model = StepTimeModel(fixed_s=4e-3, kv_s_per_token=1e-5)
    one = [RequestSpec(0, 0.0, 8, 10)]
    base = simulate(one, _engine(), model, discard_head=0.0, discard_tail=0.0)
    double = simulate(one, _engine(), replace(model, scale=2.0), discard_head=0.0, discard_tail=0.0)
    assert base.ttft.p50 == pytest.approx(4e-3)
    assert double.ttft.p50 == pytest.approx(8e-3)
    assert double.tpot.p50 == pytest.approx(2 * base.tpot.p50)
    assert base.tpot.p50 > 4e-3  # the context term is in it


@pytest.mark.parametrize("true_scale", [0.8, 1.0, 1.3, 2.2])
def test_the_fit_recovers_the_scale_the_loops_ran_at(true_scale: float) -> None:
    runs = _measured_as(replace(MODEL, scale=true_scale))
    assert fit_sustained_scale(MODEL, runs) == pytest.approx(true_scale, rel=0.005)


def test_the_fit_starts_from_the_unscaled_model() -> None:
    """A model that already carries a scale is fitted from scale 1, not on top of its own."""
    runs = _measured_as(replace(MODEL, scale=1.3))
    assert fit_sustained_scale(replace(MODEL, scale=1.3), runs) == pytest.approx(1.3, rel=0.005)


def test_the_fit_matches_the_loops_tpot_and_ignores_their_ttft() -> None:
    """TPOT measured 10% above the model at both concurrencies: the factor is the one at which the
    simulated TPOT matches, and no other factor fits better; TTFT 40% above changes nothing."""
    base = _measured_as(MODEL)
    runs = [replace(r, tpot_p50_s=r.tpot_p50_s * 1.1) for r in base]
    k = fit_sustained_scale(MODEL, runs)
    assert k == pytest.approx(1.1, abs=0.01)
    for run, (_, tpot) in zip(runs, simulate_loops(replace(MODEL, scale=k), runs), strict=True):
        assert tpot == pytest.approx(run.tpot_p50_s, rel=0.01)
    best = loop_misfit(replace(MODEL, scale=k), runs)
    assert best < loop_misfit(replace(MODEL, scale=k * 1.02), runs)
    assert best < loop_misfit(replace(MODEL, scale=k / 1.02), runs)
    slow_ttft = [replace(r, ttft_p50_s=r.ttft_p50_s * 1.4) for r in runs]
    assert fit_sustained_scale(MODEL, slow_ttft) == pytest.approx(k)


def test_the_fit_refuses_runs_that_measured_nothing() -> None:
    with pytest.raises(InvalidInput, match="sustained"):
        fit_sustained_scale(MODEL, [])
    with pytest.raises(InvalidInput, match=r"4 streams.*finite positive median TPOT"):
        fit_sustained_scale(MODEL, [SHAPES[0]])


def _loop_records(start: float, ttfts: list[float], e2es: list[float]) -> list[RequestResult]:
    return [
        RequestResult(
            index=i,
            scheduled_s=start,
            start_s=start + 0.01 * i,
            prompt_tokens=64,
            max_tokens=5,
            success=True,
            ttft_s=t,
            e2e_s=e,
            chunk_times_s=(t, e),
            output_tokens=5,
        )
        for i, (t, e) in enumerate(zip(ttfts, e2es, strict=True))
    ]


def test_a_sustained_run_is_the_median_over_all_repeats_loops_and_their_throughput() -> None:
    """Two repeats of a loop of 2 streams × 1 request: TPOT = (e2e − TTFT) / 4. Throughput: 4 requests
    over the two loops' spans (0.0–0.21 s and 0.0–0.13 s). A failed request counts in neither."""
    config = EngineStepConfig(
        sustained_concurrency=(2,), sustained_requests_per_stream=1, sustained_output_tokens=5
    )
    first = _loop_records(0.0, [0.02, 0.04], [0.10, 0.20])
    second = _loop_records(0.0, [0.03, 0.05], [0.13, 0.11])
    failed = replace(second[1], success=False, ttft_s=math.nan, e2e_s=math.nan)
    run = sustained_run(2, config, first + second)
    assert run.ttft_p50_s == pytest.approx(0.035)
    assert run.tpot_p50_s == pytest.approx(statistics.median([0.02, 0.04, 0.025, 0.015]))
    assert run.throughput_rps == pytest.approx(4 / (0.21 + 0.13))
    assert (run.concurrency, run.prompt_tokens, run.output_tokens, run.requests) == (2, 64, 5, 2)
    partial = sustained_run(2, config, [*first, second[0], failed])
    assert partial.ttft_p50_s == pytest.approx(0.03)
    nothing = sustained_run(2, config, [failed, failed])
    assert math.isnan(nothing.ttft_p50_s) and math.isnan(nothing.throughput_rps)


def test_with_sustained_fits_the_profiles_own_model_and_the_planner_uses_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    profile = PROFILE
    runs = _measured_as(replace(measured_step_model(profile), scale=1.25))
    measured = replace(profile, sustained=tuple(runs))
    assert math.isnan(measured.sustained_scale)  # as measure_engine_steps returns it
    assert "closed loops at 4/8 streams measured (their step factor not fitted yet)" in measured.describe()
    fitted = with_sustained(measured)
    assert fitted.sustained_scale == pytest.approx(1.25, rel=0.005)
    assert fitted.sustained == tuple(runs)
    assert any(n.startswith("sustained_scale 1.25") for n in fitted.notes)
    assert "steps ×1.25 under sustained traffic (4/8 streams)" in fitted.describe()
    assert measured_step_model(fitted).scale == fitted.sustained_scale
    # a profile with the runs but no factor is fitted by the planner itself
    assert measured_step_model(measured).scale == fitted.sustained_scale
    back = read_engine_steps(write(fitted, tmp_path / "steps.json"))
    assert back == fitted
    assert read_engine_steps(write(measured, tmp_path / "unfitted.json")).sustained == tuple(runs)
    # no runs (an older profile, or a calibration without loops): no factor
    assert with_sustained(profile) == profile
    assert measured_step_model(read_engine_steps(write(profile, tmp_path / "plain.json"))).scale == 1.0


def test_a_loop_in_which_nothing_succeeded_is_named_and_left_out_of_the_fit() -> None:
    profile = PROFILE
    good = _measured_as(replace(measured_step_model(profile), scale=1.25))
    fitted = with_sustained(replace(profile, sustained=(good[0], SHAPES[1])))
    assert fitted.sustained_scale == pytest.approx(1.25, rel=0.005)
    assert any("no request succeeded in the loops at 8 streams" in n for n in fitted.notes)
    nothing = with_sustained(replace(profile, sustained=tuple(SHAPES)))
    assert nothing.sustained_scale == 1.0 and len(nothing.sustained) == 2
    assert any("no request succeeded in the loops at 4, 8 streams" in n for n in nothing.notes)


def test_sustained_config_validation_names_the_field() -> None:
    with pytest.raises(InvalidInput, match="sustained_concurrency"):
        EngineStepConfig(sustained_concurrency=(0, 4))
    with pytest.raises(InvalidInput, match="sustained_output_tokens"):
        EngineStepConfig(sustained_output_tokens=1)
    assert EngineStepConfig(sustained_concurrency=()).sustained_concurrency == ()
