"""``gpuplace run`` (``make run``): the main job, the pipelines end to end through kfp's local runner."""

from __future__ import annotations

import argparse
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING

from gpuplace.cli.base import Command

if TYPE_CHECKING:
    from gpuplace.jobs.config import MainJobConfig


def config_from_args(args: argparse.Namespace) -> MainJobConfig:
    """The main job's configuration from ``gpuplace run``'s flags, one per field, by the field's name."""
    from gpuplace.jobs.config import MainJobConfig

    values = {f.name: getattr(args, f.name) for f in fields(MainJobConfig)}
    return MainJobConfig(**{**values, "workdir": Path(args.workdir)})


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
        from gpuplace.jobs.config import DEFAULT_FLEET, MainJobConfig

        d = MainJobConfig()  # the defaults, written once there
        p.add_argument("--workdir", default=str(d.workdir), help="where run directories go")
        p.add_argument(
            "--model", default=d.model, help="model preset (default: tiny on a CPU, llama-3.1-8b on a GPU)"
        )
        p.add_argument("--device", default=d.device, help="profiling device: auto, cpu, cuda, cuda:N")
        p.add_argument(
            "--inventory",
            default=d.inventory,
            help="what to plan on (default: local, this machine, for the local target; else --fleet)",
        )
        p.add_argument(
            "--fleet",
            default=d.fleet,
            help="a fleet (bundled name, fleet YAML or CSV) also planned and shown as a prediction for its "
            f"GPUs (default {DEFAULT_FLEET}); with --target kubernetes, the fleet planned on, which must "
            "match the cluster (default: the cluster's own nodes)",
        )
        p.add_argument(
            "--slo-tpot-ms", type=float, default=d.slo_tpot_ms, help="p99 time per output token target, ms"
        )
        p.add_argument(
            "--slo-ttft-ms", type=float, default=d.slo_ttft_ms, help="p99 time to first token target, ms"
        )
        p.add_argument(
            "--rate", type=float, default=d.rate, help="target and load-test request rate, requests/s"
        )
        p.add_argument(
            "--prompt-tokens",
            default=d.prompt_tokens,
            help="prompt length of the planned and sent traffic: N, uniform:LO:HI or normal:MEAN:STD",
        )
        p.add_argument("--output-tokens", default=d.output_tokens, help="output length, same forms")
        p.add_argument(
            "--max-requests", type=int, default=d.max_requests, help="requests the load test sends"
        )
        p.add_argument(
            "--trace", default=d.trace, help="Azure-format trace CSV to replay instead of synthetic load"
        )
        p.add_argument(
            "--compare", action="store_true", help="run orchestration_comparison (native vs Kubeflow)"
        )
        p.add_argument(
            "--repeats",
            type=int,
            default=d.repeats,
            help="with --compare: deploy and load-test each path N times, the paths' runs interleaved "
            "(kubeflow, native, kubeflow, ...); the verdict's interval comes from the runs, a linear drift "
            f"of the machine over them removed, and fewer than 3 cannot name a winner (default {d.repeats})",
        )
        p.add_argument("--target", default=d.target, choices=["local", "kubernetes"], help="serving target")
        p.add_argument("--kubeconfig", default=d.kubeconfig, help="the cluster for --target kubernetes")
        p.add_argument("--namespace", default=d.namespace, help="namespace for --target kubernetes")
        p.add_argument(
            "--runtime",
            choices=("auto", "kubelet", "standin", "none"),
            default=d.runtime,
            help="what serves the pods with --target kubernetes (gpuplace deploy --runtime)",
        )
        p.add_argument(
            "--mlflow-uri",
            default=d.mlflow_uri,
            help="MLflow server (default: $MLFLOW_TRACKING_URI, else a local store)",
        )
        p.add_argument("--verbose", action="store_true", help="show the runner's and the tasks' own logs")

    def run(self, args: argparse.Namespace) -> int:
        from gpuplace.jobs.main import PipelineFailed, format_summary, run_main_job

        config = config_from_args(args)
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
