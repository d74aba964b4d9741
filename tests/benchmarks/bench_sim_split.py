"""The serving simulation before and after its split (issue 34 item 5): same predictions, and its cost.

``planner/engine_sim.py`` at commit ``BEFORE`` (one 398-line ``simulate`` whose state lived in local
variables and closures, read with ``git show``) against today's (``simulate`` over
``planner/sim_replica.SimulatedReplica``, one method per kind of event, the state in attributes):

1. **Same predictions.** Every workload below gives the same ``ServingPrediction`` from both (compared
   by value, the step trace included where it is kept).
2. **One simulation**: llama-3.1-8b on one H100 (vLLM's defaults, roofline step model), 1024/128 tokens,
   1,200 Poisson requests at 25%, 50% and 80% of the fluid capacity, and at 80% with a KV cache a tenth of
   its size (preemption, every block counted).
3. **A plan**: ``gpuplace plan``'s work on the bundled mixed fleet (every shape priced with the serving
   model, the fewest replicas searched), the planner's ``simulate`` swapped for the old one.
4. **Random workloads** (``--random N``, seeded): open and closed loops, multi-step and asynchronous
   scheduling, KV caches small enough to preempt, step traces, a backlog limit; each must give the same
   prediction from both. The script exits non-zero when any workload differs.

Timings are interleaved (old, new, old, new, ...) ``--repeats`` times; the ratio new ÷ old of each pair,
its median and the 10th–90th percentile of the pairs are reported, so the machine's drift (a shared
2-core VM) falls on both sides. Writes docs/benchmarks/sim_split.{md,json}.

Run: `.venv/bin/python tests/benchmarks/bench_sim_split.py --repeats 15 --random 1500`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "benchmarks"))

from bench_engine_sim import llama_on_h100  # noqa: E402
from bench_vllm_scheduler import _engine_sim_at  # noqa: E402

OUT = REPO / "docs" / "benchmarks"
BEFORE = "ab6f4f17dff0bf0c21cced7c6a35742c5323bcaf"  # main before the split


def _quantile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def interleaved(old: Callable[[], Any], new: Callable[[], Any], repeats: int) -> dict[str, float]:
    """Median seconds of each and the new ÷ old ratio of each interleaved pair."""
    olds, news = [], []
    for _ in range(repeats):
        for fn, times in ((old, olds), (new, news)):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    ratios = [n / o for o, n in zip(olds, news, strict=True)]
    return {
        "old_s": statistics.median(olds),
        "new_s": statistics.median(news),
        "ratio": statistics.median(ratios),
        "ratio_p10": _quantile(ratios, 0.1),
        "ratio_p90": _quantile(ratios, 0.9),
    }


def workloads() -> list[tuple[str, Any, Any, Any]]:
    engine, model, traffic, capacity = llama_on_h100()
    loads = [
        (f"{load:.0%} of capacity", traffic.at_rate(load * capacity), engine, model)
        for load in (0.25, 0.5, 0.8)
    ]
    tight = replace(engine, num_gpu_blocks=engine.num_gpu_blocks // 10)
    return [*loads, ("80%, a tenth of the KV cache", traffic.at_rate(0.8 * capacity), tight, model)]


def plan_once() -> Any:
    from gpuplace.catalog import load_gpu_catalog, model_arch_from_config, resolve_model
    from gpuplace.catalog.efficiency import load_efficiency_table
    from gpuplace.inventory import load_inventory
    from gpuplace.planner import plan_placement
    from gpuplace.steps.plan_params import plan_request

    catalog = load_gpu_catalog()
    params = {"model": "llama-3.1-8b", "slo_tpot_ms": 50, "slo_ttft_ms": 2000, "rate": 20.0}
    request = plan_request({**params, "prompt_tokens": "512", "output_tokens": "128"}, catalog)
    arch = model_arch_from_config("llama-3.1-8b", resolve_model("llama-3.1-8b").config)
    inventory = load_inventory("mixed-a100-h100-l4", catalog=catalog)
    return plan_placement(arch, inventory, catalog, request, efficiency=load_efficiency_table())


def random_workloads(n: int, seed: int = 0) -> list[tuple[Any, Any, Any, dict[str, Any]]]:
    """``n`` seeded workloads that reach every path of the simulation: (requests, engine, step model,
    simulate's keywords)."""
    import random

    from gpuplace.workload import LengthDist, synthetic

    rng = random.Random(seed)
    engine, model, _, capacity = llama_on_h100()
    out = []
    for i in range(n):
        mode = rng.choice(["plain", "multi", "async"])
        blocks = engine.num_gpu_blocks // rng.choice([1, 1, 4, 20, 60])
        e = replace(
            engine,
            num_gpu_blocks=max(blocks, 64),
            max_num_seqs=rng.choice([8, 64, 256]),
            max_num_batched_tokens=rng.choice([512, 2048, 8192]),
            num_scheduler_steps=rng.choice([4, 10]) if mode == "multi" else 1,
            async_scheduling=mode == "async",
        )
        prompt = LengthDist("uniform", rng.randint(8, 256), rng.randint(257, 3000))
        output = LengthDist("uniform", rng.randint(1, 16), rng.randint(17, 400))
        closed = rng.random() < 0.3
        rate = None if closed else rng.uniform(0.1, 1.5) * capacity
        requests = synthetic(rng.randint(20, 300), prompt, output, rate=rate, seed=i)
        kw: dict[str, Any] = {"keep_requests": True, "trace": rng.random() < 0.2}
        if closed:
            kw["concurrency"] = rng.choice([1, 4, 32, 128])
        elif rng.random() < 0.2:
            kw["abort_backlog"] = rng.choice([8, 32])
        out.append((requests, e, model, kw))
    return out


def differential(old: Any, n: int) -> dict[str, int]:
    """How many of ``n`` random workloads give the same prediction from both, and what they reached."""
    from gpuplace.planner.engine_sim import simulate

    counts = {"workloads": n, "same": 0, "closed": 0, "multi_step": 0, "async": 0, "preempted": 0}
    counts |= {"traced": 0, "unstable": 0}
    for requests, engine, model, kw in random_workloads(n):
        after = simulate(requests, engine, model, **kw)
        counts["same"] += repr(old.simulate(requests, engine, model, **kw)) == repr(after)
        counts["closed"] += "concurrency" in kw
        counts["multi_step"] += engine.num_scheduler_steps > 1
        counts["async"] += engine.async_scheduling
        counts["preempted"] += after.preemptions > 0
        counts["traced"] += kw["trace"]
        counts["unstable"] += not after.stable
    return counts


def _candidates(plan: Any) -> str:
    """Every shape's verdict, replicas and prediction (by value: NaN compares equal in a repr)."""
    return repr([(c.label, c.verdict, c.replicas, c.miss, c.prediction) for c in plan.candidates])


def run(repeats: int, n_random: int) -> dict[str, Any]:
    import gpuplace.planner.replica as replica
    from gpuplace.planner.engine_sim import simulate

    old = _engine_sim_at(BEFORE)
    if old is None:
        raise SystemExit(f"commit {BEFORE} is not in this clone's history")
    rows = []
    for name, requests, engine, model in workloads():
        before = old.simulate(requests, engine, model, keep_requests=True)
        after = simulate(requests, engine, model, keep_requests=True)
        traced = repr(old.simulate(requests[:300], engine, model, trace=True)) == repr(
            simulate(requests[:300], engine, model, trace=True)
        )
        timing = interleaved(
            lambda r=requests, e=engine, m=model: old.simulate(r, e, m),
            lambda r=requests, e=engine, m=model: simulate(r, e, m),
            repeats,
        )
        rows.append(
            {"workload": name, "same": repr(before) == repr(after) and traced, "steps": after.steps, **timing}
        )
        print(f"{name}: same {rows[-1]['same']}, new/old {timing['ratio']:.2f}", flush=True)
    new_simulate = replica.simulate

    def with_old() -> Any:
        replica.simulate = old.simulate
        try:
            return plan_once()
        finally:
            replica.simulate = new_simulate

    same_plan = _candidates(with_old()) == _candidates(plan_once())
    plan = {"same": same_plan, **interleaved(with_old, plan_once, max(3, repeats // 3))}
    print(f"plan: same {same_plan}, new/old {plan['ratio']:.2f}", flush=True)
    random_check = differential(old, n_random)
    print(f"random workloads: same on {random_check['same']} of {n_random}", flush=True)
    return {"before": BEFORE, "repeats": repeats, "rows": rows, "plan": plan, "random": random_check}


def markdown(data: dict[str, Any]) -> str:
    def cells(r: dict[str, Any]) -> str:
        return (
            f"{'yes' if r['same'] else '**no**'} | {r['old_s'] * 1e3:,.1f} ms | {r['new_s'] * 1e3:,.1f} ms | "
            f"{r['ratio']:.2f} | {r['ratio_p10']:.2f}–{r['ratio_p90']:.2f} |"
        )

    lines = [
        "# The serving simulation before and after its split (issue 34 item 5)",
        "",
        f"Produced by `.venv/bin/python tests/benchmarks/bench_sim_split.py --repeats {data['repeats']} "
        f"--random {data['random']['workloads']}` on "
        f"{data['date']} (load average {data['load_average']:.1f} at the start), on a 2-core machine shared "
        f"with other jobs. Before: `planner/engine_sim.py` at `{data['before'][:7]}` (one 398-line "
        "`simulate`, its state in local variables and closures). After: `simulate` over "
        "`planner/sim_replica.SimulatedReplica` (one method per kind of event, the state in attributes). "
        "Interleaved runs; the ratio is new ÷ old per pair (median, and the 10th–90th percentile of the "
        "pairs).",
        "",
        "| workload | same prediction | before | after | after ÷ before | pairs p10–p90 |",
        "|---|---|---|---|---|---|",
    ]
    lines += [f"| {r['workload']} ({r['steps']:,} steps) | {cells(r)}" for r in data["rows"]]
    lines.append(f"| a plan: llama-3.1-8b on the mixed fleet at 20 req/s | {cells(data['plan'])}")
    lines += [
        "",
        "The simulations are llama-3.1-8b on one H100-SXM5-80GB (vLLM's defaults, the roofline step model), "
        '1,200 Poisson requests of 1024/128 tokens; "same prediction" compares the whole '
        "`ServingPrediction` (every request's times kept, and the step trace of the first 300 requests).",
        "",
    ]
    r = data["random"]
    lines += [
        f"**Random workloads** (`--random {r['workloads']}`, seeded): the same prediction on **{r['same']} of "
        f"{r['workloads']}**. They reached closed loops ({r['closed']}), multi-step scheduling "
        f"({r['multi_step']}), asynchronous scheduling ({r['async']}), preemption ({r['preempted']}), step "
        f"traces ({r['traced']}) and runs that did not keep up ({r['unstable']}).",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--random", type=int, default=300, help="random workloads checked (default 300)")
    args = parser.parse_args()
    data = {
        "date": datetime.date.today().isoformat(),
        "load_average": os.getloadavg()[0],
        **run(args.repeats, args.random),
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "sim_split.json").write_text(json.dumps(data, indent=2) + "\n")
    (OUT / "sim_split.md").write_text(markdown(data))
    print(f"wrote {OUT / 'sim_split.md'}")
    same = all(r["same"] for r in data["rows"]) and data["plan"]["same"]
    same = same and data["random"]["same"] == data["random"]["workloads"]
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
