"""``gpuplace deploy``: a plan directory → :func:`gpuplace.deploy.deploy` → ``deployment.json``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpuplace.cli.base import Command

TARGETS = ("kubernetes", "local")


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
        p.add_argument("plan_dir", help="the plan directory `gpuplace plan --out` wrote (or its plan.json)")
        p.add_argument("--target", choices=TARGETS, default="kubernetes", help="where to deploy")
        p.add_argument(
            "--kubeconfig",
            default=None,
            help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, else in-cluster)",
        )
        p.add_argument("--context", default=None, help="kubeconfig context (default: the current one)")
        p.add_argument("--namespace", default="default", help="namespace to deploy into")
        p.add_argument(
            "--run-id", default="", help="pipeline run id to label objects with (default: $KFP_RUN_ID)"
        )
        p.add_argument("--timeout", type=float, default=300.0, help="deadline for apply + rollout, seconds")
        p.add_argument(
            "--on-failure",
            choices=("teardown", "rollback", "keep"),
            default="teardown",
            help="what to do with applied objects when the rollout fails",
        )
        p.add_argument(
            "--gpu-api",
            choices=("auto", "dra", "device-plugin"),
            default="auto",
            help="how pods get GPUs: dra claims each replica's planned devices (placement measured per GPU); "
            "device-plugin uses nvidia.com/gpu (node level only); auto: dra when the DRA driver publishes "
            "every planned GPU",
        )
        p.add_argument(
            "--runtime",
            choices=("auto", "kubelet", "standin", "none"),
            default="auto",
            help="what serves the pods: kubelet (a real cluster; first request through the API server's pod "
            "proxy), standin (KWOK: a local engine per pod on this machine), none (do not wait for the first "
            "request: provisioning unknown); auto: standin on a gpuplace testenv, else kubelet",
        )
        p.add_argument(
            "--allow-misplacement",
            action="store_true",
            help="keep a deployment whose pods are not where the plan put them (default: fail and clean up)",
        )
        p.add_argument(
            "--create-namespace", action="store_true", help="create the namespace when it does not exist"
        )
        p.add_argument("--out", default=".", help="directory for deployment.json")

    def run(self, args: argparse.Namespace) -> int:
        from gpuplace.deploy import deploy, format_record, write_record
        from gpuplace.k8s.measure import PlacementMismatch

        try:
            record = deploy(
                args.plan_dir,
                target=args.target,
                kubeconfig=args.kubeconfig,
                context=args.context,
                namespace=args.namespace,
                run_id=args.run_id,
                timeout_s=args.timeout,
                on_failure=args.on_failure,
                workdir=Path(args.out) / "local",
                log=lambda m: print(m, file=sys.stderr, flush=True),
                gpu_api=args.gpu_api,
                runtime=args.runtime,
                allow_misplacement=args.allow_misplacement,
                create_namespace=args.create_namespace,
            )
        except PlacementMismatch as e:
            path = write_record(e.record, args.out)
            print(format_record(e.record))
            print(f"wrote {path} (placement does not match the plan)")
            raise
        path = write_record(record, args.out)
        print(format_record(record))
        print(f"wrote {path}")
        return 0
