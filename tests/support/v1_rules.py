"""vLLM V1's FCFS scheduling rules written the obvious way, one step at a time, every request, every block.

Two uses: the reference the simulation's fast paths are checked against (``tests/unit/test_engine_sim.py``),
and :func:`async_steps`, vLLM's asynchronous scheduling written as the same rules with two lags, which
the referee checks against vLLM's own ``AsyncScheduler`` (``tests/referee/test_vllm_scheduler.py``).

The rules (vLLM 0.34, ``vllm/v1/core/sched/scheduler.py``): running requests first, in admission order,
while budget is left (a decode one token, a partial prefill what is left of the budget); a request whose
next block does not fit preempts the newest running request (itself last), which goes back to the front
of the waiting queue to be recomputed; then, unless something was preempted, waiting requests in order
while budget is left, fewer than ``max_num_seqs`` run and the whole prompt fits the free blocks
(``scheduler_reserve_full_isl``). One of ``num_gpu_blocks`` is vLLM's null block.

What asynchronous scheduling (vLLM's GPU default: the ``AsyncScheduler`` behind the engine core's batch
queue of two, which schedules step k+1 while step k runs) changes, as :func:`async_steps` states it:

1. **arrivals**: step k+1 is scheduled when step k starts, so it sees the requests that arrived by the
   start of the step in flight, not by its end;
2. **completions**: a request that samples its last token in step k keeps its slot and its KV blocks
   while step k+1 is scheduled (vLLM skips it, and frees it once step k's output is processed).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from gpuplace.types.engine import EngineParams


@dataclass
class V1State:
    """Every request's scheduling state, by index."""

    prompt: list[int]
    out: list[int]
    need: list[int] = field(default_factory=list)  # tokens to compute before the next sample
    computed: list[int] = field(default_factory=list)  # of ``need``
    generated: list[int] = field(default_factory=list)
    held: list[int] = field(default_factory=list)  # KV blocks
    preemptions: list[int] = field(default_factory=list)
    decoding: set[int] = field(default_factory=set)
    running: list[int] = field(default_factory=list)  # admission order
    waiting: deque[int] = field(default_factory=deque)

    @classmethod
    def of(cls, prompt: list[int], out: list[int]) -> V1State:
        n = len(prompt)
        return cls(list(prompt), list(out), list(prompt), [0] * n, [0] * n, [0] * n, [0] * n)


def schedule_step(
    st: V1State, eng: EngineParams, skip: Collection[int] = ()
) -> tuple[list[tuple[int, int]], list[int]]:
    """One step's ``(request, tokens)`` and the requests it preempted; blocks and queues updated.
    ``skip``: running requests that are not scheduled (async: finished, not yet freed)."""
    bs = eng.block_size

    def blocks(tokens: int) -> int:
        return -(-tokens // bs)

    budget = eng.max_num_batched_tokens
    free = eng.num_gpu_blocks - 1 - sum(st.held[i] for i in st.running)
    scheduled: list[tuple[int, int]] = []
    preempted: list[int] = []
    for i in list(st.running):
        if i not in st.running or i in skip:
            continue
        if budget <= 0:
            break
        if i in st.decoding:
            tokens, want = 1, blocks(st.prompt[i] + st.generated[i])
        else:
            tokens = min(st.need[i] - st.computed[i], budget)
            want = blocks(st.computed[i] + tokens)
        while want - st.held[i] > free:
            victim = st.running.pop()
            free += st.held[victim]
            st.held[victim] = 0
            st.decoding.discard(victim)
            st.need[victim], st.computed[victim] = st.prompt[victim] + st.generated[victim], 0
            st.preemptions[victim] += 1
            st.waiting.appendleft(victim)
            preempted.append(victim)
            if victim == i:
                break
        if i not in st.running:
            break
        free -= want - st.held[i]
        st.held[i] = want
        budget -= tokens
        scheduled.append((i, tokens))
    if not preempted:
        while st.waiting and budget > 0 and len(st.running) < eng.max_num_seqs:
            i = st.waiting[0]
            tokens = min(st.need[i], budget)
            if blocks(st.need[i]) > free:
                break
            st.waiting.popleft()
            st.running.append(i)
            free -= blocks(tokens)
            st.held[i] = blocks(tokens)
            budget -= tokens
            scheduled.append((i, tokens))
    return scheduled, preempted


def async_steps(stream: Any) -> list[dict[str, Any]]:
    """The schedule of an open-loop referee stream (``tests/support/vllm_scheduler.Stream``) under
    asynchronous scheduling's two lags, in the referee's step form, on the stream's step clock."""
    reqs = stream.requests
    n = len(reqs)
    st = V1State.of([r.prompt_tokens for r in reqs], [r.output_tokens for r in reqs])
    finishing: set[int] = set()  # sampled their last token in the step in flight; not yet freed
    steps: list[dict[str, Any]] = []
    now, busy_until, nxt = 0.0, 0.0, 0
    in_flight_start: float | None = None  # start of the step in flight; None: the engine is idle

    def free_finished() -> None:
        for i in finishing:
            st.running.remove(i)
            st.held[i] = 0
            st.decoding.discard(i)
        finishing.clear()

    while True:
        cutoff = now if in_flight_start is None else in_flight_start
        while nxt < n and reqs[nxt].arrival_s <= cutoff:
            st.waiting.append(nxt)
            nxt += 1
        scheduled: list[tuple[int, int]] = []
        preempted: list[int] = []
        if st.waiting or any(i not in finishing for i in st.running):
            scheduled, preempted = schedule_step(st, stream.engine, finishing)
        if not scheduled:  # only the step in flight can free room, or nothing is left: wait for it
            free_finished()
            now, in_flight_start = max(now, busy_until), None
            if not st.waiting and not st.running:
                if nxt >= n:
                    break
                now = max(now, reqs[nxt].arrival_s)  # idle until the next arrival
            continue
        decodes = [i for i, _ in scheduled if i in st.decoding]
        chunks = [(i, k) for i, k in scheduled if i not in st.decoding]
        start = max(now, busy_until)
        steps.append(
            {
                "start_s": start,
                "decodes": sorted(decodes),
                "prefills": sorted([i, k] for i, k in chunks),
                "preempted": sorted(preempted),
            }
        )
        free_finished()  # the output of the step in flight is processed once this step is scheduled
        for i, k in chunks:
            st.computed[i] += k
        for i in decodes + [i for i, _ in chunks if st.computed[i] >= st.need[i]]:
            st.generated[i] += 1
            st.decoding.add(i)
            if st.generated[i] >= st.out[i]:
                finishing.add(i)
        tokens = sum(k for _, k in scheduled)
        busy_until = start + stream.fixed_s + tokens * stream.per_token_s
        now = in_flight_start = start
    return steps
