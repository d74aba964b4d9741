"""A discrete-event simulation of one replica of a continuous-batching engine (vLLM's V1 scheduler).

The simulated engine runs steps back to back while it has work, as vLLM's V1 ``Scheduler.schedule``
does (FCFS policy, ``vllm/v1/core/sched/scheduler.py``):

1. running requests first, in admission order: each decode adds one token; a partially prefilled
   prompt continues with what is left of the step's token budget (``max_num_batched_tokens``);
2. then, if nothing was preempted in this step, waiting requests in arrival order while budget is left,
   fewer than ``max_num_seqs`` run and the KV cache has room for the whole prompt (vLLM 0.34's
   ``scheduler_reserve_full_isl``, on by default); a prompt larger than the budget left is chunked
   (chunked prefill), so prefills mix into decode steps;
3. every token needs a slot in the paged KV cache (``num_gpu_blocks`` blocks of ``block_size``
   tokens, one of which vLLM's block pool keeps as its null block); when a running request cannot
   get its next block, the most recently admitted running request is preempted: its blocks are
   freed, it goes back to the front of the waiting queue and is recomputed later (prompt and the
   tokens it already generated), as V1 preempts by recompute (without vLLM's prefix cache, which
   would find some of its blocks still cached: docs/serving-model.md).

vLLM 0.34's own (synchronous) ``Scheduler``, driven step by step over the same streams, schedules
what this simulation does (tests/referee/, docs/serving-model.md: async scheduling lags a step).

With ``num_scheduler_steps`` N > 1 (vLLM V0's multi-step scheduling, 0.6–0.10; no vLLM that runs now has
it, so no referee) a decode-only step starts a run of N decode steps: nothing is admitted until the run
ends (or its last decoder finishes), and the steps after its first skip the engine's per-step CPU work
(``cpu_step_s``: one scheduler call and input preparation a run, vLLM RFC #6854). A step with a prefill
is a single step, as V0 scheduled prompts (its prefills set no lookahead slots).

A request's first token comes at the end of the step that completes its prompt; each later step adds
one. An engine that has been idle starts its next step later by the model's measured wake for that
idle time (:meth:`~gpuplace.planner.steptime.StepTimeModel.wake_s`; 0 on a roofline model). Step
durations come from a :class:`~gpuplace.planner.steptime.StepTimeModel`. Latencies follow
vLLM's benchmark: TTFT = first token − arrival (+ the model's per-request overhead), TPOT = (e2e − TTFT)
÷ (output tokens − 1) over requests with more than one output token; percentiles are numpy's linear
ones over the simulated requests.

The simulation runs in :class:`~gpuplace.planner.sim_replica.SimulatedReplica` (its state between
steps, one method per kind of event). Speed: between events (an admissible arrival, a completion, a
prefill, the KV cache nearing full) every step decodes the same sequences, their context one token
longer each, so its time is ``a + b·(context + n·j)``; the simulation jumps over such spans in closed
form instead of stepping.
Per-request state is updated only at its own events (a global step counter tells a decoding request
how many tokens it has). KV blocks are counted exactly only when an upper bound says the cache could
be full; otherwise no allocation can fail. A 2000-request simulation costs a few milliseconds
(tests/benchmarks/bench_engine_sim.py). :class:`ReplicaModel` caches results per rate and finds the
fewest replicas for a rate by searching up from the fluid capacity bound.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuplace.planner.sim_replica import SimulatedReplica
from gpuplace.planner.sim_results import unstable
from gpuplace.planner.steptime import StepTimeModel
from gpuplace.types.engine import EngineParams, ServingPrediction
from gpuplace.workload import RequestSpec


def simulate(
    requests: Sequence[RequestSpec],
    engine: EngineParams,
    model: StepTimeModel,
    *,
    concurrency: int | None = None,
    discard_head: float = 0.1,
    discard_tail: float = 0.05,
    abort_backlog: int | None = None,
    keep_requests: bool = False,
    trace: bool = False,
) -> ServingPrediction:
    """Simulate ``requests`` through one replica and summarise the kept ones.

    Open loop: each request arrives at its ``arrival_s``. Closed loop (``concurrency`` given, arrival
    times ignored): ``concurrency`` requests start at 0 and each completion starts the next one, as a
    load tester at fixed concurrency does. The first ``discard_head`` and last ``discard_tail`` shares
    of the requests (in arrival order) are simulated but not summarised (warm-up and drain). The run
    stops as unstable when more than ``abort_backlog`` requests wait (default: a quarter of them, or a
    twentieth once the last one has arrived; never in a closed loop, whose queue its users bound).
    ``trace`` records every step's schedule (:class:`~gpuplace.types.engine.EngineStep`; decode-only
    spans are then stepped one by one), which the vLLM referee compares with vLLM's own scheduler
    (tests/referee/).
    """
    replica = SimulatedReplica(
        requests, engine, model, concurrency, discard_head, discard_tail, abort_backlog, trace
    )
    if not replica.run():
        return unstable(replica.step, replica.now, replica.preemptions, replica.max_running)
    return replica.summary(keep_requests)
