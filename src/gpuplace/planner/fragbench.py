"""``gpuplace bench fragmentation``'s library side: replay an Alibaba-format trace under each policy.

Reads the node and pod lists (:mod:`gpuplace.inventory.alibaba`), replays them per policy and seed with
:func:`gpuplace.planner.replay.replay`, and returns the JSON that docs/benchmarks/planner.md quotes.
"""

from __future__ import annotations

import statistics
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
