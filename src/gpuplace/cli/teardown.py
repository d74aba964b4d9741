"""``gpuplace teardown``: remove what ``gpuplace deploy`` created, named by plan, record or run id."""

from __future__ import annotations

import argparse

from gpuplace.cli.base import Command
from gpuplace.cli.deploy import TARGETS


class TeardownCommand(Command):
    name = "teardown"
    help = "remove what gpuplace deploy created"
    description = (
        "Delete every object a deploy created (a 404 counts as done) and wait for its pods to go; for\n"
        "the local target, stop the server. Name the deployment by its plan directory, its\n"
        "deployment.json (--record) or the run id it was labelled with (--run-id)."
    )

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("plan_dir", nargs="?", default=None, help="the plan directory that was deployed")
        p.add_argument("--target", choices=TARGETS, default="kubernetes", help="where it was deployed")
        p.add_argument(
            "--kubeconfig",
            default=None,
            help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, else in-cluster)",
        )
        p.add_argument("--context", default=None, help="kubeconfig context (default: the current one)")
        p.add_argument("--namespace", default="default", help="namespace it was deployed into")
        p.add_argument(
            "--record", default=None, help="deployment.json of the deploy (the local target's server)"
        )
        p.add_argument(
            "--run-id", default="", help="tear down what was labelled with this run id (no plan needed)"
        )
        p.add_argument(
            "--timeout", type=float, default=120.0, help="deadline for deleting and waiting, seconds"
        )

    def run(self, args: argparse.Namespace) -> int:
        from gpuplace.deploy import read_record, teardown

        print(
            teardown(
                args.plan_dir,
                target=args.target,
                kubeconfig=args.kubeconfig,
                context=args.context,
                namespace=args.namespace,
                record=read_record(args.record, "record") if args.record else None,
                run_id=args.run_id,
                timeout_s=args.timeout,
            )
        )
        return 0
