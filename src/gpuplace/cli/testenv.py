"""``gpuplace testenv up|down|status|kubeconfig|build``: the local control plane from the command line."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

from gpuplace.cli.base import Command


class TestenvCommand(Command):
    name = "testenv"
    help = "a real local Kubernetes control plane with simulated GPU nodes"
    description = (
        "Start, inspect and stop a local control plane (etcd, kube-apiserver, kube-scheduler,\n"
        "kube-controller-manager, KWOK) whose simulated nodes mirror a fleet, GPU labels and resources\n"
        "included (docs/testenv.md). The binaries are built once from Go modules (make k8s-bins)."
    )
    epilog = (
        "example: gpuplace testenv up --fleet h100-nvlink\n"
        '         export KUBECONFIG="$(gpuplace testenv kubeconfig)"'
    )

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--state-dir",
            default=None,
            help="where its state lives (default: $GPUPLACE_TESTENV_DIR or ~/.local/state/gpuplace/testenv)",
        )
        verbs = p.add_subparsers(dest="testenv_command", required=True)
        up = verbs.add_parser("up", help="start it and add the fleet's nodes; prints the kubeconfig path")
        up.add_argument("--fleet", default="", help="bundled fleet name (e.g. h100-nvlink) or a fleet YAML")
        up.add_argument("--build", action="store_true", help="build missing binaries first (make k8s-bins)")
        up.add_argument("--timeout", type=float, default=90.0, help="seconds each start-up stage may take")
        up.set_defaults(verb=_cmd_up)
        verbs.add_parser("down", help="stop every process it started").set_defaults(verb=_cmd_down)
        verbs.add_parser("status", help="processes, ports, readiness (JSON)").set_defaults(verb=_cmd_status)
        verbs.add_parser("kubeconfig", help="print the kubeconfig path").set_defaults(verb=_cmd_kubeconfig)
        verbs.add_parser("build", help="build the binaries into the cache (make k8s-bins)").set_defaults(
            verb=_cmd_build
        )

    def run(self, args: argparse.Namespace) -> int:
        verb: Callable[[argparse.Namespace], int] = args.verb
        return verb(args)


def _state_dir(args: argparse.Namespace) -> Path | None:
    return Path(args.state_dir) if args.state_dir else None


def _cmd_up(args: argparse.Namespace) -> int:
    from gpuplace.testenv import load_fleet, up

    inventory = load_fleet(args.fleet) if args.fleet else None
    cp = up(inventory, state_dir=_state_dir(args), build=args.build, timeout_s=args.timeout)
    nodes = f", {len(inventory.nodes)} simulated nodes" if inventory else ""
    print(f"control plane up in {cp.start_s:.1f} s at {cp.server}{nodes}; logs in {cp.log_dir}")
    print(cp.kubeconfig)
    return 0


def _cmd_down(args: argparse.Namespace) -> int:
    from gpuplace.testenv import down

    cp = down(_state_dir(args))
    print(f"stopped the control plane in {cp.state_dir}")
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    from gpuplace.testenv import ControlPlane

    cp = ControlPlane.load(_state_dir(args))
    summary = cp.summary()
    summary["ready"] = cp.ready()
    print(json.dumps(summary, indent=2))
    return 0 if cp.running else 1


def _cmd_kubeconfig(args: argparse.Namespace) -> int:
    from gpuplace.testenv import ControlPlane, ControlPlaneError

    cp = ControlPlane.load(_state_dir(args))
    if not cp.running:
        raise ControlPlaneError(
            f"the control plane in {cp.state_dir} is not running; start it with `gpuplace testenv up`"
        )
    print(cp.kubeconfig)
    return 0


def _cmd_build(args: argparse.Namespace) -> int:
    from gpuplace.testenv import binaries

    print(binaries.build())
    return 0
