"""Planner benchmarks (issues 5 and 13). Writes docs/benchmarks/planner.{md,json}.

1. Fragmentation on the Alibaba trace (Weng et al., ATC'23, cluster-trace-gpu-v2023) under the FGD
   paper's protocol as its simulator runs it (``gpuplace bench fragmentation --protocol paper``,
   :mod:`gpuplace.fgd.paperreplay`): each of the four bundled pod-list variants, 1,213 GPU nodes,
   every policy (gpuplace, FGD, BestFit, GpuPacking, GpuClustering, DotProd, Random), seeds 42..51;
   the unallocated GPU share at 100% and 120% arrived demand, mean ± sample standard deviation and range.
   Next to it, the simulator's own 10-seed means, to show how far this replay reproduces them.
2. Speed of that replay: the wall time of the full protocol (goal < 15 min on 2 cores), and one run
   against the reshuffling replay (:mod:`gpuplace.fgd.replay`) measured in the same run.
3. Speed of planning: llama-3.1-8b against the 1,213-node fleet, and scoring one pod against every
   node, medians over repeats.

Run: `make bench`, or `.venv/bin/python tests/benchmarks/bench_planner.py --seeds 3` for a shorter run.
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
POLICIES = ("gpuplace", "fgd", "bestfit", "packing", "clustering", "dotprod", "random")
LABELS = {
    "gpuplace": "gpuplace",
    "fgd": "FGD",
    "bestfit": "BestFit",
    "packing": "GpuPacking",
    "clustering": "GpuClustering",
    "dotprod": "DotProd",
    "random": "Random",
}
# The paper's simulator, 10-seed means of the unallocated GPU share (%) at 100% arrived demand: its
# stored results (experiments/analysis/expected_results/analysis_allo_discrete.csv of
# hkust-adsl/kubernetes-scheduler-simulator), reproduced exactly by a rebuild of it (issue 13).
SIMULATOR_100: dict[str, dict[str, float]] = {
    "default": {
        "fgd": 4.77,
        "bestfit": 7.14,
        "packing": 8.22,
        "clustering": 8.35,
        "dotprod": 9.38,
        "random": 13.70,
    },
    "gpushare40": {
        "fgd": 6.04,
        "bestfit": 8.56,
        "packing": 10.23,
        "clustering": 10.24,
        "dotprod": 10.70,
        "random": 15.14,
    },
    "multigpu20": {
        "fgd": 4.47,
        "bestfit": 6.27,
        "packing": 6.50,
        "clustering": 6.66,
        "dotprod": 8.15,
        "random": 13.08,
    },
    "gpuspec33": {
        "fgd": 12.16,
        "bestfit": 19.61,
        "packing": 17.78,
        "clustering": 18.91,
        "dotprod": 20.18,
        "random": 16.13,
    },
}


def fragmentation(seeds: int) -> tuple[dict[str, dict[str, dict[str, object]]], float]:
    from gpuplace.fgd.bench import run_paper_bench

    t0 = time.monotonic()
    result = run_paper_bench(
        TRACE / "openb_node_list_gpu_node.csv",
        {v: TRACE / f"openb_pod_list_{v}.csv" for v in VARIANTS},
        POLICIES,
        seeds,
    )
    return result, time.monotonic() - t0


def replay_speed() -> dict[str, float]:
    """One FGD run on `default` to 130%: this replay against the reshuffling one, same process, same run."""
    from gpuplace.fgd.bench import _paper_job
    from gpuplace.fgd.replay import SimNode, replay
    from gpuplace.inventory.alibaba import read_alibaba_nodes, read_alibaba_tasks
    from gpuplace.planner.fragmentation import TaskClass, typical_mix

    nodes_csv, pods_csv = TRACE / "openb_node_list_gpu_node.csv", TRACE / "openb_pod_list_default.csv"
    t0 = time.perf_counter()
    _paper_job(str(nodes_csv), str(pods_csv), "default", "fgd", 42)
    paper_s = time.perf_counter() - t0
    inventory = read_alibaba_nodes(nodes_csv)
    nodes = [SimNode(n.name, n.cpu_cores * 1000, len(n.gpus), n.gpus[0].product) for n in inventory.nodes]
    tasks = [
        TaskClass(t.num_gpu, t.gpu_milli, t.cpu_milli, frozenset(t.gpu_spec))
        for t in read_alibaba_tasks(pods_csv)
    ]
    t0 = time.perf_counter()
    replay(nodes, tasks, "fgd", typical_mix([t.key for t in tasks]), seed=0, until=1.3)
    reshuffle_s = time.perf_counter() - t0
    return {"paper_fgd_run_s": paper_s, "reshuffle_fgd_run_s": reshuffle_s}


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
    request = PlanRequest("llama-3.1-8b", Slo(tpot_p99_s=0.1, ttft_p99_s=5.0, rate_rps=2.0))
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


def _cell(summary: dict[str, object], pct: int) -> str:
    at = summary[f"at_{pct}"]
    assert isinstance(at, dict)
    return f"{at['mean_pct']:.2f} ± {at['stdev_pct']:.2f} ({at['min_pct']:.2f}–{at['max_pct']:.2f})"


def markdown(
    frag: dict[str, dict[str, dict[str, object]]],
    frag_wall_s: float,
    rspd: dict[str, float],
    spd: dict[str, float],
    seeds: int,
    wall_s: float,
) -> str:
    seed_text = f"42..{41 + seeds}"
    lines = [
        "# Planner benchmarks",
        "",
        f"Produced by `.venv/bin/python tests/benchmarks/bench_planner.py --seeds {seeds}` (`make bench`) in "
        f"{wall_s / 60:.1f} min on a 2-core machine shared with other work. Trace: Alibaba cluster-trace-gpu-v2023 "
        '(Weng et al., "Beware of Fragmentation", USENIX ATC\'23), 1,213 GPU nodes, 6,212 GPUs. '
        "Raw figures, per-seed values and mean curves at 50–130%: `docs/benchmarks/planner.json`.",
        "",
        "## Fragmentation under the paper's protocol",
        "",
        "`gpuplace bench fragmentation --protocol paper`: the simulator's workload (pods shuffled, tuned to 1.3× "
        "capacity), filter, integer scores, GPU choice, tie-break and metric (definitions and every remaining "
        f"difference: docs/placement.md). Seeds {seed_text}. Unallocated GPU share (% of capacity) when arrived "
        "demand reaches 100% and 120% of capacity: mean ± sample standard deviation (min–max over seeds). "
        "Lower is better.",
        "",
    ]
    for pct in (100, 120):
        lines += [
            f"### At {pct}% arrived demand",
            "",
            "| variant | " + " | ".join(LABELS[p] for p in POLICIES) + " |",
            "|---|" + "---:|" * len(POLICIES),
        ]
        for v, res in frag.items():
            best = min(POLICIES, key=lambda p: res[p][f"at_{pct}"]["mean_pct"])  # type: ignore[index]
            cells = [(f"**{_cell(res[p], pct)}**" if p == best else _cell(res[p], pct)) for p in POLICIES]
            lines.append(f"| {v} | " + " | ".join(cells) + " |")
        lines.append("")
    verdicts = []
    for v, res in frag.items():
        for pct in (100, 120):
            ours = res["gpuplace"][f"at_{pct}"]["mean_pct"]  # type: ignore[index]
            beaten_by = [LABELS[p] for p in POLICIES[1:] if res[p][f"at_{pct}"]["mean_pct"] < ours]  # type: ignore[index]
            fgd = res["fgd"][f"at_{pct}"]["mean_pct"]  # type: ignore[index]
            verdicts.append(
                f"- {v} at {pct}%: gpuplace {ours:.2f}% vs FGD {fgd:.2f}% ({ours / fgd:.3f}×); "
                + (f"**lower than gpuplace: {', '.join(beaten_by)}**" if beaten_by else "gpuplace lowest")
            )
    lines += ["Where gpuplace stands (means over the seeds):", "", *verdicts, ""]
    lines += [
        "## Reproduction of the paper's simulator (100% demand)",
        "",
        "The simulator's 10-seed means (its stored results, which a rebuild of it reproduced exactly) against "
        "this replay's means over the same number of seeds. Random streams differ (Go's math/rand there, numpy "
        "here), so only means are comparable. Goal: every cell within 10% relative.",
        "",
        "| variant | " + " | ".join(LABELS[p] for p in POLICIES[1:]) + " |",
        "|---|" + "---:|" * (len(POLICIES) - 1),
    ]
    worst = 0.0
    for v, res in frag.items():
        cells = []
        for p in POLICIES[1:]:
            ours = res[p]["at_100"]["mean_pct"]  # type: ignore[index]
            sim = SIMULATOR_100[v][p]
            rel = ours / sim - 1
            worst = max(worst, abs(rel))
            cells.append(f"{ours:.2f} vs {sim:.2f} ({rel:+.1%})")
        lines.append(f"| {v} | " + " | ".join(cells) + " |")
    lines += [
        "",
        f"Largest relative difference: {worst:.1%} (goal ≤ 10%). Cells read: this replay vs the simulator.",
        "",
        "## Speed",
        "",
        f"- full protocol ({len(frag)} variants × {len(POLICIES)} policies × {seeds} seeds, "
        f"{len(frag) * len(POLICIES) * seeds} replays to 130%, 2 processes): **{frag_wall_s / 60:.1f} min** "
        "(goal < 15 min)",
        f"- one FGD replay of `default` to 130%, same process: this replay {rspd['paper_fgd_run_s']:.1f} s "
        f"(cold memo), the reshuffling replay {rspd['reshuffle_fgd_run_s']:.1f} s "
        f"({rspd['reshuffle_fgd_run_s'] / rspd['paper_fgd_run_s']:.1f}× slower)",
        f"- plan llama-3.1-8b against the {spd['nodes']}-node fleet: median {spd['plan_median_s'] * 1000:.1f} ms "
        f"(goal < 1 s); chose {spd['chosen']}",
        f"- score one 1-GPU pod against all {spd['nodes']} nodes (cold memo): median "
        f"{spd['score_one_pod_all_nodes_median_s'] * 1000:.2f} ms (goal < 5 ms)",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=10, help="seeds 42..41+N (the paper's protocol: 10)")
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
    rspd = replay_speed()
    print(f"replay speed: {rspd}", flush=True)
    frag, frag_wall = fragmentation(args.seeds)
    wall = time.monotonic() - t0
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "planner.json").write_text(
        json.dumps(
            {
                "protocol": "paper",
                "seeds": list(range(42, 42 + args.seeds)),
                "fragmentation": frag,
                "fragmentation_wall_s": frag_wall,
                "simulator_100_pct": SIMULATOR_100,
                "replay_speed": rspd,
                "speed": spd,
            },
            indent=2,
        )
        + "\n"
    )
    (OUT / "planner.md").write_text(markdown(frag, frag_wall, rspd, spd, args.seeds, wall))
    print((OUT / "planner.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
