"""``gpuplace compare``: both paths' deployment records and load tests → the comparison step; the other
flags are the step's table (:data:`gpuplace.steps.compare.PARAMS`)."""

from __future__ import annotations

import argparse

from gpuplace.cli.base import Command


class CompareCommand(Command):
    name = "compare"
    help = "compare the native and the Kubeflow path: metrics, weighted score, sensitivity, ROI"
    description = (
        "Score the two orchestration paths on what was measured (provisioning, p99 latency, goodput,\n"
        "GPU-hours per 1k requests, cost, SLA-breach cost, fragmentation), with weights you choose, show\n"
        "which weight changes flip the verdict, and write comparison.json and a Markdown/HTML report\n"
        "with plots (docs/comparison.md). --mlflow also logs it (docs/tracking.md)."
    )

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        from gpuplace.params import add_flags
        from gpuplace.steps.compare import COMPARISON, MLFLOW

        for path in ("native", "kubeflow"):
            p.add_argument(f"--{path}-deployment", default="", help=f"deployment.json of the {path} path")
            p.add_argument(
                f"--{path}-loadtest", default="", help=f"load-test output folder (or report.json), {path}"
            )
            p.add_argument(
                f"--{path}-sweep",
                action="append",
                default=[],
                help="another load test of the path (TPOT vs rate)",
            )
            p.add_argument(
                f"--{path}-repeat",
                nargs=2,
                action="append",
                default=[],
                metavar=("DEPLOYMENT", "LOADTEST"),
                help="another run of the same workload: pooled, and its noise counted (repeatable)",
            )
        p.add_argument("--out", default="comparison", help="output folder")
        add_flags(p, COMPARISON)
        add_flags(p.add_argument_group("MLflow (docs/tracking.md)"), MLFLOW)

    def run(self, args: argparse.Namespace) -> int:
        from gpuplace.report.render import flip_lines, verdict_line
        from gpuplace.steps.compare import compare_options, parse_path_inputs
        from gpuplace.steps.track import compare_and_track

        paths = parse_path_inputs(
            args.native_deployment,
            args.native_loadtest,
            args.kubeflow_deployment,
            args.kubeflow_loadtest,
            args.native_sweep,
            args.kubeflow_sweep,
            native_repeat=[tuple(r) for r in args.native_repeat],
            kubeflow_repeat=[tuple(r) for r in args.kubeflow_repeat],
        )
        options = compare_options(vars(args), paths)
        result = compare_and_track(options, args.out)
        for note in result.comparison.notes:
            print(f"note: {note}")
        print(verdict_line(result.comparison).replace("**", ""))
        for line in flip_lines(result.comparison):
            print(line.replace("**", ""))
        print(f"\ncomparison : {result.comparison_json}")
        print(f"report     : {result.report_md} and {result.report_html}")
        if result.mlflow_run_id:
            print(f"MLflow     : run {result.mlflow_run_id} in {result.mlflow_where}")
        return 0
