"""``gpuplace bench fragmentation``'s library side: replay an Alibaba-format trace under each policy.

Two protocols: ``paper``, the FGD paper's simulator protocol (:mod:`gpuplace.fgd.paperreplay`, runs
spread over processes), and ``reshuffle``, the trace replayed again when exhausted
(:mod:`gpuplace.fgd.replay`). Both read the node and pod lists with :mod:`gpuplace.inventory.alibaba`
and return the JSON docs/benchmarks/planner.md quotes.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gpuplace.errors import InvalidInput


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
    from gpuplace.fgd.replay import POLICIES, SimNode, replay
    from gpuplace.inventory.alibaba import read_alibaba_nodes, read_alibaba_tasks
    from gpuplace.planner.fragmentation import TaskClass, typical_mix
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

    from gpuplace.fgd.paperreplay import PAPER_POLICIES, PAPER_SEEDS
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
    from gpuplace.fgd.paperreplay import PaperReplay
    from gpuplace.fgd.paperworkload import PaperNode, PaperPod
    from gpuplace.inventory.alibaba import read_alibaba_nodes, read_alibaba_tasks

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
