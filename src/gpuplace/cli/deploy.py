"""``gpuplace deploy``: a plan directory → :mod:`gpuplace.steps.deploy` → ``deployment.json``; the flags are
the step's parameter table (:data:`gpuplace.steps.deploy.PARAMS`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpuplace.cli.base import Command


class DeployCommand(Command):
    name = "deploy"
    help = "deploy a plan directory to a cluster or to a local inference server"
    description = (
        "kubernetes: server-side apply the plan's manifests (dry run first, so a rejected object means\n"
        "nothing is applied), wait for the rollout under one deadline, record where each pod landed and\n"
        "how long it took, and tear down (or roll back) on failure. local: start the plan's model in an\n"
        "OpenAI-compatible server on this machine. Writes deployment.json (docs/deploy.md)."
    )
    epilog = 'example: gpuplace deploy plan --kubeconfig "$(gpuplace testenv kubeconfig)" --out dep'

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        from gpuplace.params import add_flags
        from gpuplace.steps.deploy import PARAMS

        p.add_argument("plan_dir", help="the plan directory `gpuplace plan --out` wrote (or its plan.json)")
        add_flags(p, PARAMS)
        p.add_argument("--out", default=".", help="directory for deployment.json")

    def run(self, args: argparse.Namespace) -> int:
        from gpuplace.deploy import format_record
        from gpuplace.deploy.record import RECORD_FILE
        from gpuplace.k8s.measure import PlacementMismatch
        from gpuplace.steps.deploy import run_deploy_step

        path = Path(args.out) / RECORD_FILE
        try:
            record = run_deploy_step(
                args.plan_dir,
                path,
                vars(args),
                workdir=Path(args.out) / "local",
                log=lambda m: print(m, file=sys.stderr, flush=True),
            )
        except PlacementMismatch as e:
            print(format_record(e.record))
            print(f"wrote {path} (placement does not match the plan)")
            raise
        print(format_record(record))
        print(f"wrote {path}")
        return 0
