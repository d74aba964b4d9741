"""vLLM's asynchronous scheduling in the engine simulation (``EngineParams.async_scheduling``): step k+1 is
scheduled while step k runs, so an arrival is seen by the step after the one in flight, and a request that
finished in step k keeps its slot and KV blocks while step k+1 is scheduled.

The specification is ``async_steps`` (tests/support/v1_rules.py), which the referee holds identical to
vLLM 0.34's own ``AsyncScheduler`` (tests/referee/test_vllm_scheduler.py, which also compares this
simulation with vLLM directly); here the simulation is held to the specification on the referee's streams
and on random ones, without vLLM, and the fast path to the step-by-step one."""

from __future__ import annotations

import dataclasses

import pytest

from gpuplace.errors import InvalidInput
from gpuplace.planner.steptime import StepTimeModel
from gpuplace.types.serving import EngineParams
from gpuplace.workload import RequestSpec
from tests.support import vllm_scheduler as vs
from tests.support.v1_rules import async_steps
from tests.unit.test_engine_sim import ROOFLINE_LIKE, _workload, engine, run

ASYNC = [s for s in vs.streams() if s.async_scheduling]
FLAT = StepTimeModel(fixed_s=0.010, per_token_s=0.001)


def asynchronous(eng: EngineParams) -> EngineParams:
    return dataclasses.replace(eng, async_scheduling=True)


@pytest.mark.parametrize("stream", ASYNC, ids=[s.name for s in ASYNC])
def test_the_referee_streams_are_scheduled_as_the_specification_says(stream: vs.Stream) -> None:
    agreement = vs.compare(stream.name, vs.simulated_steps(stream), async_steps(stream))

    assert agreement.identical, agreement.first_difference


@pytest.mark.parametrize("seed", [0, 2, 3, 5, 11, 17, 23, 29])
def test_random_streams_are_scheduled_as_the_specification_says(seed: int) -> None:
    # budgets, slots and caches small enough to chunk, wait for a slot and preempt; the seeds are ones whose
    # schedule the specification can state (it cannot preempt a request that finished in the step in flight)
    requests = vs._poisson(100 + seed, 60, (20.0, 80.0, 300.0)[seed % 3], (16, 400), (4, 120))
    eng = vs._engine((256, 512, 2048)[seed % 3], (4, 16, 64)[seed // 3 % 3], (48, 120, 4096)[seed // 9 % 3])
    stream = vs.Stream(f"random-{seed}", "", eng, requests, async_scheduling=True)

    agreement = vs.compare(stream.name, vs.simulated_steps(stream), async_steps(stream))

    assert agreement.compared > 50
    assert agreement.identical, agreement.first_difference


@pytest.mark.parametrize("seed", range(4))
def test_the_fast_path_keeps_the_step_by_step_timeline(seed: int) -> None:
    reqs = _workload(seed, 300, 30.0, 50, 30)
    eng = asynchronous(engine(budget=32, seqs=8, block=4, blocks=60))

    fast = run(reqs, eng, ROOFLINE_LIKE)
    traced = run(reqs, eng, ROOFLINE_LIKE, trace=True)

    assert fast.steps == traced.steps == len(traced.trace)
    assert traced.preemptions > 0
    for a, b in zip(fast.requests, traced.requests, strict=True):
        assert (a.first_token_s, a.finish_s, a.preemptions) == pytest.approx(
            (b.first_token_s, b.finish_s, b.preemptions), rel=1e-9
        )


def test_an_arrival_during_a_step_runs_a_step_later() -> None:
    # A alone: prefill 0-20 ms, decodes of 11 ms. B arrives at 25 ms, during A's first decode (20-31 ms).
    # Synchronous: B's prefill joins the next step (31-52 ms). Asynchronous: that step was scheduled when
    # the one in flight started (20 ms), before B arrived; B joins the step after (42-63 ms).
    reqs = [RequestSpec(0, 0.0, 10, 8), RequestSpec(1, 0.025, 10, 2)]
    _, sync_b = run(reqs, engine(), FLAT).requests
    _, async_b = run(reqs, asynchronous(engine()), FLAT).requests

    assert sync_b.first_token_s == pytest.approx(0.052)
    assert async_b.first_token_s == pytest.approx(0.063)


def test_a_finished_request_holds_its_slot_while_the_next_step_is_scheduled() -> None:
    # two slots, A and C prefill together (0-30 ms) and decode (30-42 ms), when A is done; B arrived at 1 ms.
    # Synchronous: A's slot is free for the next step, which decodes C and prefills B (42-63 ms).
    # Asynchronous: that step was scheduled while A still held the slot: C alone (42-53 ms), then C and B
    # (53-74 ms).
    reqs = [RequestSpec(0, 0.0, 10, 2), RequestSpec(1, 0.0, 10, 10), RequestSpec(2, 0.001, 10, 2)]
    eng = engine(seqs=2)
    sync_a, _, sync_b = run(reqs, eng, FLAT).requests
    async_a, _, async_b = run(reqs, asynchronous(eng), FLAT).requests

    assert sync_a.finish_s == async_a.finish_s == pytest.approx(0.042)
    assert sync_b.first_token_s == pytest.approx(0.063)
    assert async_b.first_token_s == pytest.approx(0.074)


def test_async_scheduling_is_checked_and_written_only_when_set() -> None:
    eng = asynchronous(engine())
    assert EngineParams.from_json_dict(eng.to_json_dict()) == eng
    assert "async_scheduling" not in engine().to_json_dict()
    with pytest.raises(InvalidInput, match=r"async_scheduling.*V0"):
        dataclasses.replace(eng, num_scheduler_steps=10)
    with pytest.raises(InvalidInput, match="async_scheduling"):
        dataclasses.replace(engine(), async_scheduling="yes")
