"""``gpuplace run`` (``make run``): the main job, the pipelines end to end through kfp's local runner."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpuplace.cli.base import Command


class RunCommand(Command):
    name = "run"
    help = "the main job: a pipeline end to end through kfp's local runner (what make run runs)"
    description = (
        "Run the llm_placement pipeline (--compare: orchestration_comparison) on this machine through\n"
        "kfp's local runner: profile this device and measure its local serving engine, plan onto this\n"
        "machine, deploy to the local serving target (or a cluster with --target kubernetes), load-test\n"
        "the plan's traffic, and log to MLflow. Prints predicted against measured p50/p99 TTFT and TPOT\n"
        "on the same device with the error, and the --fleet plan as a prediction for its GPUs. Every\n"
        "task's output and the runner's log are kept in the run directory. A failed\n"
        "task fails the run (exit status 1): no request served, pods off their plan, or two paths that\n"
        "ran different serving specs."
    )
    epilog = "example: gpuplace run --compare --repeats 4"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--workdir", default=".gpuplace/runs", help="where run directories go")
        p.add_argument(
            "--model", default="", help="model preset (default: tiny on a CPU, llama-3.1-8b on a GPU)"
        )
        p.add_argument("--device", default="auto", help="profiling device: auto, cpu, cuda, cuda:N")
        p.add_argument(
            "--inventory",
            default="",
            help="what to plan on (default: local, this machine, for the local target; else --fleet)",
        )
        p.add_argument(
            "--fleet",
            default="",
            help="a fleet (bundled name, fleet YAML or CSV) also planned and shown as a prediction for its "
            "GPUs (default mixed-a100-h100-l4); with --target kubernetes, the fleet planned on, which must "
            "match the cluster (default: the cluster's own nodes)",
        )
        p.add_argument("--slo-tpot-ms", type=float, default=50.0, help="p99 time per output token target, ms")
        p.add_argument("--slo-ttft-ms", type=float, default=2000.0, help="p99 time to first token target, ms")
        p.add_argument(
            "--rate", type=float, default=2.0, help="target and load-test request rate, requests/s"
        )
        p.add_argument(
            "--prompt-tokens",
            default="128",
            help="prompt length of the planned and sent traffic: N, uniform:LO:HI or normal:MEAN:STD",
        )
        p.add_argument("--output-tokens", default="32", help="output length, same forms")
        p.add_argument("--max-requests", type=int, default=120, help="requests the load test sends")
        p.add_argument(
            "--trace", default="", help="Azure-format trace CSV to replay instead of synthetic load"
        )
        p.add_argument(
            "--compare", action="store_true", help="run orchestration_comparison (native vs Kubeflow)"
        )
        p.add_argument(
            "--repeats",
            type=int,
            default=3,
            help="with --compare: deploy and load-test each path N times, the paths' runs interleaved "
            "(kubeflow, native, kubeflow, ...); the verdict's interval comes from the runs, a linear drift "
            "of the machine over them removed, and fewer than 3 cannot name a winner (default 3)",
        )
        p.add_argument("--target", default="local", choices=["local", "kubernetes"], help="serving target")
        p.add_argument("--kubeconfig", default="", help="the cluster for --target kubernetes")
        p.add_argument("--namespace", default="default", help="namespace for --target kubernetes")
        p.add_argument(
            "--runtime",
            choices=("auto", "kubelet", "standin", "none"),
            default="auto",
            help="what serves the pods with --target kubernetes (gpuplace deploy --runtime)",
        )
        p.add_argument(
            "--mlflow-uri",
            default="",
            help="MLflow server (default: $MLFLOW_TRACKING_URI, else a local store)",
        )
        p.add_argument("--verbose", action="store_true", help="show the runner's and the tasks' own logs")

    def run(self, args: argparse.Namespace) -> int:
        from gpuplace.jobs.main import MainJobConfig, PipelineFailed, format_summary, run_main_job

        config = MainJobConfig(
            workdir=Path(args.workdir),
            model=args.model,
            device=args.device,
            inventory=args.inventory,
            fleet=args.fleet,
            prompt_tokens=args.prompt_tokens,
            output_tokens=args.output_tokens,
            slo_tpot_ms=args.slo_tpot_ms,
            slo_ttft_ms=args.slo_ttft_ms,
            rate=args.rate,
            max_requests=args.max_requests,
            trace=args.trace,
            compare=args.compare,
            repeats=args.repeats,
            target=args.target,
            kubeconfig=args.kubeconfig,
            namespace=args.namespace,
            runtime=args.runtime,
            mlflow_uri=args.mlflow_uri,
            verbose=args.verbose,
        )
        pipeline = "orchestration_comparison" if args.compare else "llm_placement"
        print(f"gpuplace run: {pipeline} through kfp's local runner")
        try:
            result = run_main_job(config)
        except PipelineFailed as e:
            if e.partial:
                print(f"\nmeasured before the failure:\n{e.partial}\n")
            raise
        print()
        print(format_summary(result))
        return 0
