"""vLLM V0's multi-step scheduling (``--num-scheduler-steps``) in the engine simulation: new requests
join only between runs, and a run pays the engine's per-step CPU work once. Hand-worked timelines on a
step model whose numbers can be counted; the published runs it models are vLLM 0.6.0's
(docs/benchmarks/published.md, lines 8–11 and 20–24)."""

from __future__ import annotations

import dataclasses

import pytest

from gpuplace.errors import InvalidInput
from gpuplace.planner.steptime import StepTimeModel
from gpuplace.types.serving import EngineParams
from gpuplace.workload import RequestSpec
from tests.unit.test_engine_sim import ROOFLINE_LIKE, _workload, engine, run

# 10 ms per step (4 ms of it the engine's CPU work) plus 1 ms per token
MODEL = StepTimeModel(fixed_s=0.010, cpu_step_s=0.004, per_token_s=0.001)


def multi(eng: EngineParams, steps: int = 10) -> EngineParams:
    return dataclasses.replace(eng, num_scheduler_steps=steps)


def test_a_run_pays_the_cpu_work_of_a_step_once() -> None:
    (single,) = run([RequestSpec(0, 0.0, 10, 21)], engine(), MODEL).requests
    (r,) = run([RequestSpec(0, 0.0, 10, 21)], multi(engine()), MODEL).requests

    # prefill 10 + 10 ms; 20 decode steps of 11 ms, in two runs of 10 whose last 9 steps skip the 4 ms
    assert single.finish_s == pytest.approx(0.020 + 20 * 0.011)
    assert r.first_token_s == pytest.approx(0.020)
    assert r.finish_s == pytest.approx(0.020 + 2 * (0.011 + 9 * 0.007))


def test_a_request_arriving_during_a_run_waits_for_its_end() -> None:
    reqs = [RequestSpec(0, 0.0, 10, 30), RequestSpec(1, 0.030, 10, 2)]
    a1, b1 = run(reqs, engine(), MODEL).requests
    a, b = run(reqs, multi(engine()), MODEL).requests

    # one step at a time: B joins the first step after it arrives (A's decode ends at 31 ms), and its
    # prefill step (A's decode + B's 10 tokens: 10 + 11 ms) ends at 52 ms
    assert b1.first_token_s == pytest.approx(0.052)
    # multi-step: A's first run (steps 2-11) ends at 20 + 11 + 9 × 7 = 94 ms; B's prefill then: 115 ms
    assert b.first_token_s == pytest.approx(0.094 + 0.021)
    assert b.ttft_s > 3 * b1.ttft_s
    assert a.first_token_s == a1.first_token_s


def test_a_closed_loop_admits_the_next_user_at_the_end_of_the_run() -> None:
    # one user at a time: the next request is released when the last one finishes, mid-run or not
    reqs = [RequestSpec(i, 0.0, 10, 5) for i in range(3)]
    one = run(reqs, engine(), MODEL, concurrency=2).requests
    ten = run(reqs, multi(engine()), MODEL, concurrency=2).requests

    # the two first users finish inside a run that then has no decoder left: the third is admitted at once
    assert [r.first_token_s for r in ten[:2]] == pytest.approx([r.first_token_s for r in one[:2]])
    assert ten[2].arrival_s == pytest.approx(ten[0].finish_s)
    assert ten[2].first_token_s == pytest.approx(ten[2].arrival_s + 0.010 + 0.010)


def test_tracing_a_multi_step_engine_steps_through_the_same_timeline() -> None:
    reqs = _workload(7, 200, 30.0, 50, 30)
    eng = multi(engine(budget=32, seqs=8, block=4, blocks=60), 8)
    model = dataclasses.replace(ROOFLINE_LIKE, cpu_step_s=ROOFLINE_LIKE.fixed_s / 2)

    fast = run(reqs, eng, model)
    traced = run(reqs, eng, model, trace=True)
    plain = run(reqs, dataclasses.replace(eng, num_scheduler_steps=1), model)

    assert traced.steps == fast.steps == len(traced.trace)
    for a, b in zip(fast.requests, traced.requests, strict=True):
        assert (a.first_token_s, a.finish_s, a.preemptions) == pytest.approx(
            (b.first_token_s, b.finish_s, b.preemptions), rel=1e-9
        )
    # new requests wait for runs: the median TTFT grows
    assert fast.ttft.p50 > plain.ttft.p50


def test_num_scheduler_steps_is_checked_and_never_deployed() -> None:
    eng = multi(engine())
    with pytest.raises(InvalidInput, match=r"num_scheduler_steps.*V0 engine"):
        eng.to_vllm_args()
    with pytest.raises(InvalidInput, match="num_scheduler_steps"):
        multi(engine(), 0)
    assert EngineParams.from_json_dict(eng.to_json_dict()) == eng
    # one step (every engine gpuplace deploys) writes nothing new: plans and their ids stay as they were
    assert "num_scheduler_steps" not in engine().to_json_dict()
    assert "--num-scheduler-steps" not in engine().to_vllm_args()


def test_predict_runs_a_published_vllm_0_6_as_it_ran() -> None:
    """``predict(engine_changes=...)``: the SGLang repository's run of vLLM 0.6.0 (10 scheduler steps,
    at most 256 sequences) on an A100 at 4 req/s; its measured p50 TTFT was 100 ms. A new request waits
    for the run of 10 decode steps under way, half a run at the median, less what the V1 engine's step
    costs more for mixing the prefill into it (about 3 steps here: 3.2 with the class roofline for the
    linear layers, 2.9 with the measured GEMMs, which price a mixed step's 170 tokens higher);
    docs/serving-model.md."""
    from gpuplace.catalog import load_gpu_catalog, model_arch_from_config, resolve_model
    from gpuplace.catalog.efficiency import load_efficiency_table
    from gpuplace.planner.predict import Load, predict, shape_spec
    from gpuplace.planner.replica import TrafficShape
    from gpuplace.workload import LengthDist

    arch = model_arch_from_config("llama-3.1-8b", resolve_model("llama-3.1-8b").config)
    shape = shape_spec(arch, load_gpu_catalog().get("A100-SXM4-80GB"))
    traffic = TrafficShape(LengthDist("fixed", 161), LengthDist("fixed", 338), requests=600)
    eff = load_efficiency_table()

    v1 = predict(arch, shape, Load(rate_rps=4), traffic, eff)
    v0 = predict(
        arch, shape, Load(rate_rps=4), traffic, eff,
        engine_changes={"num_scheduler_steps": 10, "max_num_seqs": 256},
    )  # fmt: skip
    step = v0.serving.tpot.p50
    assert v0.serving.ttft.p50 - v1.serving.ttft.p50 > 2.5 * step
    assert v0.serving.ttft.p50 == pytest.approx(0.100, rel=0.3)  # the measured p50 TTFT
    with pytest.raises(InvalidInput, match="engine_changes"):
        predict(arch, shape, Load(rate_rps=4), traffic, eff, engine_changes={"scheduler_steps": 10})
