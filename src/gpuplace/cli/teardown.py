"""``gpuplace teardown``: remove what ``gpuplace deploy`` created, named by plan, record or run id."""

from __future__ import annotations

import argparse

from gpuplace.cli.base import Command


class TeardownCommand(Command):
    name = "teardown"
    help = "remove what gpuplace deploy created"
    description = (
        "Delete every object a deploy created (a 404 counts as done) and wait for its pods to go; for\n"
        "the local target, stop the server. Name the deployment by its plan directory, its\n"
        "deployment.json (--record) or the run id it was labelled with (--run-id)."
    )

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        from gpuplace.params import add_flags
        from gpuplace.steps.teardown import PARAMS

        p.add_argument("plan_dir", nargs="?", default=None, help="the plan directory that was deployed")
        p.add_argument(
            "--record", default=None, help="deployment.json of the deploy (the local target's server)"
        )
        add_flags(p, PARAMS)

    def run(self, args: argparse.Namespace) -> int:
        from gpuplace.steps.teardown import run_teardown_step

        print(run_teardown_step(args.plan_dir, vars(args), record=args.record))
        return 0
