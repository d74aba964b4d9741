"""``gpuplace rbac``: print the deploy step's least-privilege ServiceAccount, Role and RoleBinding."""

from __future__ import annotations

import argparse

from gpuplace.cli.base import Command


class RbacCommand(Command):
    name = "rbac"
    help = "print the deploy step's least-privilege ServiceAccount, Role and RoleBinding"
    description = "What the deploy and teardown steps need in a namespace, and nothing more (docs/deploy.md)."
    epilog = "example: gpuplace rbac --namespace serving | kubectl apply -f -"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--namespace", default="default", help="namespace the Role grants access to")
        p.add_argument("--name", default="gpuplace-deployer", help="name of the three objects")

    def run(self, args: argparse.Namespace) -> int:
        from gpuplace.k8s.rbac import render_yaml

        print(render_yaml(args.namespace, args.name), end="")
        return 0
