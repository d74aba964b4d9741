"""``gpuplace report``: re-render the report and plots of an existing ``comparison.json``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gpuplace.cli.base import Command


class ReportCommand(Command):
    name = "report"
    help = "render the Markdown/HTML report and plots of a comparison.json"
    description = "Re-render the report of a comparison (e.g. after an upgrade), without measuring again."

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("comparison", help="comparison.json written by gpuplace compare")
        p.add_argument(
            "--native-loadtest", default="", help="the native path's load-test folder, for its distributions"
        )
        p.add_argument("--kubeflow-loadtest", default="", help="the Kubeflow path's load-test folder")
        p.add_argument("--out", default="", help="output folder (default: the comparison's folder)")

    def run(self, args: argparse.Namespace) -> int:
        from gpuplace.compare.step import loadtest_records, read_comparison
        from gpuplace.report import write_report

        src = Path(args.comparison)
        comparison = read_comparison(src)
        records = {
            p: loadtest_records(d)
            for p, d in (("native", args.native_loadtest), ("kubeflow", args.kubeflow_loadtest))
            if d
        }
        files = write_report(
            comparison, args.out or src.parent, records={k: v for k, v in records.items() if v} or None
        )
        print(
            json.dumps(
                {
                    "markdown": str(files.markdown),
                    "html": str(files.html),
                    "plots": {k: str(v) for k, v in files.plots.items()},
                },
                indent=2,
            )
        )
        return 0
