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
        from gpuplace.jobs.config import MainJobConfig
        from gpuplace.params import add_flags
        from gpuplace.steps.run_params import run_flags
        from gpuplace.types.fleet import DEFAULT_FLEET

        d = MainJobConfig()  # the run's own defaults; the pipeline parameters' come from the run table
        p.add_argument("--workdir", default=str(d.workdir), help="where run directories go")
        p.add_argument(
            "--fleet",
            default=d.fleet,
            help="a fleet (bundled name, fleet YAML or CSV) also planned and shown as a prediction for its "
            f"GPUs (default {DEFAULT_FLEET}); with --target kubernetes, the fleet planned on, which must "
            "match the cluster (default: the cluster's own nodes)",
        )
        p.add_argument(
            "--compare", action="store_true", help="run orchestration_comparison (native vs Kubeflow)"
        )
        p.add_argument("--verbose", action="store_true", help="show the runner's and the tasks' own logs")
        add_flags(
            p.add_argument_group("pipeline parameters (the run table, gpuplace.steps.run_params)"),
            run_flags(),
        )

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
