"""A discrete-event simulation of one replica of a continuous-batching engine (vLLM's V1 scheduler).

The simulated engine runs steps back to back while it has work, as vLLM's V1 ``Scheduler.schedule``
does (FCFS policy, ``vllm/v1/core/sched/scheduler.py``):

1. running requests first, in admission order: each decode adds one token; a partially prefilled
   prompt continues with what is left of the step's token budget (``max_num_batched_tokens``);
2. then, if nothing was preempted in this step, waiting requests in arrival order while budget is left,
   fewer than ``max_num_seqs`` run and the KV cache has room for the whole prompt (vLLM 0.33's
   ``scheduler_reserve_full_isl``, on by default); a prompt larger than the budget left is chunked
   (chunked prefill), so prefills mix into decode steps;
3. every token needs a slot in the paged KV cache (``num_gpu_blocks`` blocks of ``block_size``
   tokens, one of which vLLM's block pool keeps as its null block); when a running request cannot
   get its next block, the most recently admitted running request is preempted: its blocks are
   freed, it goes back to the front of the waiting queue and is recomputed later (prompt and the
   tokens it already generated), as V1 preempts by recompute (without vLLM's prefix cache, which
   would find some of its blocks still cached: docs/serving-model.md).

vLLM 0.33's own (synchronous) ``Scheduler``, driven step by step over the same streams, schedules
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

Speed: between events (an admissible arrival, a completion, a prefill, the KV cache nearing full) every
step decodes the same sequences, their context one token longer each, so its time is ``a + b·(context +
n·j)``; the simulation jumps over such spans in closed form instead of stepping.
Per-request state is updated only at its own events (a global step counter tells a decoding request
how many tokens it has). KV blocks are counted exactly only when an upper bound says the cache could
be full; otherwise no allocation can fail. A 2000-request simulation costs a few milliseconds
(tests/benchmarks/bench_engine_sim.py). :class:`ReplicaModel` caches results per rate and finds the
fewest replicas for a rate by searching up from the fluid capacity bound.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Sequence

from gpuplace.planner.sim_inputs import arrivals_in_order, longest_blocks
from gpuplace.planner.sim_results import distribution, itl_distribution, latencies, unstable
from gpuplace.planner.steptime import StepTimeModel, causal_pairs, decode_steps_until
from gpuplace.types.engine import EngineParams, EngineStep, ServingPrediction, SimulatedRequest
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
    longest = longest_blocks(requests, engine, concurrency, discard_head, discard_tail)
    n_req = len(requests)
    bs = engine.block_size
    capacity = engine.num_gpu_blocks - 1  # vLLM's block pool keeps one block aside (its null block)
    budget = engine.max_num_batched_tokens
    max_seqs = engine.max_num_seqs
    backlog_limit = abort_backlog if abort_backlog is not None else max(64, n_req // 4)
    if concurrency is not None and abort_backlog is None:
        # a closed loop's queue is bounded by its users: it cannot run away, however many wait at once
        backlog_limit = n_req
    end_backlog_limit = abort_backlog if abort_backlog is not None else max(32, n_req // 20)
    checked_end = concurrency is not None
    overhead = model.request_overhead_s
    step_s = model.step_s
    kv_b = model.kv_s_per_token
    decode_a: dict[int, float] = {}  # decode-only step time of n sequences, before context
    work = model.request_work_s
    wake = model.wake_s
    pending_work = 0.0  # request work done between the last step and the next
    # multi-step scheduling (vLLM V0's --num-scheduler-steps): a decode-only step starts a run of
    # ``run_steps`` steps; nothing is admitted before the run ends, and the engine's CPU work per step (the
    # scheduler call, input preparation: the model's ``cpu_step_s``) is paid by the run's first step only;
    # the per-sequence work (each token's output processing) and the GPU's kernel floors every step
    run_steps = engine.num_scheduler_steps
    multi = run_steps > 1
    run_end = 0  # step counter at which the current run ends
    # asynchronous scheduling (vLLM V1's AsyncScheduler): the next step is scheduled while one is in flight,
    # seeing the arrivals by that step's start; a request that finished in it keeps its slot and blocks
    # until the next step is scheduled
    asyn = engine.async_scheduling
    in_flight_start = -1.0  # start of the step in flight while the next is scheduled; < 0: none
    finishing: dict[int, None] = {}  # finished in the step in flight, not yet freed
    fin_ctx = 0  # their tokens in the KV cache

    closed = concurrency is not None
    arrival, prompt, out, released = arrivals_in_order(requests, concurrency)

    # per-request state
    need = list(prompt)  # tokens to compute before the next sample (prompt, or prompt+generated on recompute)
    computed = [0] * n_req  # of ``need``
    generated = [0] * n_req  # tokens sampled so far (valid for decoders at their entry counter)
    enter_step = [0] * n_req  # step counter when the request last entered decode
    version = [0] * n_req  # invalidates heap entries after a preemption
    held = [0] * n_req  # KV blocks held (exact only while counted exactly)
    first = [math.nan] * n_req
    finish = [math.nan] * n_req
    preempted = [0] * n_req

    running: dict[int, None] = {}  # admission order; decoders and at most one partial prefill
    decoding: set[int] = set()
    heap: list[tuple[int, int, int]] = []  # (step counter at finish, request, version)
    waiting: deque[int] = deque(range(released) if closed else ())
    partial = -1  # the running request whose prompt is partly computed, or -1
    ctx = 0  # Σ (prompt + generated) over decoders: the KV tokens their next step reads
    prefill_held = 0  # tokens in the KV cache of the partial prefill
    step = 0
    now = 0.0
    next_arrival = 0
    busy_running = 0.0  # ∫ running dt
    # ITL: (end time, duration, decodes) of the steps; a span of decode-only steps adds a few points
    itl_end: list[float] = []
    itl_dt: list[float] = []
    itl_n: list[float] = []
    max_running = 0
    peak_blocks = 0
    preemptions = 0
    exact = False  # blocks counted per request (entered when the upper bound nears capacity)
    steps_log: list[EngineStep] = []
    victims: list[int] = []  # preempted while the current step is scheduled

    def complete(i: int) -> None:
        """``i`` sampled its last token in the step that just ended; closed loop: the next starts."""
        nonlocal released, pending_work, fin_ctx
        finish[i] = now + overhead
        generated[i] = out[i]
        if asyn:
            finishing[i] = None
            fin_ctx += prompt[i] + out[i]
        else:
            del running[i]
            held[i] = 0
        if closed and released < n_req:
            arrival[released] = now
            waiting.append(released)
            released += 1
            if running:
                pending_work += work  # it arrives while the engine runs (see the open loop's arrivals)

    def free_finishing() -> None:
        nonlocal fin_ctx
        for i in finishing:
            del running[i]
            held[i] = 0
        finishing.clear()
        fin_ctx = 0

    def finish_decoders() -> None:
        nonlocal ctx
        while heap and heap[0][0] <= step:
            _, i, v = heapq.heappop(heap)
            if v != version[i] or i not in decoding:
                continue
            decoding.discard(i)
            ctx -= prompt[i] + out[i]
            complete(i)

    def enter_decode(i: int) -> None:
        """The step that just ended computed ``i``'s whole ``need`` and sampled a token."""
        nonlocal ctx
        generated[i] += 1
        if math.isnan(first[i]):
            first[i] = now + overhead
        if generated[i] >= out[i]:
            complete(i)
            return
        decoding.add(i)
        enter_step[i] = step
        ctx += prompt[i] + generated[i]
        heapq.heappush(heap, (step + out[i] - generated[i], i, version[i]))

    def length(i: int) -> int:
        """Tokens of ``i`` in the KV cache once its next decode step has run."""
        return prompt[i] + generated[i] + (step - enter_step[i])

    def preempt(i: int) -> None:
        nonlocal ctx, partial, prefill_held, preemptions, fin_ctx
        if i in finishing:  # the newest running request may be one that finished in the step in flight
            del finishing[i]
            fin_ctx -= prompt[i] + out[i]
        if i in decoding:
            decoding.discard(i)
            generated[i] += step - enter_step[i]
            ctx -= prompt[i] + generated[i]
        if i == partial:
            partial = -1
            prefill_held = 0
        del running[i]
        version[i] += 1
        need[i] = prompt[i] + generated[i]
        computed[i] = 0
        held[i] = 0
        preempted[i] += 1
        preemptions += 1
        victims.append(i)
        waiting.appendleft(i)

    while True:
        if not closed:
            cutoff = in_flight_start if in_flight_start >= 0 else now
            while next_arrival < n_req and arrival[next_arrival] <= cutoff:
                waiting.append(next_arrival)
                next_arrival += 1
                if running:
                    # A one-process server handles an arriving request (HTTP, tokenising, admission)
                    # under the interpreter lock its step loop needs: the running requests wait for it.
                    pending_work += work
        if len(waiting) > backlog_limit:
            return unstable(step, now, preemptions, max_running)
        if not checked_end and next_arrival >= n_req:
            # When the last request has arrived, a replica that keeps up has a short queue; one that
            # does not has a backlog growing with every request (the rest would only drain it).
            checked_end = True
            if len(waiting) > end_backlog_limit:
                return unstable(step, now, preemptions, max_running)
        n = len(decoding)
        if not running and not waiting:
            if in_flight_start >= 0:  # async: nothing to schedule until the step in flight has ended
                in_flight_start = -1.0
                continue
            if closed or next_arrival >= n_req:
                break
            idle_since = now + pending_work  # idle: the work is done meanwhile
            now = max(idle_since, arrival[next_arrival])
            # an engine that has been idle starts later: its threads and caches wake (measured)
            now += wake(now - idle_since)
            pending_work = 0.0
            continue
        locked = multi and step < run_end and bool(decoding)  # inside a multi-step run
        can_admit = bool(waiting) and len(running) < max_seqs and not locked
        # Blocks in use after the next step cannot exceed this: every token it can add, plus one
        # partly filled block per request that can be running then; an admission needs room for
        # a whole request besides (vLLM checks that its whole prompt fits).
        admissible = min(len(waiting), max_seqs - len(running)) if can_admit else 0
        upper_blocks = (ctx + prefill_held + budget + fin_ctx) // bs + len(running) + admissible + 1
        upper_blocks += longest if can_admit else 0
        if not exact and upper_blocks > capacity:
            exact = True
            for i in running:
                if i in finishing:
                    held[i] = -(-(prompt[i] + out[i] - 1) // bs)
                else:
                    held[i] = -(-(length(i) - 1) // bs) if i in decoding else -(-computed[i] // bs)
        elif exact and upper_blocks <= capacity:
            exact = False

        if partial < 0 and not can_admit and not exact and n and not trace and not (finishing and waiting):
            # A span of decode-only steps: jump to the next event.
            free_finishing()  # async: freed once the span's first step is scheduled
            a = decode_a.get(n)
            if a is None:
                a = decode_a[n] = step_s(n, n, n, decodes=n)
            k = heap[0][0] - step if heap else 1
            starts = int(multi and not locked)  # this span starts a multi-step run
            if multi:
                if starts:
                    run_end = step + run_steps
                k = min(k, run_end - step)  # arrivals wait for the run's end
            elif not closed and next_arrival < n_req and len(running) < max_seqs:
                t = arrival[next_arrival]
                if not asyn:
                    k = min(k, decode_steps_until(now, t, a, kv_b, ctx, n))
                else:  # an arrival is seen by the step after the first that starts at or after it
                    k = min(k, 1 if t <= now else decode_steps_until(now, t, a, kv_b, ctx, n) + 1)
            room = (capacity - len(running) - 1) * bs - ctx
            k = max(1, min(k, room // n))
            # the per-step work (scheduler call, input preparation) the steps after a run's first skip
            saved = (k - starts) * model.cpu_step_s if multi else 0.0
            dt = k * a - saved + kv_b * (k * ctx + n * k * (k - 1) / 2) + pending_work
            last_dt = a + kv_b * (ctx + n * (k - 1)) + (pending_work if k == 1 else 0.0)
            points = min(k, 4)
            for m in range(points):
                j = (m + 0.5) * k / points
                itl_end.append(now + dt * (m + 1) / points)
                itl_dt.append(a - saved / k + kv_b * (ctx + n * j) + (pending_work if m == 0 else 0.0))
                itl_n.append(n * k / points)
            pending_work = 0.0
            now += dt
            in_flight_start = now - last_dt if asyn else -1.0
            busy_running += len(running) * dt
            step += k
            ctx += n * k
            if heap and heap[0][0] <= step:
                finish_decoders()
            continue

        # One explicit step: decodes plus prefill chunks (and preemption when the cache is full).
        left = budget
        chunks: list[tuple[int, int]] = []  # (request, tokens)
        if exact:
            free = capacity - sum(held[i] for i in running)
            preempted_now = False
            for i in list(running):
                if i not in running or i in finishing:
                    continue  # preempted by an earlier request of this step, or finished (async)
                if i in decoding:
                    tokens = 1
                    want = -(-length(i) // bs)
                else:
                    tokens = min(need[i] - computed[i], left)
                    want = -(-(computed[i] + tokens) // bs)
                while want - held[i] > free:
                    # FCFS: the most recently admitted request goes; the requests after ``i`` go
                    # first, so a request scheduled earlier in this step is never the victim.
                    victim = next(reversed(running))
                    free += held[victim]
                    preempt(victim)
                    preempted_now = True
                    if victim == i:
                        break
                if i not in running:
                    break  # it preempted itself: nothing after it is left to schedule
                free -= want - held[i]
                held[i] = want
                left -= tokens
                if i not in decoding:
                    chunks.append((i, tokens))
            n = len(decoding)
            if not preempted_now and not locked:
                while waiting and left > 0 and len(running) < max_seqs:
                    i = waiting[0]
                    tokens = min(need[i], left)
                    want = -(-tokens // bs)
                    if -(-need[i] // bs) > free:  # vLLM 0.33 scheduler_reserve_full_isl: all of it
                        break
                    waiting.popleft()
                    running[i] = None
                    free -= want
                    held[i] = want
                    left -= tokens
                    chunks.append((i, tokens))
            peak_blocks = max(peak_blocks, capacity - free)
        else:
            left -= n
            if partial >= 0:
                tokens = min(need[partial] - computed[partial], left)
                chunks.append((partial, tokens))
                left -= tokens
            while waiting and left > 0 and len(running) < max_seqs and not locked:
                i = waiting.popleft()
                running[i] = None
                tokens = min(need[i], left)
                chunks.append((i, tokens))
                left -= tokens
        if not chunks and n == 0:
            if in_flight_start < 0 and not finishing:
                raise AssertionError("the simulated engine scheduled nothing with work waiting")
            free_finishing()  # async: nothing to schedule until the step in flight has ended
            in_flight_start = -1.0
            continue
        if trace:
            decodes = tuple(i for i in running if i in decoding)
            steps_log.append(EngineStep(now, decodes, tuple(c for c in chunks if c[1] > 0), tuple(victims)))
        victims.clear()
        free_finishing()
        in_flight_start = now if asyn else -1.0
        prefill_tokens = 0
        pairs = 0.0
        samples = n
        done: list[int] = []
        for i, tokens in chunks:
            prefill_tokens += tokens
            pairs += causal_pairs(computed[i], tokens)
            computed[i] += tokens
            if computed[i] >= need[i]:
                samples += 1
                done.append(i)
        dt = step_s(n + prefill_tokens, n + len(chunks), samples, ctx, pairs, n) + pending_work
        if multi and not chunks:  # a decode-only step: it starts a multi-step run, or runs inside one
            if locked:
                dt -= model.cpu_step_s
            else:
                run_end = step + run_steps
        pending_work = 0.0
        if n:
            itl_end.append(now + dt)
            itl_dt.append(dt)
            itl_n.append(n)
        now += dt
        max_running = max(max_running, len(running))
        busy_running += len(running) * dt
        step += 1
        ctx += n
        if not exact:
            peak_blocks = max(peak_blocks, min(capacity, (ctx + prefill_held) // bs + len(running)))
        if heap and heap[0][0] <= step:
            finish_decoders()
        partial = -1
        prefill_held = 0
        for i, _ in chunks:
            if computed[i] < need[i]:
                partial = i
                prefill_held = computed[i]
        for i in done:
            computed[i] = 0
            enter_decode(i)

    kept_slice = slice(int(n_req * discard_head), n_req - int(n_req * discard_tail))
    ttft, tpot, e2e, (lo, hi) = latencies(
        arrival[kept_slice], first[kept_slice], finish[kept_slice], out[kept_slice]
    )
    t0 = min(arrival) if not closed else 0.0
    span = max(finish) - t0 if n_req else 0.0
    kept: tuple[SimulatedRequest, ...] = ()
    if keep_requests:
        kept = tuple(
            SimulatedRequest(i, arrival[i], prompt[i], out[i], first[i], finish[i], preempted[i])
            for i in range(n_req)
        )
    return ServingPrediction(
        ttft=distribution(ttft),
        tpot=distribution(tpot),
        e2e=distribution(e2e),
        itl=itl_distribution(itl_end, itl_dt, itl_n, lo, hi),
        throughput_rps=n_req / span if span > 0 else math.inf,
        mean_running=busy_running / now if now > 0 else 0.0,
        max_running=max_running,
        peak_kv_blocks=int(peak_blocks),
        preemptions=preemptions,
        steps=step,
        simulated_s=now,
        stable=True,
        requests=kept,
        trace=tuple(steps_log),
    )
