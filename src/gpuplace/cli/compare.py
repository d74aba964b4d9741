"""``gpuplace compare``: both paths' deployment records and load tests → the comparison step."""

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
        p.add_argument("--plan", default="", help="plan.json (or its folder)")
        p.add_argument(
            "--inventory", default="", help="the fleet: bundled name, fleet YAML, Alibaba CSV or cluster"
        )
        p.add_argument("--gpu-catalog", default=None, help="a gpus.csv to use instead of the bundled one")
        p.add_argument(
            "--weights", default="", help="e.g. tpot_p99=0.7,cost=0.3 (sum 1; default docs/comparison.md)"
        )
        p.add_argument(
            "--assess",
            action="append",
            default=[],
            help="an assessed criterion, e.g. reuse=native:0.4,kubeflow:0.9",
        )
        p.add_argument(
            "--penalty-usd-per-breach",
            type=float,
            default=0.0,
            help="SLA penalty per request missing the SLO",
        )
        p.add_argument(
            "--engineering-weeks", type=float, default=0.0, help="ROI: weeks to adopt the mechanism"
        )
        p.add_argument(
            "--rate-usd-per-week", type=float, default=0.0, help="ROI: cost of one engineering week"
        )
        p.add_argument(
            "--saved-usd-per-quarter", type=float, default=None, help="ROI: override the derived saving"
        )
        p.add_argument("--adopt", default="", help="ROI: the path being adopted (default: the winner)")
        p.add_argument("--out", default="comparison", help="output folder")
        add_mlflow_flags(p)

    def run(self, args: argparse.Namespace) -> int:
        from gpuplace.compare.step import CompareOptions, parse_path_inputs
        from gpuplace.report.render import flip_lines, verdict_line
        from gpuplace.tracking.step import compare_and_track

        paths = parse_path_inputs(
            args.native_deployment,
            args.native_loadtest,
            args.kubeflow_deployment,
            args.kubeflow_loadtest,
            args.native_sweep,
            args.kubeflow_sweep,
        )
        options = CompareOptions.from_params(vars(args), paths)
        result = compare_and_track(options, args.out)
        print(verdict_line(result.comparison).replace("**", ""))
        for line in flip_lines(result.comparison):
            print(line.replace("**", ""))
        print(f"\ncomparison : {result.comparison_json}")
        print(f"report     : {result.report_md} and {result.report_html}")
        if result.mlflow_run_id:
            print(f"MLflow     : run {result.mlflow_run_id} in {result.mlflow_where}")
        return 0


def add_mlflow_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--mlflow", dest="log_to_mlflow", action="store_true", help="also log to MLflow (docs/tracking.md)"
    )
    p.add_argument(
        "--mlflow-uri", default="", help="tracking URI (default MLFLOW_TRACKING_URI, else a local store)"
    )
    p.add_argument("--experiment", dest="mlflow_experiment", default="gpuplace", help="MLflow experiment")
    p.add_argument("--mlflow-workdir", default=".gpuplace/mlflow", help="where the local store lives")
    p.add_argument(
        "--mlflow-fallback-local",
        action="store_true",
        help="log to the local store if the server is unreachable",
    )
    p.add_argument(
        "--run-name", default="", help="name of the MLflow parent run (default: compare <plan id>)"
    )
    p.add_argument("--kfp-run-id", default="", help="the KFP run id to tag the MLflow run with")
    p.add_argument("--profile", default="", help="profile Parquet to log under the same parent run")
    p.add_argument("--manifests", default="", help="folder of rendered manifests to log with the plan")
    p.add_argument("--system-metrics", action="store_true", help="log CPU (and GPU via NVML) usage")
