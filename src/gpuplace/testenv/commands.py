"""``gpuplace testenv up|down|status|kubeconfig|build``: the local control plane from the command line."""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "testenv",
        help="a real local Kubernetes control plane with simulated GPU nodes (docs/testenv.md)",
        description="Start, inspect and stop a local control plane (etcd, kube-apiserver, kube-scheduler, "
        "kube-controller-manager, KWOK) whose fake nodes mirror a fleet.",
    )
    p.add_argument(
        "--state-dir", default=None, help="default: $GPUPLACE_TESTENV_DIR or ~/.local/state/gpuplace/testenv"
    )
    tsub = p.add_subparsers(dest="testenv_command", required=True)
    up = tsub.add_parser("up", help="start it and add the fleet's nodes; prints the kubeconfig path")
    up.add_argument("--fleet", default="", help="bundled fleet name (e.g. h100-nvlink) or fleet YAML path")
    up.add_argument("--build", action="store_true", help="build missing binaries first (make k8s-bins)")
    up.add_argument("--timeout", type=float, default=90.0, help="seconds each start-up stage may take")
    up.set_defaults(func=_cmd_up)
    down = tsub.add_parser("down", help="stop every process it started")
    down.set_defaults(func=_cmd_down)
    status = tsub.add_parser("status", help="processes, ports, readiness (JSON)")
    status.set_defaults(func=_cmd_status)
    kc = tsub.add_parser("kubeconfig", help="print the kubeconfig path")
    kc.set_defaults(func=_cmd_kubeconfig)
    build = tsub.add_parser("build", help="build the binaries into the cache (what make k8s-bins runs)")
    build.set_defaults(func=_cmd_build)


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
