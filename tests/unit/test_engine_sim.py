"""The continuous-batching simulation on cases worked out by hand, and against a step-by-step reference.

The reference below is the V1 scheduler written the obvious way (every step, every request, KV blocks
counted exactly); the simulation must give the same timeline while jumping over decode-only spans.
"""

from __future__ import annotations

import math
import random

import pytest

from gpuplace.errors import InvalidInput
from gpuplace.planner.engine_sim import simulate
from gpuplace.planner.replica import ReplicaModel, TrafficShape, fluid_capacity_rps
from gpuplace.planner.steptime import StepTimeModel, causal_pairs
from gpuplace.types.engine import EngineParams
from gpuplace.workload import LengthDist, RequestSpec
from tests.support.v1_rules import V1State, schedule_step

# 10 ms per step plus 1 ms per token: hand-countable
FLAT = StepTimeModel(fixed_s=0.010, per_token_s=0.001)


def engine(
    budget: int = 64, seqs: int = 8, block: int = 4, blocks: int = 1000, max_len: int = 4096
) -> EngineParams:
    return EngineParams(
        max_num_batched_tokens=budget,
        max_num_seqs=seqs,
        block_size=block,
        gpu_memory_utilization=0.9,
        max_model_len=max_len,
        enable_chunked_prefill=True,
        num_gpu_blocks=blocks,
    )


def run(requests: list[RequestSpec], eng: EngineParams, model: StepTimeModel = FLAT, **kw: object):
    return simulate(requests, eng, model, discard_head=0, discard_tail=0, keep_requests=True, **kw)  # type: ignore[arg-type]


# --- hand-worked cases --------------------------------------------------------------------------


def test_one_request_alone_is_one_prefill_step_then_one_step_per_token() -> None:
    result = run([RequestSpec(0, 0.0, 10, 5)], engine())

    (r,) = result.requests
    assert r.first_token_s == pytest.approx(0.010 + 0.010)  # 10 prompt tokens in one step
    assert r.finish_s == pytest.approx(0.020 + 4 * 0.011)  # 4 decode steps of one token
    assert result.ttft.p50 == pytest.approx(0.020)
    assert result.tpot.p50 == pytest.approx(0.011)
    assert result.steps == 5
    assert result.preemptions == 0
    pred = result.to_prediction(memory_per_gpu_gib=1.5)
    assert (pred.ttft.p50, pred.tpot.p99, pred.max_batch, pred.stable) == pytest.approx(
        (0.020, 0.011, 1, True)
    )
    assert pred.concurrency == pytest.approx(result.throughput_rps * result.e2e.mean)


def test_a_prompt_longer_than_the_budget_is_chunked_over_steps() -> None:
    (r,) = run([RequestSpec(0, 0.0, 100, 3)], engine(budget=64)).requests

    assert r.first_token_s == pytest.approx((0.010 + 0.064) + (0.010 + 0.036))
    assert r.tpot_s == pytest.approx(0.011)


def test_a_saturated_token_budget_chunks_and_mixes_prefills_into_decode_steps() -> None:
    # budget 8, three 6-token prompts at once:
    # step 1: A 6 + B 2 (chunk) = 8 tokens, 18 ms → A's first token
    # step 2: A decode 1 + B 4 + C 3 (chunk) = 8 tokens, 18 ms → A done, B's first token
    # step 3: B decode 1 + C 3 = 4 tokens, 14 ms → B done, C's first token
    # step 4: C decode, 11 ms → C done
    result = run([RequestSpec(i, 0.0, 6, 2) for i in range(3)], engine(budget=8))

    a, b, c = result.requests
    assert (a.first_token_s, a.finish_s) == pytest.approx((0.018, 0.036))
    assert (b.first_token_s, b.finish_s) == pytest.approx((0.036, 0.050))
    assert (c.first_token_s, c.finish_s) == pytest.approx((0.050, 0.061))
    assert result.steps == 4


def test_a_full_kv_cache_preempts_the_newest_request_and_recomputes_it() -> None:
    # 4 usable blocks of 2 tokens (5, one of them vLLM's null block); A and B (3 prompt + 4 output
    # tokens) arrive together.
    # step 1: both prefill (2 blocks each, cache full), 16 ms; step 2: both decode into their 2nd block,
    # 12 ms; step 3: A needs a 3rd block → B (newest) is preempted, A decodes alone, 11 ms;
    # step 4: A decodes (done); B's 5-token recompute needs 3 blocks, 0 free → waits, 11 ms;
    # step 5: B recomputes prompt + its 2 tokens and samples its 3rd, 15 ms; step 6: B's last, 11 ms.
    result = run([RequestSpec(i, 0.0, 3, 4) for i in range(2)], engine(block=2, blocks=5))

    a, b = result.requests
    assert (a.first_token_s, a.finish_s, a.preemptions) == pytest.approx((0.016, 0.050, 0))
    assert (b.first_token_s, b.finish_s, b.preemptions) == pytest.approx((0.016, 0.076, 1))
    assert result.preemptions == 1
    assert result.steps == 6


def test_the_trace_records_each_step_as_the_scheduler_chose_it() -> None:
    # the two cases above, step by step: decodes, prefill chunks (request, tokens), preemptions
    budget = run([RequestSpec(i, 0.0, 6, 2) for i in range(3)], engine(budget=8), trace=True)
    full = run([RequestSpec(i, 0.0, 3, 4) for i in range(2)], engine(block=2, blocks=5), trace=True)

    assert [(s.decodes, s.prefills, s.preempted) for s in budget.trace] == [
        ((), ((0, 6), (1, 2)), ()),
        ((0,), ((1, 4), (2, 3)), ()),
        ((1,), ((2, 3),), ()),
        ((2,), (), ()),
    ]
    assert [s.start_s for s in budget.trace] == pytest.approx([0.0, 0.018, 0.036, 0.050])
    assert [(s.decodes, s.prefills, s.preempted) for s in full.trace] == [
        ((), ((0, 3), (1, 3)), ()),
        ((0, 1), (), ()),
        ((0,), (), (1,)),
        ((0,), (), ()),
        ((), ((1, 5),), ()),
        ((1,), (), ()),
    ]


def test_tracing_steps_through_decode_spans_without_changing_the_timeline() -> None:
    reqs = _workload(5, 200, 30.0, 50, 30)
    eng = engine(budget=32, seqs=8, block=4, blocks=60)

    fast = run(reqs, eng, ROOFLINE_LIKE)
    traced = run(reqs, eng, ROOFLINE_LIKE, trace=True)

    assert traced.steps == fast.steps == len(traced.trace)
    assert not fast.trace
    for a, b in zip(fast.requests, traced.requests, strict=True):
        assert (a.first_token_s, a.finish_s, a.preemptions) == pytest.approx(
            (b.first_token_s, b.finish_s, b.preemptions), rel=1e-9
        )
    assert sum(len(s.preempted) for s in traced.trace) == traced.preemptions > 0


def test_a_request_is_admitted_only_when_its_whole_prompt_fits_the_cache() -> None:
    # vLLM 0.34 (scheduler_reserve_full_isl): 10 usable blocks of 4 tokens, budget 8. A (8-token prompt,
    # 12 output) prefills in step 1 (18 ms) and decodes alone in steps 2-12 (11 ms each): it holds 3-5
    # blocks, so B's 32-token prompt (8 blocks) never fits beside it, though its first 7-token chunk
    # would. B starts when A is done (139 ms): four 8-token chunks (18 ms each), then its decode.
    # Admitting on the first chunk alone would have preempted B in step 6, when A needs its 4th block.
    reqs = [RequestSpec(0, 0.0, 8, 12), RequestSpec(1, 0.0, 32, 2)]
    result = run(reqs, engine(budget=8, block=4, blocks=11))

    a, b = result.requests
    assert a.finish_s == pytest.approx(0.018 + 11 * 0.011)
    assert (b.first_token_s, b.finish_s) == pytest.approx((0.139 + 4 * 0.018, 0.139 + 4 * 0.018 + 0.011))
    assert result.preemptions == 0


def test_max_num_seqs_holds_later_requests_back() -> None:
    # one sequence at a time: B starts only after A finished
    a, b = run([RequestSpec(i, 0.0, 4, 3) for i in range(2)], engine(seqs=1)).requests

    assert a.finish_s == pytest.approx(0.014 + 2 * 0.011)
    assert b.first_token_s == pytest.approx(a.finish_s + 0.014)


def test_the_request_overhead_adds_to_ttft_and_e2e_not_to_tpot() -> None:
    model = StepTimeModel(fixed_s=0.010, per_token_s=0.001, request_overhead_s=0.005)
    (r,) = run([RequestSpec(0, 0.0, 10, 5)], engine(), model).requests

    assert r.ttft_s == pytest.approx(0.025)
    assert r.tpot_s == pytest.approx(0.011)


def test_a_request_arriving_while_others_run_delays_them_by_its_server_work() -> None:
    # a server that handles each arriving request (HTTP, tokenising) in its step loop's process: 5 ms
    model = StepTimeModel(fixed_s=0.010, per_token_s=0.001, request_work_s=0.005)
    a, b = run([RequestSpec(0, 0.0, 10, 5), RequestSpec(1, 0.025, 10, 2)], engine(), model).requests

    # A alone: prefill 0-20 ms (no work: nothing ran when it arrived), decode 20-31 ms; B arrives at
    # 25 ms while A runs, so the next step waits for its work: 31 + 5 + (10 + 11·1) = 57 ms, A's second
    # token and B's first; then both decode (12 ms): 69 ms, B done; A's fifth and last: 80 ms
    assert a.first_token_s == pytest.approx(0.020)
    assert b.first_token_s == pytest.approx(0.057)
    assert b.finish_s == pytest.approx(0.069)
    assert a.finish_s == pytest.approx(0.080)


def test_a_request_arriving_at_an_idle_engine_costs_no_work() -> None:
    model = StepTimeModel(fixed_s=0.010, per_token_s=0.001, request_work_s=0.005)
    a, b = run([RequestSpec(0, 0.0, 10, 2), RequestSpec(1, 1.0, 10, 2)], engine(), model).requests

    assert b.ttft_s == pytest.approx(a.ttft_s) == pytest.approx(0.020)


def test_an_engine_idle_for_a_while_starts_later_by_its_measured_wake() -> None:
    # 2 ms after 100 ms of idle, 4 ms after 500 ms, interpolated between and held beyond
    model = StepTimeModel(fixed_s=0.010, per_token_s=0.001, wake=((0.1, 0.002), (0.5, 0.004)))
    assert model.wake_s(0.0) == 0.0 and model.wake_s(0.05) == pytest.approx(0.001)
    assert model.wake_s(0.3) == pytest.approx(0.003) and model.wake_s(9.0) == pytest.approx(0.004)
    reqs = [RequestSpec(0, 0.0, 10, 2), RequestSpec(1, 0.331, 10, 2)]
    reqs += [RequestSpec(2, 0.340, 10, 2), RequestSpec(3, 2.0, 10, 2)]
    a, b, c, d = run(reqs, engine(), model).requests

    # A arrives at an engine that was not idle before: prefill 0-20 ms, decode 20-31 ms. B comes 300 ms
    # after: 3 ms of wake, then its prefill: TTFT 23 ms (prefill 334-354 ms). C arrives while B runs: no
    # wake; it waits for B's step and shares the next (B's decode + its prompt: 21 ms): 375 − 340 ms.
    # D comes long after: the wake held at 4 ms.
    assert a.ttft_s == pytest.approx(0.020)
    assert b.ttft_s == pytest.approx(0.023)
    assert c.ttft_s == pytest.approx(0.035)
    assert d.ttft_s == pytest.approx(0.024)
    assert d.finish_s - d.first_token_s == pytest.approx(0.011)  # paid once, before its first step


def test_measured_decode_steps_beyond_the_linear_terms_are_added_by_decode_count() -> None:
    model = StepTimeModel(fixed_s=0.010, per_seq_s=0.001, decode_excess_s=(0.0, 0.004))
    a, b = run([RequestSpec(0, 0.0, 1, 3), RequestSpec(1, 0.0, 1, 3)], engine(), model).requests

    # step 1: both prompts (0 decodes: no excess), 12 ms; steps 2-3: 2 decodes, 12 + 4 ms each
    assert a.first_token_s == pytest.approx(0.012)
    assert a.finish_s == b.finish_s == pytest.approx(0.012 + 2 * 0.016)
    assert model.step_s(5, 5, 5, decodes=5) == pytest.approx(0.010 + 0.005 + 0.004)  # the last holds


def test_closed_loop_keeps_the_concurrency_and_starts_the_next_on_each_completion() -> None:
    reqs = [RequestSpec(i, math.nan, 4, 2) for i in range(4)]
    result = run(reqs, engine(), concurrency=2)

    r = result.requests
    # 0 and 1 prefill together (8 tokens, 18 ms), decode together (12 ms) and finish at 30 ms
    assert r[0].finish_s == pytest.approx(0.030) and r[1].finish_s == pytest.approx(0.030)
    assert r[2].arrival_s == pytest.approx(0.030) and r[3].arrival_s == pytest.approx(0.030)
    assert r[3].finish_s == pytest.approx(0.060)
    assert result.max_running == 2


def test_an_overloaded_replica_is_unstable() -> None:
    # each request needs ≥ 15 ms of steps; 1000 req/s cannot be served
    reqs = [RequestSpec(i, i * 0.001, 8, 4) for i in range(2000)]
    result = simulate(reqs, engine(), FLAT)

    assert not result.stable
    assert math.isinf(result.ttft.p99)
    assert not result.to_prediction(1.0).stable


def test_bad_input_is_refused_with_the_field_named() -> None:
    with pytest.raises(InvalidInput, match="max_model_len"):
        simulate([RequestSpec(0, 0.0, 4000, 200)], engine(max_len=4096), FLAT)
    with pytest.raises(InvalidInput, match="num_gpu_blocks"):
        simulate([RequestSpec(0, 0.0, 40, 10)], engine(block=4, blocks=5), FLAT)
    with pytest.raises(InvalidInput, match="concurrency"):
        simulate([RequestSpec(0, math.nan, 4, 4)], engine(), FLAT)


# --- against a step-by-step reference -----------------------------------------------------------


def reference(
    reqs: list[RequestSpec], eng: EngineParams, model: StepTimeModel, concurrency: int | None = None
):
    """vLLM 0.34's V1 FCFS, step by step: returns [(first, finish, preemptions)] in request order."""
    n = len(reqs)
    st = V1State.of([r.prompt_tokens for r in reqs], [r.output_tokens for r in reqs])
    if concurrency is None:
        arrival = [r.arrival_s for r in reqs]
    else:
        arrival = [0.0 if i < concurrency else math.nan for i in range(n)]
    first, finish = [math.nan] * n, [math.nan] * n
    t, nxt = 0.0, 0
    released = concurrency if concurrency is not None else n

    while True:
        while nxt < released and (concurrency is not None or arrival[nxt] <= t):
            st.waiting.append(nxt)
            nxt += 1
        if not st.running and not st.waiting:
            if concurrency is not None or nxt >= n:
                break
            t = arrival[nxt]
            continue
        sched, _ = schedule_step(st, eng)
        dec = [i for i, _ in sched if i in st.decoding]
        chunks = [(i, k) for i, k in sched if i not in st.decoding]
        ctx = sum(st.prompt[i] + st.generated[i] for i in dec)
        pairs = sum(causal_pairs(st.computed[i], k) for i, k in chunks)
        done = [i for i, k in chunks if st.computed[i] + k >= st.need[i]]
        tokens = len(dec) + sum(k for _, k in chunks)
        t += model.step_s(tokens, len(sched), len(dec) + len(done), ctx, pairs)
        for i, k in chunks:
            st.computed[i] += k
        for i in dec + done:
            st.generated[i] += 1
            if math.isnan(first[i]):
                first[i] = t
            if i in done:
                st.decoding.add(i)
            if st.generated[i] >= st.out[i]:
                finish[i] = t
                st.running.remove(i)
                st.decoding.discard(i)
                st.held[i] = 0
                if concurrency is not None and released < n:
                    arrival[released] = t
                    released += 1
    extra = model.request_overhead_s
    return [(f + extra, e + extra, p) for f, e, p in zip(first, finish, st.preemptions, strict=True)]


ROOFLINE_LIKE = StepTimeModel(
    fixed_s=0.002,
    weights_s=0.004,
    gemm_s_per_token=1e-5,
    head_s_per_sample=2e-6,
    per_seq_s=1e-5,
    kv_s_per_token=3e-7,
    attn_s_per_pair=1e-9,
    comm_s_per_step=1e-4,
    comm_s_per_token=1e-7,
    request_overhead_s=0.001,
)


def _workload(seed: int, n: int, rate: float, max_prompt: int, max_out: int) -> list[RequestSpec]:
    rng = random.Random(seed)
    t, out = 0.0, []
    for i in range(n):
        t += rng.expovariate(rate)
        out.append(RequestSpec(i, t, rng.randint(1, max_prompt), rng.randint(1, max_out)))
    return out


@pytest.mark.parametrize(
    ("seed", "budget", "seqs", "block", "blocks", "rate"),
    [
        (1, 64, 8, 4, 10_000, 20.0),  # roomy cache: the fast path only
        (2, 32, 4, 4, 10_000, 60.0),  # budget and max_num_seqs binding, queues
        (3, 64, 16, 4, 60, 40.0),  # a cache that fills: preemption and recompute
        (4, 16, 16, 2, 41, 80.0),  # everything tight at once
    ],
)
def test_simulation_matches_the_step_by_step_reference(
    seed: int, budget: int, seqs: int, block: int, blocks: int, rate: float
) -> None:
    reqs = _workload(seed, 300, rate, 50, 30)
    eng = engine(budget=budget, seqs=seqs, block=block, blocks=blocks)

    got = run(reqs, eng, ROOFLINE_LIKE, abort_backlog=len(reqs))  # overloaded cases too
    want = reference(reqs, eng, ROOFLINE_LIKE)

    for r, (f, e, p) in zip(got.requests, want, strict=True):
        assert r.first_token_s == pytest.approx(f, rel=1e-9), r
        assert r.finish_s == pytest.approx(e, rel=1e-9), r
        assert r.preemptions == p, r
    if blocks < 100:
        assert got.preemptions > 0  # the case really exercised preemption


def test_closed_loop_matches_the_reference() -> None:
    rng = random.Random(7)
    reqs = [RequestSpec(i, math.nan, rng.randint(1, 40), rng.randint(1, 20)) for i in range(200)]
    eng = engine(budget=32, seqs=8, block=4, blocks=40)

    got = run(reqs, eng, ROOFLINE_LIKE, concurrency=6)
    want = reference(reqs, eng, ROOFLINE_LIKE, concurrency=6)

    for r, (f, e, p) in zip(got.requests, want, strict=True):
        assert (r.first_token_s, r.finish_s, r.preemptions) == pytest.approx((f, e, p), rel=1e-9), r


# --- capacity and the replica search ------------------------------------------------------------


def test_fluid_capacity_is_where_the_simulation_saturates() -> None:
    eng = engine(budget=256, seqs=32, block=16, blocks=10_000)
    cap = fluid_capacity_rps(eng, ROOFLINE_LIKE, 64, 32)
    traffic = TrafficShape(LengthDist("fixed", 64), LengthDist("fixed", 32), requests=1500)

    assert simulate(traffic.at_rate(0.5 * cap), eng, ROOFLINE_LIKE).stable
    assert not simulate(traffic.at_rate(1.3 * cap), eng, ROOFLINE_LIKE).stable


def test_fluid_capacity_prices_the_measured_decode_steps_as_the_simulation_does() -> None:
    from dataclasses import replace

    eng = engine(budget=256, seqs=32, block=16, blocks=10_000)
    slower = replace(ROOFLINE_LIKE, decode_excess_s=(0.0, 0.002, 0.004))
    cap = fluid_capacity_rps(eng, slower, 64, 32)

    assert cap < fluid_capacity_rps(eng, ROOFLINE_LIKE, 64, 32)
    traffic = TrafficShape(LengthDist("fixed", 64), LengthDist("fixed", 32), requests=1500)
    assert not simulate(traffic.at_rate(1.3 * cap), eng, slower).stable


def test_fewest_replicas_is_the_smallest_count_that_meets_the_target() -> None:
    eng = engine(budget=256, seqs=32, block=16, blocks=10_000)
    traffic = TrafficShape(LengthDist("uniform", 16, 128), LengthDist("uniform", 8, 64), requests=800)
    replica = ReplicaModel(eng, ROOFLINE_LIKE, traffic)
    rate = 6 * replica.capacity_rps

    def meets(p):  # type: ignore[no-untyped-def]
        return p.stable and p.tpot.p99 <= 0.012

    count, pred = replica.fewest_replicas(rate, meets, max_replicas=64)

    assert count >= 6
    assert meets(pred)
    assert not meets(replica.at_rate(rate / (count - 1)))
    before = replica.simulations
    replica.at_rate(rate / count)
    assert replica.simulations == before  # cached
