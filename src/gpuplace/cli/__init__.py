"""The ``gpuplace`` command: one module per subcommand, listed here in the order of the flow.

Each subcommand is a :class:`~gpuplace.cli.base.Command` (a name, help for users, its flags, and one
call into the library), registered by importing its module below, as vLLM's ``entrypoints/cli`` does.
The library is imported inside each command's ``run``, so ``gpuplace --help`` is instant and
``gpuplace profile`` works where kfp and mlflow are not installed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from gpuplace import __version__
from gpuplace.cli.base import Command, HelpFormatter
from gpuplace.cli.bench import BenchCommand
from gpuplace.cli.catalog import CatalogCommand
from gpuplace.cli.compare import CompareCommand
from gpuplace.cli.compile import CompileCommand
from gpuplace.cli.deploy import DeployCommand
from gpuplace.cli.extender import ExtenderCommand
from gpuplace.cli.inventory import InventoryCommand
from gpuplace.cli.loadtest import LoadTestCommand
from gpuplace.cli.plan import PlanCommand
from gpuplace.cli.predict import PredictCommand
from gpuplace.cli.profile import ProfileCommand
from gpuplace.cli.rbac import RbacCommand
from gpuplace.cli.report import ReportCommand
from gpuplace.cli.run import RunCommand
from gpuplace.cli.submit import SubmitCommand
from gpuplace.cli.teardown import TeardownCommand
from gpuplace.cli.testenv import TestenvCommand
from gpuplace.errors import GpuplaceError

# The flow first (profile → inventory → plan → deploy → load test → compare → report), then the jobs
# that run it end to end, then the tools.
COMMANDS: tuple[Command, ...] = (
    ProfileCommand(),
    InventoryCommand(),
    PlanCommand(),
    DeployCommand(),
    TeardownCommand(),
    LoadTestCommand(),
    CompareCommand(),
    ReportCommand(),
    RunCommand(),
    CompileCommand(),
    SubmitCommand(),
    PredictCommand(),
    CatalogCommand(),
    TestenvCommand(),
    ExtenderCommand(),
    RbacCommand(),
    BenchCommand(),
)

DESCRIPTION = """\
Measure, plan, deploy and compare LLM inference placement on Kubernetes GPUs.

The flow: profile a model on a device, read the fleet's inventory, plan the cheapest placement that
meets a latency SLO, deploy it, load-test it, compare the native and the Kubeflow path, report.
`gpuplace run` does all of it through kfp's local runner. Guides: docs/ in the repository."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpuplace", description=DESCRIPTION, formatter_class=HelpFormatter)
    parser.add_argument("--version", action="version", version=f"gpuplace {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="<command>")
    for command in COMMANDS:
        command.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    command: Command = args.command_object
    try:
        return int(command.run(args))
    except GpuplaceError as e:
        print(f"gpuplace {args.command}: error: {e}", file=sys.stderr)
        return e.exit_status
    except KeyboardInterrupt:
        print(f"gpuplace {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
