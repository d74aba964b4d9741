"""``gpuplace bench fragmentation``: the FGD replay of a trace, as users run it on their own data."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gpuplace.cli.base import Command, HelpFormatter


class BenchCommand(Command):
    name = "bench"
    help = "benchmarks to run on your own data (fragmentation replay of a cluster trace)"
    description = "Benchmarks users can run on their own data; the project's own are `make bench`."

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        sub = p.add_subparsers(dest="bench", required=True, metavar="{fragmentation}")
        f = sub.add_parser(
            "fragmentation",
            help="replay an Alibaba-format trace under scheduling policies",
            description=(
                "Replay a task trace onto a fleet under each scheduling policy, as the FGD paper does\n"
                "(Weng et al., ATC'23), and report the GPU capacity left unallocated as demand grows."
            ),
            formatter_class=HelpFormatter,
        )
        f.add_argument("--nodes", required=True, help="node list CSV (sn,cpu_milli,memory_mib,gpu,model)")
        f.add_argument(
            "--pods",
            required=True,
            help="pod list CSV (name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec)",
        )
        f.add_argument(
            "--protocol",
            choices=("paper", "reshuffle"),
            default="paper",
            help="paper: the FGD paper's simulator protocol (seeds 42.., 1.3x tuned workload, its scores); "
            "reshuffle: the trace replayed again when exhausted, exact float scores (docs/placement.md)",
        )
        f.add_argument("--seeds", type=int, default=1, help="how many seeds (the paper uses 10)")
        f.add_argument(
            "--policies",
            default="",
            help="policies to replay, comma-separated (default: all of the protocol's)",
        )
        f.add_argument(
            "--until",
            type=float,
            default=1.3,
            help="reshuffle: stop when arrived GPU demand reaches this x capacity",
        )
        f.add_argument("--workers", type=int, default=0, help="paper: worker processes (default: the CPUs)")
        f.add_argument("--out", required=True, help="JSON file to write")
        f.add_argument("--quiet", action="store_true", help="no progress lines")

    def run(self, args: argparse.Namespace) -> int:
        from gpuplace.fgd.bench import run_fragmentation_bench, run_paper_bench

        policies = [p.strip() for p in args.policies.split(",") if p.strip()]
        nodes, pods = Path(args.nodes), Path(args.pods)
        if args.protocol == "paper":
            from gpuplace.fgd.paperreplay import PAPER_POLICIES

            result = run_paper_bench(
                nodes, {pods.stem: pods}, policies or list(PAPER_POLICIES), args.seeds,
                workers=args.workers, show_progress=not args.quiet,
            )[pods.stem]  # fmt: skip
        else:
            from gpuplace.fgd.replay import POLICIES

            result = run_fragmentation_bench(
                nodes,
                pods,
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
