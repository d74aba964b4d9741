"""gpuplace's serving simulation against vLLM 0.34's own V1 ``Scheduler``, step by step (issue 21).

Real parts: vLLM's scheduler, KV-cache manager and block pool, in vLLM's own venv
(``tests/referee/vllm_venv.sh`` creates it on first use: about 10 GB and 5 minutes). The only fake is
the model: no forward pass runs, each step's output samples one token per request that needs one,
since the scheduler is what is compared and a GPU is what is missing. The streams and the comparison
are in ``tests/support/vllm_scheduler.py``; docs/benchmarks/vllm_scheduler.md holds the figures.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.support import vllm_scheduler as vs
from tests.support.v1_rules import async_steps

pytestmark = [pytest.mark.referee, pytest.mark.integration]

LIKE_FOR_LIKE = [s.name for s in vs.streams() if not (s.prefix_caching or s.async_scheduling)]
ASYNC = [s for s in vs.streams() if s.async_scheduling]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> vs.RefereeRun:
    model_dir = vs.write_model_dir(tmp_path_factory.mktemp("vllm-model"))
    return vs.referee(vs.streams(), model_dir)


def _agreement(run: vs.RefereeRun, name: str) -> vs.Agreement:
    return next(a for a in run.agreements if a.name == name)


def test_vllm_schedules_the_issue_s_hand_run_as_recorded(run: vs.RefereeRun) -> None:
    # issue 21, measured by hand: six 301-token prompts, budget 256, 64 blocks → 256; 45 + 211;
    # 1 + 90 + 165, the fourth request held back by the KV cache (its whole prompt does not fit)
    steps = run.vllm_steps["issue-21"]

    assert [s["prefills"] for s in steps[:4]] == [
        [[0, 256]],
        [[0, 45], [1, 211]],
        [[1, 90], [2, 165]],
        [[2, 136]],
    ]
    assert [s["decodes"] for s in steps[:4]] == [[], [], [0], [0, 1]]
    assert run.vllm_version == "0.34.0"


def test_the_referee_runs_with_vllm_serve_s_own_scheduler_settings(run: vs.RefereeRun) -> None:
    # priority, a long-prefill cap, the watermark, the prefill interval... each would
    # change the schedule; the driven scheduler must have what `vllm serve` resolves when none is given
    assert run.settings["driven"] == run.settings["serve_defaults"]
    assert run.settings["driven"]["scheduler_reserve_full_isl"] == "True"


@pytest.mark.parametrize("name", LIKE_FOR_LIKE)
def test_the_simulation_schedules_every_step_as_vllm_does(run: vs.RefereeRun, name: str) -> None:
    agreement = _agreement(run, name)

    assert agreement.error is None, agreement.error
    assert agreement.identical, agreement.first_difference
    assert agreement.steps_vllm > 0


def test_the_streams_exercise_what_they_are_named_for(run: vs.RefereeRun) -> None:
    totals = {a.name: a.totals["vllm"] for a in run.agreements}

    assert totals["kv-preempt"]["preemptions"] > 0
    assert totals["sustained"]["preemptions"] > 0
    assert totals["light"]["preemptions"] == totals["budget-burst"]["preemptions"] == 0
    closed = run.vllm_steps["closed-loop"]
    assert max(len(s["decodes"]) + len(s["prefills"]) for s in closed) == 12  # its users, never more
    burst = run.vllm_steps["budget-burst"]
    assert max(len(s["prefills"]) for s in burst) >= 2  # chunks of two prompts share a step
    assert max(sum(k for _, k in s["prefills"]) + len(s["decodes"]) for s in burst) == 512  # the budget binds


def test_vllm_s_prefix_cache_recomputes_less_of_a_preempted_request(run: vs.RefereeRun) -> None:
    # the one deliberate difference (docs/serving-model.md): gpuplace recomputes a preempted request
    # whole; vLLM's default prefix cache still holds some of its blocks
    agreement = _agreement(run, "kv-preempt+prefix-cache")
    ours, theirs = agreement.totals["gpuplace"], agreement.totals["vllm"]

    assert agreement.error is None, agreement.error
    assert theirs["preemptions"] == ours["preemptions"] > 0
    assert theirs["decodes"] == ours["decodes"]
    assert theirs["prefill_tokens"] < ours["prefill_tokens"]


@pytest.mark.parametrize("stream", ASYNC, ids=[s.name for s in ASYNC])
def test_the_simulation_schedules_every_step_as_vllm_s_async_scheduler_does(
    run: vs.RefereeRun, stream: vs.Stream
) -> None:
    # EngineParams.async_scheduling: an arrival is seen by the step after the one in flight, a finished
    # request holds its slot and blocks until the next step is scheduled (docs/serving-model.md)
    agreement = _agreement(run, stream.name)

    assert agreement.error is None, agreement.error
    assert agreement.identical, agreement.first_difference


def test_the_synchronous_simulation_would_admit_an_arrival_a_step_early(run: vs.RefereeRun) -> None:
    # what the check above would catch: simulated without the lags, a request arriving during step k runs
    # in step k+1, one step before vLLM's AsyncScheduler runs it, and the median TTFT comes out lower.
    # A saturated burst does not notice.
    burst = next(s for s in ASYNC if s.name == "budget-burst+async")
    burst_sync = vs.simulated_steps(replace(burst, async_scheduling=False))
    assert vs.compare(burst.name, burst_sync, run.vllm_steps[burst.name]).identical
    stream = next(s for s in ASYNC if s.name == "sustained+async")
    sync = replace(stream, async_scheduling=False)
    ours = vs.simulated_steps(sync)
    diff = vs.compare(stream.name, ours, run.vllm_steps[stream.name]).first_difference
    assert diff is not None
    k = diff["step"]
    early = {i for i, _ in diff["gpuplace"]["prefills"]} - {i for i, _ in diff["vllm"]["prefills"]}
    later = {i for i, _ in run.vllm_steps[stream.name][k + 1]["prefills"]}
    assert early and early <= later
    assert (
        vs.latencies(stream, run.vllm_steps[stream.name])["ttft_p50_s"]
        > vs.latencies(sync, ours)["ttft_p50_s"]
    )


@pytest.mark.parametrize("stream", ASYNC, ids=[s.name for s in ASYNC])
def test_vllm_s_async_scheduling_is_the_synchronous_rules_with_two_lags(
    run: vs.RefereeRun, stream: vs.Stream
) -> None:
    # the specification of what the simulation would need (async_steps, tests/support/v1_rules.py): arrivals
    # seen at the start of the step in flight, a finished request freed a step later; nothing else
    agreement = vs.compare(stream.name, async_steps(stream), run.vllm_steps[stream.name])

    assert agreement.identical, agreement.first_difference
