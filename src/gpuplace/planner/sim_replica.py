"""The simulated replica of :func:`gpuplace.planner.engine_sim.simulate`: the engine's settings, each
request's state and the clock between steps, with one method per kind of event (the model it simulates,
vLLM's V1 scheduler, is described there).

The planner's hot path: the loop keeps the values it reads often in local variables within each method.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Sequence

from gpuplace.planner.sim_inputs import arrivals_in_order, longest_blocks
from gpuplace.planner.sim_results import distribution, itl_distribution, latencies
from gpuplace.planner.steptime import StepTimeModel, causal_pairs, decode_steps_until
from gpuplace.types.engine import EngineParams, EngineStep, ServingPrediction, SimulatedRequest
from gpuplace.workload import RequestSpec


class SimulatedReplica:
    """One simulated replica: the engine's settings, each request's state and the clock between steps.

    :meth:`run` loops over events: arrivals (:meth:`_arrive`), idle time (:meth:`_idle`), a span of
    decode-only steps jumped in closed form (:meth:`_decode_span`), or one explicit step, scheduled
    (:meth:`_schedule`, or :meth:`_schedule_exact` when the KV cache could be full) and run
    (:meth:`_run_step`).
    """

    def __init__(
        self,
        requests: Sequence[RequestSpec],
        engine: EngineParams,
        model: StepTimeModel,
        concurrency: int | None,
        discard_head: float,
        discard_tail: float,
        abort_backlog: int | None,
        trace: bool,
    ) -> None:
        self.longest = longest_blocks(requests, engine, concurrency, discard_head, discard_tail)
        self.n_req = n_req = len(requests)
        self.kept_slice = slice(int(n_req * discard_head), n_req - int(n_req * discard_tail))  # predicted
        self.bs = engine.block_size
        self.capacity = engine.num_gpu_blocks - 1  # vLLM's block pool keeps one block aside (its null block)
        self.budget = engine.max_num_batched_tokens
        self.max_seqs = engine.max_num_seqs
        self.backlog_limit = abort_backlog if abort_backlog is not None else max(64, n_req // 4)
        if concurrency is not None and abort_backlog is None:
            # a closed loop's queue is bounded by its users: it cannot run away, however many wait at once
            self.backlog_limit = n_req
        self.end_backlog_limit = abort_backlog if abort_backlog is not None else max(32, n_req // 20)
        self.checked_end = concurrency is not None
        self.model = model
        self.step_s = model.step_s
        self.overhead = model.request_overhead_s
        self.kv_b = model.kv_s_per_token
        self.decode_a: dict[int, float] = {}  # decode-only step time of n sequences, before context
        self.work = model.request_work_s
        self.pending_work = 0.0  # request work done between the last step and the next
        # multi-step scheduling (vLLM V0's --num-scheduler-steps): a decode-only step starts a run of
        # ``run_steps`` steps, none admitted before it ends; the per-step CPU work (``cpu_step_s``) is paid
        # by its first step only, the per-sequence work and the GPU's kernel floors by every step
        self.run_steps = engine.num_scheduler_steps
        self.multi = self.run_steps > 1
        self.run_end = 0  # step counter at which the current run ends
        # asynchronous scheduling (vLLM V1's AsyncScheduler): the next step is scheduled while one is in
        # flight, seeing the arrivals by that step's start; a request that finished in it keeps its slot
        # and blocks until the next step is scheduled
        self.asyn = engine.async_scheduling
        self.in_flight_start = -1.0  # start of the step in flight while the next is scheduled; < 0: none
        self.finishing: dict[int, None] = {}  # finished in the step in flight, not yet freed
        self.fin_ctx = 0  # their tokens in the KV cache
        self.trace = trace
        self.closed = concurrency is not None
        self.arrival, self.prompt, self.out, self.released = arrivals_in_order(requests, concurrency)

        # per-request state
        self.need = list(self.prompt)  # tokens to compute before the next sample (prompt, or +generated)
        self.computed = [0] * n_req  # of ``need``
        self.generated = [0] * n_req  # tokens sampled so far (valid for decoders at their entry counter)
        self.enter_step = [0] * n_req  # step counter when the request last entered decode
        self.version = [0] * n_req  # invalidates heap entries after a preemption
        self.held = [0] * n_req  # KV blocks held (exact only while counted exactly)
        self.first = [math.nan] * n_req
        self.finish = [math.nan] * n_req
        self.preempted = [0] * n_req

        self.running: dict[int, None] = {}  # admission order; decoders and at most one partial prefill
        self.decoding: set[int] = set()
        self.heap: list[tuple[int, int, int]] = []  # (step counter at finish, request, version)
        self.waiting: deque[int] = deque(range(self.released) if self.closed else ())
        self.partial = -1  # the running request whose prompt is partly computed, or -1
        self.ctx = 0  # Σ (prompt + generated) over decoders: the KV tokens their next step reads
        self.prefill_held = 0  # tokens in the KV cache of the partial prefill
        self.step = 0
        self.now = 0.0
        self.next_arrival = 0
        self.busy_running = 0.0  # ∫ running dt
        # ITL: (end time, duration, decodes) of the steps; a span of decode-only steps adds a few points
        self.itl_end: list[float] = []
        self.itl_dt: list[float] = []
        self.itl_n: list[float] = []
        self.max_running = 0
        self.peak_blocks = 0
        self.preemptions = 0
        self.exact = False  # blocks counted per request (entered when the upper bound nears capacity)
        self.steps_log: list[EngineStep] = []
        self.victims: list[int] = []  # preempted while the current step is scheduled

    # --- a request's events -------------------------------------------------------------------------

    def _complete(self, i: int) -> None:
        """``i`` sampled its last token in the step that just ended; closed loop: the next starts."""
        self.finish[i] = self.now + self.overhead
        self.generated[i] = self.out[i]
        if self.asyn:
            self.finishing[i] = None
            self.fin_ctx += self.prompt[i] + self.out[i]
        else:
            del self.running[i]
            self.held[i] = 0
        if self.closed and self.released < self.n_req:
            self.arrival[self.released] = self.now
            self.waiting.append(self.released)
            self.released += 1
            if self.running:
                self.pending_work += self.work  # it arrives while the engine runs (see _arrive)

    def _free_finishing(self) -> None:
        for i in self.finishing:
            del self.running[i]
            self.held[i] = 0
        self.finishing.clear()
        self.fin_ctx = 0

    def _finish_decoders(self) -> None:
        heap, step, version, decoding = self.heap, self.step, self.version, self.decoding
        while heap and heap[0][0] <= step:
            _, i, v = heapq.heappop(heap)
            if v != version[i] or i not in decoding:
                continue
            decoding.discard(i)
            self.ctx -= self.prompt[i] + self.out[i]
            self._complete(i)

    def _enter_decode(self, i: int) -> None:
        """The step that just ended computed ``i``'s whole ``need`` and sampled a token."""
        generated = self.generated
        got = generated[i] = generated[i] + 1
        if math.isnan(self.first[i]):
            self.first[i] = self.now + self.overhead
        out = self.out[i]
        if got >= out:
            self._complete(i)
            return
        self.decoding.add(i)
        step = self.enter_step[i] = self.step
        self.ctx += self.prompt[i] + got
        heapq.heappush(self.heap, (step + out - got, i, self.version[i]))

    def _length(self, i: int) -> int:
        """Tokens of ``i`` in the KV cache once its next decode step has run."""
        return self.prompt[i] + self.generated[i] + (self.step - self.enter_step[i])

    def _preempt(self, i: int) -> None:
        if i in self.finishing:  # the newest running request may be one that finished in the step in flight
            del self.finishing[i]
            self.fin_ctx -= self.prompt[i] + self.out[i]
        if i in self.decoding:
            self.decoding.discard(i)
            self.generated[i] += self.step - self.enter_step[i]
            self.ctx -= self.prompt[i] + self.generated[i]
        if i == self.partial:
            self.partial = -1
            self.prefill_held = 0
        del self.running[i]
        self.version[i] += 1
        self.need[i] = self.prompt[i] + self.generated[i]
        self.computed[i] = 0
        self.held[i] = 0
        self.preempted[i] += 1
        self.preemptions += 1
        self.victims.append(i)
        self.waiting.appendleft(i)

    # --- the loop ------------------------------------------------------------------------------------

    def run(self) -> bool:
        """Simulate to the last completion; False when the backlog runs away (unstable)."""
        # The planner's hot path: the containers (changed in place, never replaced), the settings and the
        # methods are bound once, and what most iterations only check is checked here.
        running, waiting, decoding, finishing = self.running, self.waiting, self.decoding, self.finishing
        decode_span, run_step, arrival = self._decode_span, self._run_step, self.arrival
        multi, max_seqs, trace, closed, n_req = self.multi, self.max_seqs, self.trace, self.closed, self.n_req
        backlog_limit, capacity, bs, budget = self.backlog_limit, self.capacity, self.bs, self.budget
        while True:
            if not closed and self.next_arrival < n_req:
                cutoff = self.in_flight_start if self.in_flight_start >= 0 else self.now
                if arrival[self.next_arrival] <= cutoff:
                    self._arrive(cutoff)
            if len(waiting) > backlog_limit or (not self.checked_end and self._backlog_at_the_end()):
                return False
            n = len(decoding)
            if not running and not waiting:
                if self.in_flight_start >= 0:  # async: nothing to schedule until the step in flight has ended
                    self.in_flight_start = -1.0
                    continue
                if closed or self.next_arrival >= n_req:
                    return True
                self._idle()
                continue
            locked = multi and self.step < self.run_end and bool(decoding)  # inside a multi-step run
            can_admit = bool(waiting) and len(running) < max_seqs and not locked
            # Blocks in use after the next step cannot exceed this: every token it can add, plus one
            # partly filled block per request that can be running then; an admission needs room for
            # a whole request besides (vLLM checks that its whole prompt fits).
            upper = (self.ctx + self.prefill_held + budget + self.fin_ctx) // bs + len(running) + 1
            if can_admit:
                upper += min(len(waiting), max_seqs - len(running)) + self.longest
            if self.exact != (upper > capacity):
                self._count_exactly(upper > capacity)
            exact = self.exact
            if (
                self.partial < 0
                and not can_admit
                and not exact
                and n
                and not trace
                and not (finishing and waiting)
            ):
                decode_span(n, locked)  # a span of decode-only steps: jump to the next event
                continue
            # One explicit step: decodes plus prefill chunks (and preemption when the cache is full).
            chunks, n = self._schedule_exact(locked) if exact else self._schedule(n, locked)
            if not chunks and n == 0:
                if self.in_flight_start < 0 and not finishing:
                    raise AssertionError("the simulated engine scheduled nothing with work waiting")
                self._free_finishing()  # async: nothing to schedule until the step in flight has ended
                self.in_flight_start = -1.0
                continue
            run_step(chunks, n, locked)

    def _arrive(self, cutoff: float) -> None:
        """Queue the requests that have arrived by ``cutoff``."""
        arrival, n_req, nxt = self.arrival, self.n_req, self.next_arrival
        while nxt < n_req and arrival[nxt] <= cutoff:
            self.waiting.append(nxt)
            nxt += 1
            if self.running:
                # A one-process server handles an arriving request (HTTP, tokenising, admission)
                # under the interpreter lock its step loop needs: the running requests wait for it.
                self.pending_work += self.work
        self.next_arrival = nxt

    def _backlog_at_the_end(self) -> bool:
        """Once the last request has arrived: whether the backlog says the replica cannot keep up."""
        if self.next_arrival < self.n_req:
            return False
        # A replica that keeps up has a short queue then; one that does not has a backlog growing with
        # every request (the rest would only drain it).
        self.checked_end = True
        return len(self.waiting) > self.end_backlog_limit

    def _idle(self) -> None:
        """Nothing to run: the clock moves to the next arrival, and the engine wakes (measured)."""
        idle_since = self.now + self.pending_work  # idle: the work is done meanwhile
        self.now = max(idle_since, self.arrival[self.next_arrival])
        # an engine that has been idle starts later: its threads and caches wake (measured)
        self.now += self.model.wake_s(self.now - idle_since)
        self.pending_work = 0.0

    def _count_exactly(self, exact: bool) -> None:
        """Count KV blocks per request (``exact``) while the cache could be full after the next step."""
        self.exact = exact
        if exact:
            bs, held, prompt, out = self.bs, self.held, self.prompt, self.out
            for i in self.running:
                if i in self.finishing:
                    held[i] = -(-(prompt[i] + out[i] - 1) // bs)
                elif i in self.decoding:
                    held[i] = -(-(self._length(i) - 1) // bs)
                else:
                    held[i] = -(-self.computed[i] // bs)

    def _decode_span(self, n: int, locked: bool) -> None:
        """Run decode-only steps of the same ``n`` sequences up to the next event, in closed form."""
        if self.finishing:
            self._free_finishing()  # async: freed once the span's first step is scheduled
        kv_b, ctx, now, step, pending, heap = (
            self.kv_b,
            self.ctx,
            self.now,
            self.step,
            self.pending_work,
            self.heap,
        )
        size, multi = len(self.running), self.multi
        a = self.decode_a.get(n)
        if a is None:
            a = self.decode_a[n] = self.step_s(n, n, n, decodes=n)
        k = heap[0][0] - step if heap else 1
        starts = int(multi and not locked)  # this span starts a multi-step run
        if multi:
            if starts:
                self.run_end = step + self.run_steps
            k = min(k, self.run_end - step)  # arrivals wait for the run's end
        elif not self.closed and self.next_arrival < self.n_req and size < self.max_seqs:
            t = self.arrival[self.next_arrival]
            if not self.asyn:
                k = min(k, decode_steps_until(now, t, a, kv_b, ctx, n))
            else:  # an arrival is seen by the step after the first that starts at or after it
                k = min(k, 1 if t <= now else decode_steps_until(now, t, a, kv_b, ctx, n) + 1)
        room = (self.capacity - size - 1) * self.bs - ctx
        k = max(1, min(k, room // n))
        # the per-step work (scheduler call, input preparation) the steps after a run's first skip
        saved = (k - starts) * self.model.cpu_step_s if multi else 0.0
        dt = k * a - saved + kv_b * (k * ctx + n * k * (k - 1) / 2) + pending
        last_dt = a + kv_b * (ctx + n * (k - 1)) + (pending if k == 1 else 0.0)
        points = min(k, 4)
        ends, dts, ns = self.itl_end, self.itl_dt, self.itl_n
        for m in range(points):
            j = (m + 0.5) * k / points
            ends.append(now + dt * (m + 1) / points)
            dts.append(a - saved / k + kv_b * (ctx + n * j) + (pending if m == 0 else 0.0))
            ns.append(n * k / points)
        self.pending_work = 0.0
        self.now = now = now + dt
        self.in_flight_start = now - last_dt if self.asyn else -1.0
        self.busy_running += size * dt
        self.step = step = step + k
        self.ctx = ctx + n * k
        if heap and heap[0][0] <= step:
            self._finish_decoders()

    def _schedule(self, n: int, locked: bool) -> tuple[list[tuple[int, int]], int]:
        """The next step's prefill chunks (request, tokens) beside its ``n`` decodes, while no allocation
        can fail."""
        left = self.budget - n
        chunks: list[tuple[int, int]] = []
        need, computed, waiting, running = self.need, self.computed, self.waiting, self.running
        if self.partial >= 0:
            tokens = min(need[self.partial] - computed[self.partial], left)
            chunks.append((self.partial, tokens))
            left -= tokens
        while waiting and left > 0 and len(running) < self.max_seqs and not locked:
            i = waiting.popleft()
            running[i] = None
            tokens = min(need[i], left)
            chunks.append((i, tokens))
            left -= tokens
        return chunks, n

    def _schedule_exact(self, locked: bool) -> tuple[list[tuple[int, int]], int]:
        """The next step's chunks and decodes with every block counted: a request that cannot get its next
        block preempts the most recently admitted one (vLLM V1, FCFS); admissions need the whole prompt."""
        left = self.budget
        chunks: list[tuple[int, int]] = []
        running, held, need, computed, bs = self.running, self.held, self.need, self.computed, self.bs
        free = self.capacity - sum(held[i] for i in running)
        preempted_now = False
        for i in list(running):
            if i not in running or i in self.finishing:
                continue  # preempted by an earlier request of this step, or finished (async)
            if i in self.decoding:
                tokens = 1
                want = -(-self._length(i) // bs)
            else:
                tokens = min(need[i] - computed[i], left)
                want = -(-(computed[i] + tokens) // bs)
            while want - held[i] > free:
                # FCFS: the most recently admitted request goes; the requests after ``i`` go
                # first, so a request scheduled earlier in this step is never the victim.
                victim = next(reversed(running))
                free += held[victim]
                self._preempt(victim)
                preempted_now = True
                if victim == i:
                    break
            if i not in running:
                break  # it preempted itself: nothing after it is left to schedule
            free -= want - held[i]
            held[i] = want
            left -= tokens
            if i not in self.decoding:
                chunks.append((i, tokens))
        if not preempted_now and not locked:
            waiting = self.waiting
            while waiting and left > 0 and len(running) < self.max_seqs:
                i = waiting[0]
                tokens = min(need[i], left)
                want = -(-tokens // bs)
                if -(-need[i] // bs) > free:  # vLLM 0.34 scheduler_reserve_full_isl: all of it
                    break
                waiting.popleft()
                running[i] = None
                free -= want
                held[i] = want
                left -= tokens
                chunks.append((i, tokens))
        self.peak_blocks = max(self.peak_blocks, self.capacity - free)
        return chunks, len(self.decoding)

    def _run_step(self, chunks: list[tuple[int, int]], n: int, locked: bool) -> None:
        """Run one scheduled step: its time, its samples, the requests it completes or starts decoding."""
        running, now = self.running, self.now
        if self.trace:
            decodes = tuple(i for i in running if i in self.decoding)
            self.steps_log.append(
                EngineStep(now, decodes, tuple(c for c in chunks if c[1] > 0), tuple(self.victims))
            )
        self.victims.clear()
        if self.finishing:
            self._free_finishing()
        self.in_flight_start = now if self.asyn else -1.0
        prefill_tokens = 0
        pairs = 0.0
        samples = n
        done: list[int] = []
        computed, need = self.computed, self.need
        for i, tokens in chunks:
            prefill_tokens += tokens
            pairs += causal_pairs(computed[i], tokens)
            computed[i] += tokens
            if computed[i] >= need[i]:
                samples += 1
                done.append(i)
        ctx = self.ctx
        dt = self.step_s(n + prefill_tokens, n + len(chunks), samples, ctx, pairs, n) + self.pending_work
        if self.multi and not chunks:  # a decode-only step: it starts a multi-step run, or runs inside one
            if locked:
                dt -= self.model.cpu_step_s
            else:
                self.run_end = self.step + self.run_steps
        self.pending_work = 0.0
        if n:
            self.itl_end.append(now + dt)
            self.itl_dt.append(dt)
            self.itl_n.append(n)
        self.now = now + dt
        size = len(running)
        if size > self.max_running:
            self.max_running = size
        self.busy_running += size * dt
        self.step = step = self.step + 1
        self.ctx = ctx = ctx + n
        if not self.exact:
            blocks = (ctx + self.prefill_held) // self.bs + size
            self.peak_blocks = max(self.peak_blocks, min(self.capacity, blocks))
        heap = self.heap
        if heap and heap[0][0] <= step:
            self._finish_decoders()
        self.partial = -1
        self.prefill_held = 0
        for i, _ in chunks:
            if computed[i] < need[i]:
                self.partial = i
                self.prefill_held = computed[i]
        enter_decode = self._enter_decode
        for i in done:
            computed[i] = 0
            enter_decode(i)

    def summary(self, keep_requests: bool) -> ServingPrediction:
        """The prediction over the kept requests (the head and tail shares left out)."""
        n_req, arrival, first, finish, out = self.n_req, self.arrival, self.first, self.finish, self.out
        kept_slice = self.kept_slice
        ttft, tpot, e2e, (lo, hi) = latencies(
            arrival[kept_slice], first[kept_slice], finish[kept_slice], out[kept_slice]
        )
        t0 = min(arrival) if not self.closed else 0.0
        span = max(finish) - t0 if n_req else 0.0
        kept: tuple[SimulatedRequest, ...] = ()
        if keep_requests:
            kept = tuple(
                SimulatedRequest(
                    i, arrival[i], self.prompt[i], out[i], first[i], finish[i], self.preempted[i]
                )
                for i in range(n_req)
            )
        now = self.now
        return ServingPrediction(
            ttft=distribution(ttft),
            tpot=distribution(tpot),
            e2e=distribution(e2e),
            itl=itl_distribution(self.itl_end, self.itl_dt, self.itl_n, lo, hi),
            throughput_rps=n_req / span if span > 0 else math.inf,
            mean_running=self.busy_running / now if now > 0 else 0.0,
            max_running=self.max_running,
            peak_kv_blocks=int(self.peak_blocks),
            preemptions=self.preemptions,
            steps=self.step,
            simulated_s=now,
            stable=True,
            requests=kept,
            trace=tuple(self.steps_log),
        )
