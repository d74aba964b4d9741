"""Cost of the serving model (issue 11): the continuous-batching simulation, alone and as a plan uses it.

1. One simulation: llama-3.1-8b on one H100 (vLLM defaults), 1024/128 tokens, Poisson arrivals at 25%,
   50% and 80% of the replica's fluid capacity, 1,200 requests; median of ``--repeats`` runs.
2. A plan's serving-model work: for every shape a fleet offers (the planner's own enumeration), build
   the engine parameters and step-time model, then find the fewest replicas meeting p99 TPOT ≤ 50 ms
   and p99 TTFT ≤ 2 s at 20 req/s (512/128 tokens, 1,200 requests per simulation) by the search in
   :class:`~gpuplace.planner.engine_sim.ReplicaModel`. Fleets: the two bundled ones and the 1,213-node
   Alibaba trace. Goals once integrated into the planner: < 1 s per plan on the bundled fleets, < 3 s
   on the Alibaba one (this is the serving model's share; placement adds the rest).

A same-run baseline (a fixed pure-Python loop) is timed beside, so figures from a loaded machine can be
read against its speed at that moment. Writes docs/benchmarks/engine_sim.{md,json}.

Run: `.venv/bin/python tests/benchmarks/bench_engine_sim.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "unit"))
SHARED_DATA = Path(os.environ.get("GPUPLACE_SHARED_DATA", REPO.parent / "shared" / "data"))
ALIBABA = SHARED_DATA / "alibaba-gpu-v2023" / "openb_node_list_gpu_node.csv"
OUT = REPO / "docs" / "benchmarks"


def baseline_s() -> float:
    """A fixed pure-Python workload (1M loop iterations of float arithmetic): the machine's pace now."""
    t0 = time.perf_counter()
    acc = 0.0
    for i in range(1_000_000):
        acc += i * 1e-9
    return time.perf_counter() - t0


def llama_on_h100() -> tuple[Any, Any, Any, float]:
    """llama-3.1-8b on one H100 with vLLM's defaults and the roofline step model, 1024/128-token traffic of
    1,200 requests: (engine parameters, step model, traffic, fluid capacity in req/s)."""
    from gpuplace.catalog import load_gpu_catalog, model_arch_from_config, resolve_model
    from gpuplace.catalog.efficiency import load_efficiency_table
    from gpuplace.planner.engine import vllm_engine_params
    from gpuplace.planner.hardware import ReplicaHardware
    from gpuplace.planner.replica import ReplicaModel, TrafficShape
    from gpuplace.planner.steptime import roofline_step_model
    from gpuplace.workload import LengthDist

    spec = load_gpu_catalog().get("H100-SXM5-80GB")
    arch = model_arch_from_config("llama-3.1-8b", resolve_model("llama-3.1-8b").config)
    model = roofline_step_model(arch, ReplicaHardware(spec), load_efficiency_table().for_gpu(spec, arch))
    engine = vllm_engine_params(arch, spec)
    traffic = TrafficShape(LengthDist("fixed", 1024), LengthDist("fixed", 128), requests=1200)
    return engine, model, traffic, ReplicaModel(engine, model, traffic).capacity_rps


def one_simulation(repeats: int) -> dict[str, Any]:
    from gpuplace.planner.engine_sim import simulate

    engine, model, traffic, capacity = llama_on_h100()
    rows = []
    for load in (0.25, 0.5, 0.8):
        requests = traffic.at_rate(load * capacity)
        times, result = [], None
        for _ in range(repeats):
            t0 = time.perf_counter()
            result = simulate(requests, engine, model)
            times.append(time.perf_counter() - t0)
        assert result is not None
        rows.append(
            {
                "load": load,
                "rate_rps": load * capacity,
                "median_s": statistics.median(times),
                "steps": result.steps,
                "stable": result.stable,
                "ttft_p99_s": result.ttft.p99,
                "tpot_p99_s": result.tpot.p99,
            }
        )
    return {"capacity_rps": capacity, "requests": traffic.requests, "rows": rows}


def plan_work(inventory_source: str, repeats: int) -> dict[str, Any]:
    """The whole plan, as `gpuplace plan` computes it (no profile: GPU-class efficiency defaults): every
    shape of the fleet priced with the serving model, the fewest replicas searched for each, placement."""
    from gpuplace.catalog import load_gpu_catalog, model_arch_from_config, resolve_model
    from gpuplace.catalog.efficiency import load_efficiency_table
    from gpuplace.inventory import load_inventory
    from gpuplace.planner import plan_placement
    from gpuplace.steps.plan_params import plan_request

    catalog = load_gpu_catalog()
    table = load_efficiency_table()
    inventory = load_inventory(inventory_source, catalog=catalog)
    params = {"model": "llama-3.1-8b", "slo_tpot_ms": 50, "slo_ttft_ms": 2000, "rate": 20.0}
    request = plan_request({**params, "prompt_tokens": "512", "output_tokens": "128"}, catalog)
    arch = model_arch_from_config("llama-3.1-8b", resolve_model("llama-3.1-8b").config)
    walls, plan = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        plan = plan_placement(arch, inventory, catalog, request, efficiency=table)
        walls.append(time.perf_counter() - t0)
    assert plan is not None
    feasible = [c for c in plan.candidates if c.verdict in ("chosen", "feasible")]
    return {
        "inventory": Path(inventory_source).name,
        "nodes": len(inventory.nodes),
        "shapes": len(plan.candidates),
        "median_s": statistics.median(walls),
        "chosen": plan.chosen.label,
        "feasible": [c.label for c in feasible],
    }


def markdown(data: dict[str, Any]) -> str:
    one = data["one_simulation"]
    lines = [
        "# Serving-model benchmarks: the cost of the continuous-batching simulation",
        "",
        f"Produced by `.venv/bin/python tests/benchmarks/bench_engine_sim.py --repeats {data['repeats']}` "
        f"on a 2-core machine shared with other jobs (load average {data['load_average']:.1f} at the start). "
        f"Same-run baseline: a fixed 1M-iteration Python loop took {data['baseline_s'] * 1e3:.0f} ms "
        "(median), so figures scale with that pace.",
        "",
        "## One simulation",
        "",
        f"llama-3.1-8b on one H100-SXM5-80GB with vLLM's defaults, 1024 prompt / 128 output tokens, Poisson "
        f"arrivals, {one['requests']} requests; fluid capacity {one['capacity_rps']:.1f} req/s.",
        "",
        "| load | rate (req/s) | median time | engine steps simulated | p99 TTFT | p99 TPOT |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in one["rows"]:
        lines.append(
            f"| {r['load']:.0%} | {r['rate_rps']:.1f} | {r['median_s'] * 1e3:.1f} ms | {r['steps']:,} | "
            f"{r['ttft_p99_s'] * 1e3:.0f} ms | {r['tpot_p99_s'] * 1e3:.1f} ms |"
        )
    lines += [
        "",
        "## One whole plan",
        "",
        "`plan_placement` as `gpuplace plan` runs it without a profile (GPU-class efficiency defaults): "
        "llama-3.1-8b, 512/128 tokens at 20 req/s, SLO p99 TPOT ≤ 50 ms and p99 TTFT ≤ 2 s; every shape of "
        "the fleet priced with the serving model (fewest replicas by search up from the fluid capacity "
        "bound, 1,200 simulated requests each), then placed. Goal: < 1 s on the bundled fleets, < 3 s on "
        "the Alibaba fleet.",
        "",
        "| fleet | nodes | shapes | median time | goal | chosen | shapes that meet the SLO |",
        "|---|---:|---:|---:|---|---|---|",
    ]
    for p in data["plans"]:
        goal = 3.0 if p["nodes"] > 100 else 1.0
        verdict = "met" if p["median_s"] < goal else "**missed**"
        lines.append(
            f"| {p['inventory']} | {p['nodes']} | {p['shapes']} | {p['median_s'] * 1e3:.0f} ms | "
            f"< {goal:g} s: {verdict} | {p['chosen']} | {', '.join(p['feasible']) or 'none'} |"
        )
    lines += [
        "",
        "How it is fast: decode-only spans between events are jumped over in closed form, per-request state "
        "changes only at its own events, KV blocks are counted exactly only when an upper bound says the "
        "cache could be full, each per-replica rate is simulated once per shape, and the replica search "
        "starts at the fluid capacity bound (usually one or two simulations per shape). Shapes whose "
        "weights do not fit are rejected before any simulation.",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    data: dict[str, Any] = {
        "repeats": args.repeats,
        "load_average": os.getloadavg()[0],
        "baseline_s": statistics.median(baseline_s() for _ in range(5)),
    }
    data["one_simulation"] = one_simulation(args.repeats)
    print(json.dumps(data["one_simulation"], indent=1), flush=True)
    fleets = [
        str(REPO / "src" / "gpuplace" / "inventory" / "data" / "h100-nvlink.yaml"),
        str(REPO / "src" / "gpuplace" / "inventory" / "data" / "mixed-a100-h100-l4.yaml"),
    ]
    if ALIBABA.is_file():
        fleets.append(str(ALIBABA))
    else:
        print(f"bench_engine_sim: the Alibaba trace is missing at {ALIBABA}; skipped", file=sys.stderr)
    data["plans"] = []
    for fleet in fleets:
        data["plans"].append(plan_work(fleet, max(1, args.repeats // 2)))
        print(json.dumps(data["plans"][-1]), flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "engine_sim.json").write_text(json.dumps(data, indent=2) + "\n")
    (OUT / "engine_sim.md").write_text(markdown(data))
    print((OUT / "engine_sim.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
