"""``gpuplace rbac``: print the deploy step's least-privilege ServiceAccount, Role and RoleBinding."""

from __future__ import annotations

import argparse

from gpuplace.cli.base import Command


class RbacCommand(Command):
    name = "rbac"
    help = "print the deploy step's least-privilege ServiceAccount, Role and RoleBinding"
    description = (
        "What the deploy and teardown steps need in a namespace, and nothing more (docs/deploy.md).\n"
        "The namespace must exist before this is applied (kubectl create namespace NS), or print it\n"
        "first with --with-namespace."
    )
    epilog = "example: gpuplace rbac --namespace serving --with-namespace | kubectl apply -f -"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--namespace", default="default", help="namespace the Role grants access to")
        p.add_argument("--name", default="gpuplace-deployer", help="name of the three objects")
        p.add_argument(
            "--with-namespace",
            action="store_true",
            help="also print the Namespace itself, first (applying the rest fails when it does not exist)",
        )

    def run(self, args: argparse.Namespace) -> int:
        from gpuplace.k8s.rbac import render_yaml

        if args.with_namespace:
            print(f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {args.namespace}\n---")
        print(render_yaml(args.namespace, args.name), end="")
        return 0
