"""``gpuplace plan`` and ``gpuplace bench fragmentation``: thin adapters over the planner.

``plan`` reads a profile, an inventory and a GPU catalog, calls :func:`gpuplace.planner.plan_placement`
and writes the plan folder (:mod:`gpuplace.planner.io`). ``bench fragmentation`` replays an Alibaba-
format trace under each policy — the FGD paper's simulator protocol (:mod:`gpuplace.planner.paperreplay`,
runs spread over processes) or the reshuffling replay (:mod:`gpuplace.planner.replay`) — and writes the
JSON that docs/benchmarks/planner.md quotes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gpuplace.errors import InvalidInput


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "plan",
        help="choose the cheapest GPU shape meeting an SLO and place it on a fleet (docs/placement.md)",
        description="Plan a topology-aware placement from a latency profile, an inventory and an SLO.",
    )
    p.add_argument("--model", required=True, help="the model the profile measured (its preset/config name)")
    p.add_argument("--profile", required=True, help="profile Parquet written by `gpuplace profile`")
    p.add_argument(
        "--inventory",
        default="mixed-a100-h100-l4",
        help="bundled fleet name, fleet YAML, Alibaba node CSV or 'cluster'",
    )
    p.add_argument("--slo-tpot-ms", type=float, required=True, help="p99 time per output token target")
    p.add_argument("--slo-ttft-ms", type=float, required=True, help="p99 time to first token target")
    p.add_argument("--rate", type=float, required=True, help="target request rate, requests/s")
    p.add_argument("--prompt-tokens", type=int, default=512)
    p.add_argument("--output-tokens", type=int, default=128)
    p.add_argument("--fit-threshold", type=float, default=0.85)
    p.add_argument(
        "--kinds", default="whole,mig,shared", help="shapes to consider (default whole,mig,shared)"
    )
    p.add_argument(
        "--gpus", default="", help="comma list of catalog GPU names to allow (default: all in the fleet)"
    )
    p.add_argument(
        "--price", action="append", default=[], metavar="GPU=USD_PER_HOUR", help="override a catalog price"
    )
    p.add_argument("--gpu-catalog", default=None, help="a gpus.csv to use instead of the bundled one")
    p.add_argument(
        "--task-mix",
        default="",
        help="fragmentation task mix GPUS:WEIGHT,... (default: the fleet's own workload, docs/placement.md)",
    )
    p.add_argument(
        "--workload", default="", help="a pod-list CSV (Alibaba format) to measure fragmentation against"
    )
    p.add_argument("--breach-penalty-usd", type=float, default=0.0, help="cost of one SLA breach")
    p.add_argument("--name", default="", help="Deployment name (default gpuplace-<model>)")
    p.add_argument("--image", default="", help="serving image (default vLLM's OpenAI server, pinned)")
    p.add_argument("--model-path", default="", help="what the server loads (default: --model)")
    p.add_argument("--numa-align", action="store_true", help="size CPUs to the GPUs' NUMA node share")
    p.add_argument("--priority-class", default="")
    p.add_argument("--out", required=True, help="folder for plan.json, manifests/, alternatives/, kfp/")
    p.set_defaults(func=_cmd_plan)

    b = sub.add_parser("bench", help="benchmarks users can run on their own data")
    bsub = b.add_subparsers(dest="bench", required=True)
    f = bsub.add_parser(
        "fragmentation",
        help="replay an Alibaba-format trace under scheduling policies (unallocated GPUs at 100%% demand)",
    )
    f.add_argument("--nodes", required=True, help="node list CSV (sn,cpu_milli,memory_mib,gpu,model)")
    f.add_argument(
        "--pods", required=True, help="pod list CSV (name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec)"
    )
    f.add_argument(
        "--protocol",
        choices=("paper", "reshuffle"),
        default="paper",
        help="paper: the FGD paper's simulator protocol (seeds 42.., 1.3× tuned workload, its scores); "
        "reshuffle: the trace replayed again when exhausted, exact float scores (docs/placement.md)",
    )
    f.add_argument("--seeds", type=int, default=1, help="how many seeds (the paper uses 10)")
    f.add_argument("--policies", default="", help="comma list (default: every policy of the protocol)")
    f.add_argument(
        "--until",
        type=float,
        default=1.3,
        help="reshuffle: stop when arrived GPU demand reaches this × capacity",
    )
    f.add_argument("--workers", type=int, default=0, help="paper: processes (default: the CPUs)")
    f.add_argument("--out", required=True, help="JSON file to write")
    f.add_argument("--quiet", action="store_true")
    f.set_defaults(func=_cmd_bench_fragmentation)


def _prices(items: list[str]) -> dict[str, float]:
    prices = {}
    for item in items:
        name, _, value = item.partition("=")
        try:
            prices[name.strip()] = float(value)
        except ValueError:
            raise InvalidInput(
                "price", item, "is not GPU=USD_PER_HOUR", "e.g. --price H100-SXM5-80GB=4.5"
            ) from None
    return prices


def _cmd_plan(args: argparse.Namespace) -> int:
    from gpuplace.planner.step import run_plan_step

    result = run_plan_step(
        profile_path=Path(args.profile),
        inventory=args.inventory,
        model=args.model,
        slo_tpot_ms=args.slo_tpot_ms,
        slo_ttft_ms=args.slo_ttft_ms,
        rate=args.rate,
        out=Path(args.out),
        prompt_tokens=args.prompt_tokens,
        output_tokens=args.output_tokens,
        fit_threshold=args.fit_threshold,
        kinds=args.kinds,
        gpus=args.gpus,
        prices=_prices(args.price),
        gpu_catalog=args.gpu_catalog,
        task_mix=args.task_mix,
        breach_penalty_usd=args.breach_penalty_usd,
        deployment_name=args.name,
        image=args.image,
        model_path=args.model_path,
        numa_align=args.numa_align,
        priority_class=args.priority_class,
        workload=args.workload,
    )
    plan = result.plan
    for note in plan.notes:
        print(f"note: {note}", file=sys.stderr)
    print(result.candidates_markdown)
    pred = plan.chosen.prediction
    assert pred is not None
    print(
        f"chosen: {plan.chosen.label} — p99 TPOT {pred.tpot_p99_s * 1e3:.2f} ms, "
        f"p99 TTFT {pred.ttft_p99_s * 1e3:.1f} ms, "
        f"${plan.cost_usd_per_month:,.0f}/month, fit ≥ {plan.chosen.fit_score:.2f}, "
        f"fragmentation {plan.fragmentation_before:.2f} → {plan.fragmentation_after:.2f} GPUs"
    )
    for p in plan.placements:
        print(
            f"  replica {p.replica}: {p.node} {','.join(p.gpu_ids)} ({p.interconnect}, fit {p.fit_score:.2f})"
        )
    print(fragmentation_effect_text(plan))
    out = result.plan_dir
    print(
        f"wrote {out / 'plan.json'}, {out / 'manifests'}/, {out / 'alternatives'}/, {out / 'kfp'}/ "
        f"(plan {plan.plan_id})"
    )
    return 0


def fragmentation_effect_text(plan: Any) -> str:
    """What the fragmentation criterion changed in a plan, as ``gpuplace plan`` prints it."""
    fw = plan.fragmentation_workload
    effect = fw.get("effect") or {}
    lines = [
        f"fragmentation measured against: {fw.get('source', '?')} "
        f"({len(fw.get('classes') or ())} task classes)"
    ]
    with_ = [f"{r['node']}:{len(r['gpu_ids'])}" for r in effect.get("with_fragmentation") or ()]
    without = [f"{r['node']}:{len(r['gpu_ids'])}" for r in effect.get("without_fragmentation") or ()]
    same = sorted(map(str, effect.get("with_fragmentation") or ())) == sorted(
        map(str, effect.get("without_fragmentation") or ())
    )
    lines.append(f"  with FGD:    {' '.join(with_)}")
    lines.append(f"  without FGD: {' '.join(without) or effect.get('without_fragmentation_note', '')}")
    after_without = effect.get("usable_gpus_after_without")
    lines.append(
        f"  GPUs usable by that workload: {effect.get('usable_gpus_before', 0):.2f} before, "
        f"{effect.get('usable_gpus_after_with', 0):.2f} after with FGD, "
        + (f"{after_without:.2f} without" if after_without is not None else "— without")
        + (" (same placement)" if same else "")
    )
    return "\n".join(lines)


def run_fragmentation_bench(
    nodes_csv: Path,
    pods_csv: Path,
    policies: list[str],
    seeds: int,
    *,
    until: float = 1.3,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Replay the trace per policy and seed; the JSON shape ``gpuplace bench fragmentation`` writes."""
    from gpuplace.inventory.alibaba import read_alibaba_nodes, read_alibaba_tasks
    from gpuplace.planner.fragmentation import TaskClass, typical_mix
    from gpuplace.planner.replay import POLICIES, SimNode, replay
    from gpuplace.progress import Progress

    unknown = [p for p in policies if p not in POLICIES]
    if unknown or not policies:
        raise InvalidInput(
            "policies", ",".join(policies), "unknown or empty", f"Use some of {','.join(POLICIES)}"
        )
    if seeds < 1:
        raise InvalidInput("seeds", seeds, "must be at least 1")
    if until < 1.0:
        raise InvalidInput("until", until, "must be ≥ 1.0 (the figure is taken at 100% demand)")
    inventory = read_alibaba_nodes(nodes_csv)
    nodes = [
        SimNode(n.name, n.cpu_cores * 1000, len(n.gpus), n.gpus[0].product if n.gpus else "")
        for n in inventory.nodes
    ]
    tasks = [
        TaskClass(t.num_gpu, t.gpu_milli, t.cpu_milli, frozenset(t.gpu_spec))
        for t in read_alibaba_tasks(pods_csv)
    ]
    mix = typical_mix([t.key for t in tasks])
    out: dict[str, Any] = {}
    with Progress(len(policies) * seeds, f"fragmentation {pods_csv.name}", enabled=show_progress) as progress:
        for policy in policies:
            per_seed = []
            curves = []
            for seed in range(seeds):
                r = replay(nodes, tasks, policy, mix, seed=seed, until=until)
                per_seed.append(r.checkpoints[1.0])
                curves.append({str(k): v for k, v in r.checkpoints.items()})
                progress.advance(f"{policy} seed {seed}: {r.checkpoints[1.0]:.4f}")
            out[policy] = {
                "unallocated_share": statistics.fmean(per_seed),
                "per_seed": per_seed,
                "curves": curves,
            }
    return out


def run_paper_bench(
    nodes_csv: Path,
    pods_csvs: Mapping[str, Path],
    policies: Sequence[str],
    seeds: int,
    *,
    workers: int = 0,
    show_progress: bool = True,
) -> dict[str, Any]:
    """``--protocol paper`` for one or more pod lists: ``{variant: {policy: paper_summary(runs)}}``."""
    from concurrent.futures import ProcessPoolExecutor

    from gpuplace.planner.paperreplay import PAPER_POLICIES, PAPER_SEEDS
    from gpuplace.progress import Progress

    unknown = [p for p in policies if p not in PAPER_POLICIES]
    if unknown or not policies:
        raise InvalidInput(
            "policies", ",".join(policies), "unknown or empty", f"Use some of {','.join(PAPER_POLICIES)}"
        )
    if not 1 <= seeds <= 100:
        raise InvalidInput("seeds", seeds, "must be in 1..100", "The paper uses 10")
    for path in (nodes_csv, *pods_csvs.values()):
        if not path.is_file():
            raise InvalidInput("trace", str(path), "no such file", "Point at the Alibaba openb trace files")
    seed_list = [PAPER_SEEDS[0] + i for i in range(seeds)]
    jobs = [(v, p, s) for v in pods_csvs for p in policies for s in seed_list]
    runs: dict[tuple[str, str, int], Any] = {}
    procs = workers or min(len(jobs), os.cpu_count() or 1)
    with Progress(len(jobs), "fragmentation (paper protocol)", enabled=show_progress) as progress:
        if procs <= 1:
            for job in jobs:
                runs[job] = _paper_job(str(nodes_csv), str(pods_csvs[job[0]]), *job)
                progress.advance(f"{job[0]} {job[1]} seed {job[2]}")
        else:
            with ProcessPoolExecutor(procs) as pool:
                # Jobs of one variant in a row, so a worker reuses that variant's fragmentation memo.
                futures = {
                    pool.submit(_paper_job, str(nodes_csv), str(pods_csvs[job[0]]), *job): job for job in jobs
                }
                for fut, job in futures.items():
                    runs[job] = fut.result()
                    progress.advance(f"{job[0]} {job[1]} seed {job[2]}")
    return {v: {p: paper_summary([runs[(v, p, s)] for s in seed_list]) for p in policies} for v in pods_csvs}


_PAPER_CACHE: dict[tuple[str, str], Any] = {}


def _paper_job(nodes_csv: str, pods_csv: str, variant: str, policy: str, seed: int) -> Any:
    from gpuplace.inventory.alibaba import read_alibaba_nodes, read_alibaba_tasks
    from gpuplace.planner.paperreplay import PaperNode, PaperPod, PaperReplay

    replay = _PAPER_CACHE.get((nodes_csv, pods_csv))
    if replay is None:
        inventory = read_alibaba_nodes(Path(nodes_csv))
        nodes = [
            PaperNode(n.name, n.cpu_cores * 1000, round(n.memory_gib * 1024), len(n.gpus), n.gpus[0].product)
            for n in inventory.nodes
            if n.gpus
        ]
        pods = [
            PaperPod(t.cpu_milli, t.memory_mib, t.num_gpu, t.gpu_milli, "|".join(t.gpu_spec))
            for t in read_alibaba_tasks(Path(pods_csv))
        ]
        _PAPER_CACHE.clear()  # one variant at a time: the memo of the last one is what jobs reuse
        replay = _PAPER_CACHE[(nodes_csv, pods_csv)] = PaperReplay(nodes, pods)
    return replay.run(policy, seed)


def paper_summary(runs: Sequence[Any]) -> dict[str, Any]:
    """Per-seed runs of one policy: mean, sample standard deviation and range at 100% and 120% demand."""
    out: dict[str, Any] = {"seeds": [r.seed for r in runs], "failed_pods": [r.failed_pods for r in runs]}
    for pct in (100, 120):
        values = [r.unallocated_pct[pct] for r in runs]
        out[f"at_{pct}"] = {
            "mean_pct": statistics.fmean(values),
            "stdev_pct": statistics.stdev(values) if len(values) > 1 else 0.0,
            "min_pct": min(values),
            "max_pct": max(values),
            "per_seed_pct": values,
        }
    out["unallocated_share"] = out["at_100"]["mean_pct"] / 100
    out["per_seed"] = [v / 100 for v in out["at_100"]["per_seed_pct"]]  # shares, as --protocol reshuffle
    out["curve_mean_pct"] = {
        str(x): statistics.fmean(r.unallocated_pct[x] for r in runs)
        for x in range(50, 131)
        if all(x in r.unallocated_pct for r in runs)
    }
    return out


def _cmd_bench_fragmentation(args: argparse.Namespace) -> int:
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    if args.protocol == "paper":
        from gpuplace.planner.paperreplay import PAPER_POLICIES

        result = run_paper_bench(
            Path(args.nodes),
            {Path(args.pods).stem: Path(args.pods)},
            policies or list(PAPER_POLICIES),
            args.seeds,
            workers=args.workers,
            show_progress=not args.quiet,
        )[Path(args.pods).stem]
    else:
        from gpuplace.planner.replay import POLICIES

        result = run_fragmentation_bench(
            Path(args.nodes),
            Path(args.pods),
            policies or list(POLICIES),
            args.seeds,
            until=args.until,
            show_progress=not args.quiet,
        )
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    base = result.get("fgd", {}).get("unallocated_share")
    for policy, r in result.items():
        ratio = f"  ({r['unallocated_share'] / base:.2f}× FGD)" if base else ""
        print(f"{policy:10} unallocated at 100% demand: {r['unallocated_share'] * 100:6.2f}%{ratio}")
    print(f"wrote {args.out}")
    return 0
