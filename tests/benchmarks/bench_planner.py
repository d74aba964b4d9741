"""Planner benchmarks (issue: inventory, planner, placement specs). Writes docs/benchmarks/planner.{md,json}.

1. Fragmentation on the Alibaba trace (Weng et al., ATC'23, cluster-trace-gpu-v2023): each pod-list
   variant is replayed onto the 1,213-node GPU node list under every policy (gpuplace, FGD, best-fit,
   GPU packing, dot-product, random-fit), arrivals until demand reaches ``--until`` × capacity; the
   figure is the share of GPU capacity unallocated when arrivals reach 100%. Seeds 0..N-1 with
   N = ``--seeds`` (default 1, and arrivals stop at 100% (``--until 1.0``) to keep ``make bench`` short;
   the paper uses 10 seeds and 130%).
2. Speed: planning llama-3.1-8b against the 1,213-node fleet, and scoring one pod (a 1-GPU replica)
   against every node, medians over repeats.

Run: `make bench`, or `.venv/bin/python tests/benchmarks/bench_planner.py --seeds 10` for the full run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "unit"))
SHARED_DATA = Path(os.environ.get("GPUPLACE_SHARED_DATA", REPO.parent / "shared" / "data"))
TRACE = SHARED_DATA / "alibaba-gpu-v2023"
OUT = REPO / "docs" / "benchmarks"
VARIANTS = ("default", "gpushare40", "multigpu20", "gpuspec33")
POLICIES = ("gpuplace", "fgd", "bestfit", "packing", "dotprod", "random")


def fragmentation(seeds: int, until: float) -> dict[str, dict[str, dict[str, object]]]:
    from gpuplace.planner.commands import run_fragmentation_bench

    nodes = TRACE / "openb_node_list_gpu_node.csv"
    return {
        v: run_fragmentation_bench(
            nodes, TRACE / f"openb_pod_list_{v}.csv", list(POLICIES), seeds, until=until
        )
        for v in VARIANTS
    }


def speed(repeats: int = 7) -> dict[str, float]:
    from test_planner import synthetic_profile

    from gpuplace.catalog import load_gpu_catalog
    from gpuplace.inventory import load_inventory
    from gpuplace.planner import PlanRequest, plan_placement
    from gpuplace.planner.fragmentation import DEFAULT_LLM_MIX, FragmentationModel
    from gpuplace.planner.placement import FleetState, choose
    from gpuplace.types.plan import Slo

    catalog = load_gpu_catalog()
    inventory = load_inventory(str(TRACE / "openb_node_list_gpu_node.csv"), catalog=catalog)
    profile = synthetic_profile("llama-3.1-8b")
    request = PlanRequest("llama-3.1-8b", Slo(0.1, 5.0, 2.0))
    plan_s, score_s = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        plan = plan_placement(profile, inventory, catalog, request)
        plan_s.append(time.perf_counter() - t0)
        # A fresh model each time: no memo carried over from the previous repeat.
        state = FleetState.of(inventory.nodes, FragmentationModel(DEFAULT_LLM_MIX))
        t0 = time.perf_counter()
        choose(state, inventory.nodes, gpu="V100-SXM2-32GB", kind="whole", tp=1)
        score_s.append(time.perf_counter() - t0)
    return {
        "nodes": len(inventory.nodes),
        "plan_median_s": statistics.median(plan_s),
        "score_one_pod_all_nodes_median_s": statistics.median(score_s),
        "chosen": plan.chosen.label,
    }


def markdown(
    frag: dict[str, dict[str, dict[str, object]]],
    spd: dict[str, float],
    seeds: int,
    until: float,
    wall_s: float,
) -> str:
    lines = [
        "# Planner benchmarks",
        "",
        f"Produced by `.venv/bin/python tests/benchmarks/bench_planner.py --seeds {seeds} --until {until}` "
        "(`make bench` runs it with the defaults `--seeds 1 --until 1.0`; the paper's protocol is `--seeds 10 --until 1.3`) "
        f"in {wall_s / 60:.1f} min on a 2-core machine. Seeds: 0..{seeds - 1}. Trace: Alibaba "
        'cluster-trace-gpu-v2023 (Weng et al., "Beware of Fragmentation", USENIX ATC\'23), 1,213 GPU nodes, 6,212 GPUs.',
        "",
        "## Fragmentation: unallocated GPU capacity when arrived demand reaches 100% of capacity",
        "",
        "Lower is better. Ratios are against FGD measured in the same run. Definitions: docs/placement.md.",
        "",
        "| trace variant | " + " | ".join(POLICIES) + " |",
        "|---|" + "---:|" * len(POLICIES),
    ]
    for v, res in frag.items():
        fgd = float(res["fgd"]["unallocated_share"])  # type: ignore[arg-type]
        cells = []
        for p in POLICIES:
            share = float(res[p]["unallocated_share"])  # type: ignore[arg-type]
            cells.append(f"{share * 100:.2f}% ({share / fgd:.2f}×)")
        lines.append(f"| {v} | " + " | ".join(cells) + " |")
    wins = [
        v
        for v, r in frag.items()
        if float(r["gpuplace"]["unallocated_share"]) <= float(r["fgd"]["unallocated_share"])
    ]  # type: ignore[arg-type]
    losses = [v for v in frag if v not in wins]
    lines += [
        "",
        f"gpuplace at or below FGD on: {', '.join(wins) or 'none'}; above FGD on: {', '.join(losses) or 'none'}.",
        "",
        "Policies that left less unallocated than gpuplace, per variant: "
        + "; ".join(
            f"{v}: {', '.join(p for p in POLICIES if float(r[p]['unallocated_share']) < float(r['gpuplace']['unallocated_share'])) or 'none'}"  # type: ignore[arg-type]
            for v, r in frag.items()
        )
        + ".",
        "",
        "How to read this: gpuplace's scoring is FGD's fragmentation increase with GPU packing and "
        "least-GPU-left as tie-breakers. The paper reports FGD ahead of every baseline; where a baseline is "
        "below FGD in the table, this replay does not reproduce that ordering. Known differences from the "
        "paper's simulator: CPU and GPU only (no memory), exact float scores instead of scores normalised to "
        "0-100 integers (fewer random ties), the trace re-shuffled and replayed when exhausted to reach the "
        "demand, and baselines that put shared tasks on the least sufficient GPU. One seed is noisy: run "
        "`--seeds 10 --until 1.3` before drawing conclusions.",
        "",
        "## Speed",
        "",
        f"- plan llama-3.1-8b against the {spd['nodes']}-node fleet: median {spd['plan_median_s'] * 1000:.1f} ms (goal < 1 s); chose {spd['chosen']}",
        f"- score one 1-GPU pod against all {spd['nodes']} nodes (cold memo): median {spd['score_one_pod_all_nodes_median_s'] * 1000:.2f} ms (goal < 5 ms)",
        "",
        "Raw figures, per-seed values and the curves at 50–130% demand: `docs/benchmarks/planner.json`.",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--until", type=float, default=1.0, help="1.3 replays to 130%% as the paper does")
    args = parser.parse_args()
    if not (TRACE / "openb_node_list_gpu_node.csv").is_file():
        print(
            f"bench_planner: the Alibaba trace is missing at {TRACE} (see shared/data/README.md)",
            file=sys.stderr,
        )
        return 1
    t0 = time.monotonic()
    spd = speed()
    print(f"speed: {spd}", flush=True)
    frag = fragmentation(args.seeds, args.until)
    wall = time.monotonic() - t0
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "planner.json").write_text(
        json.dumps({"seeds": args.seeds, "fragmentation": frag, "speed": spd}, indent=2) + "\n"
    )
    (OUT / "planner.md").write_text(markdown(frag, spd, args.seeds, args.until, wall))
    print((OUT / "planner.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
