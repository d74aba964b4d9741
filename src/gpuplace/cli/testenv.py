"""``gpuplace testenv up|down|status|kubeconfig|build|crds``: the local control plane from the CLI."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

from gpuplace.cli.base import Command, HelpFormatter
from gpuplace.types.fleet import DEFAULT_FLEET

STATE_DIR_HELP = "where its state lives (default: $GPUPLACE_TESTENV_DIR or ~/.local/state/gpuplace/testenv)"


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
        p.add_argument("--state-dir", default=None, help=STATE_DIR_HELP)
        verbs = p.add_subparsers(dest="testenv_command", required=True)

        def verb(name: str, help: str, call: Callable[[argparse.Namespace], int]) -> argparse.ArgumentParser:
            # --state-dir is taken after the verb too (`testenv up --state-dir X`), as the errors suggest it
            v = verbs.add_parser(name, help=help, description=help, formatter_class=HelpFormatter)
            v.add_argument("--state-dir", default=argparse.SUPPRESS, help=STATE_DIR_HELP)
            v.set_defaults(verb=call)
            return v

        up = verb("up", "start it and add the fleet's nodes; prints the kubeconfig path", _cmd_up)
        up.add_argument(
            "--fleet",
            default=DEFAULT_FLEET,
            help="bundled fleet name (h100-nvlink, mixed-a100-h100-l4), a fleet YAML or an Alibaba node CSV; "
            f"'none' for no simulated nodes (default: {DEFAULT_FLEET}, the fleet gpuplace run plans on)",
        )
        up.add_argument("--build", action="store_true", help="build missing binaries first (make k8s-bins)")
        up.add_argument(
            "--real-node",
            action="store_true",
            help="also start a real node here: containerd, runc and a kubelet (root; make node-deps)",
        )
        up.add_argument("--timeout", type=float, default=90.0, help="seconds each start-up stage may take")
        verb("down", "stop every process it started", _cmd_down)
        verb("status", "processes, ports, readiness (JSON)", _cmd_status)
        verb("kubeconfig", "print the kubeconfig path", _cmd_kubeconfig)
        verb("build", "build the binaries into the cache, the kubelet included (make k8s-bins)", _cmd_build)
        crds = verb("crds", "install the upstream CRDs the emitted forms use (docs/deploy.md)", _cmd_crds)
        crds.add_argument(
            "--dir",
            default="",
            help="a folder of CRD YAML files (default: $GPUPLACE_SHARED_CRDS, else ../shared/crds beside the "
            "repository)",
        )
        crds.add_argument("--timeout", type=float, default=180.0, help="seconds the install may take")

    def run(self, args: argparse.Namespace) -> int:
        verb: Callable[[argparse.Namespace], int] = args.verb
        return verb(args)


def _state_dir(args: argparse.Namespace) -> Path | None:
    return Path(args.state_dir) if args.state_dir else None


def _cmd_up(args: argparse.Namespace) -> int:
    from gpuplace.testenv import load_fleet, up

    inventory = load_fleet(args.fleet) if args.fleet not in ("", "none") else None
    cp = up(
        inventory,
        state_dir=_state_dir(args),
        build=args.build,
        timeout_s=args.timeout,
        real_node=args.real_node,
    )
    nodes = (
        f", {len(inventory.nodes)} simulated nodes of fleet {args.fleet}"
        if inventory
        else ", no simulated nodes (--fleet none)"
    )
    print(f"control plane up in {cp.start_s:.1f} s at {cp.server}{nodes}; logs in {cp.log_dir}")
    if args.real_node:
        from gpuplace.testenv.realnode import RealNode

        node = RealNode.load(cp.state_dir)
        if node is not None:
            print(f"real node {node.name} Ready in {node.start_s:.1f} s (containerd + runc + kubelet)")
            for image, took in node.imported.items():
                print(f"  loaded {image} into its containerd in {took:.1f} s")
    print(cp.kubeconfig)
    return 0


def _cmd_down(args: argparse.Namespace) -> int:
    from gpuplace.testenv import down

    cp, servers = down(_state_dir(args))
    stopped = f"; stopped {servers} stand-in server(s) still running against it" if servers else ""
    print(f"stopped the control plane in {cp.state_dir}{stopped}")
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

    print(binaries.build(node=True))
    return 0


def _crds_dir(given: str) -> Path:
    import os

    import gpuplace
    from gpuplace.errors import InvalidInput

    repo = Path(gpuplace.__file__).resolve().parents[2]
    folder = Path(given or os.environ.get("GPUPLACE_SHARED_CRDS") or repo.parent / "shared" / "crds")
    if not sorted(folder.glob("*.yaml")):
        raise InvalidInput("dir", str(folder), "holds no CRD YAML files", "Pass --dir with the upstream CRDs")
    return folder


def _cmd_crds(args: argparse.Namespace) -> int:
    from gpuplace.k8s import Api, connect
    from gpuplace.k8s.crds import install_crds
    from gpuplace.testenv import ControlPlane, ControlPlaneError

    folder = _crds_dir(args.dir)
    cp = ControlPlane.load(_state_dir(args))
    if not cp.running:
        raise ControlPlaneError(
            f"the control plane in {cp.state_dir} is not running; start it with `gpuplace testenv up`"
        )
    api = Api(connect(cp.kubeconfig))
    try:
        names = install_crds(api, sorted(folder.glob("*.yaml")), timeout_s=args.timeout)
    finally:
        api.client.close()
    print(f"installed {len(names)} CRDs from {folder}: {', '.join(names)}")
    return 0
