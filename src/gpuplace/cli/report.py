"""``gpuplace report``: re-render the report and plots of an existing ``comparison.json``."""

from __future__ import annotations

import argparse

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
        from gpuplace.report.render import verdict_line
        from gpuplace.steps.compare import run_report_step

        comparison, files = run_report_step(
            args.comparison,
            args.out,
            {"native": args.native_loadtest, "kubeflow": args.kubeflow_loadtest},
        )
        for note in comparison.notes:
            print(f"note: {note}")
        print(verdict_line(comparison).replace("**", ""))
        print(f"report     : {files.markdown} and {files.html}")
        print(f"plots      : {', '.join(str(p) for p in files.plots.values()) or 'none'}")
        return 0
