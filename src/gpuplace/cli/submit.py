"""``gpuplace submit``: a pipeline run on a Kubeflow Pipelines API, through the kfp SDK."""

from __future__ import annotations

import argparse

from gpuplace.cli.base import Command


class SubmitCommand(Command):
    name = "submit"
    help = "submit a pipeline run to a Kubeflow Pipelines API with the kfp SDK"
    description = (
        "Check the arguments against the pipeline's parameters, then start a run on a Kubeflow\n"
        "Pipelines API (docs/pipelines.md). --upload also uploads the pipeline (a new version when the\n"
        "name exists) and runs that version; --wait polls until the run ends."
    )
    epilog = (
        "example: gpuplace submit llm_placement --host https://kubeflow.example.com/pipeline \\\n"
        "           --param model=llama-3.1-8b --param slo_tpot_ms=50 --experiment capacity"
    )

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        from gpuplace.jobs.submit import pipeline_names_for_help

        p.add_argument("pipeline", help=f"pipeline name, of {pipeline_names_for_help()}")
        p.add_argument(
            "--host", required=True, help="KFP API URL, e.g. https://kubeflow.example.com/pipeline"
        )
        p.add_argument(
            "--param", action="append", default=[], metavar="KEY=VALUE", help="a pipeline argument"
        )
        p.add_argument("--experiment", default="gpuplace", help="experiment to run in (created when missing)")
        p.add_argument("--run-name", default=None, help="the run's name (default: pipeline name and time)")
        p.add_argument("--token", default=None, help="an existing bearer token (default: $KFP_TOKEN)")
        p.add_argument(
            "--namespace", default=None, help="the Kubeflow profile namespace (multi-user installs)"
        )
        p.add_argument("--upload", action="store_true", help="also upload the package as a pipeline")
        p.add_argument(
            "--wait", type=float, default=None, metavar="SECONDS", help="wait for the run to finish"
        )

    def run(self, args: argparse.Namespace) -> int:
        import os

        from gpuplace.jobs.submit import submit

        result = submit(
            args.pipeline,
            host=args.host,
            params=args.param,
            experiment=args.experiment,
            run_name=args.run_name,
            token=args.token or os.environ.get("KFP_TOKEN"),
            namespace=args.namespace,
            upload=args.upload,
            wait_timeout_s=args.wait,
        )
        print(f"run {result.run_id} in experiment {result.experiment_id or '-'}: {result.url}")
        if result.pipeline_id:
            print(f"uploaded pipeline {result.pipeline_id}, version {result.pipeline_version_id}")
        if result.state:
            print(f"state: {result.state}")
        return 0
