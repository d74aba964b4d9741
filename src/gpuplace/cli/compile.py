"""``gpuplace compile`` (``make compile``): the pipelines to their checked-in ``pipeline.yaml``."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpuplace.cli.base import Command


class CompileCommand(Command):
    name = "compile"
    help = "compile the pipelines to their checked-in pipeline.yaml (what make compile runs)"
    description = (
        "Compile gpuplace's pipelines with the kfp compiler. The YAML is checked in beside each\n"
        "pipeline (pipelines/<name>/pipeline.yaml) to upload in the Kubeflow UI; a test fails when it\n"
        "is stale."
    )

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        from gpuplace.jobs.submit import pipeline_names_for_help

        p.add_argument(
            "pipelines", nargs="*", help=f"pipeline names, of {pipeline_names_for_help()} (none: all)"
        )
        p.add_argument("--out", default=None, help="write here instead (one pipeline only)")

    def run(self, args: argparse.Namespace) -> int:
        from gpuplace.errors import InvalidInput
        from gpuplace.jobs.submit import compile_pipeline, pipeline_names

        names = args.pipelines or list(pipeline_names())
        if args.out and len(names) != 1:
            raise InvalidInput(
                "out", args.out, "needs exactly one pipeline name", "e.g. gpuplace compile llm_placement"
            )
        for name in names:
            print(f"compiled {name} -> {compile_pipeline(name, Path(args.out) if args.out else None)}")
        return 0
