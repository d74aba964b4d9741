"""``up``/``down`` of a local control plane with a simulated fleet: what ``gpuplace testenv`` and the
pytest fixture call.

``up`` resolves (or builds) the binaries, starts the control plane, waits for the ``default`` namespace's
ServiceAccount (pods cannot be created before it), registers one Node per inventory node and waits for
KWOK to mark them Ready, so the first deploy finds a cluster that can schedule.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path

from gpuplace.errors import GpuplaceError
from gpuplace.testenv import binaries
from gpuplace.testenv.controlplane import ControlPlane, ControlPlaneError, default_state_dir
from gpuplace.testenv.nodes import FLEET_LABEL, PLACEHOLDER_NAMESPACE, node_objects, placeholder_pods
from gpuplace.types import Inventory


def load_fleet(spec: str) -> Inventory:
    """A bundled fleet name or a fleet YAML path, through :func:`gpuplace.inventory.load_inventory`."""
    try:
        from gpuplace.inventory import load_inventory  # type: ignore[attr-defined,unused-ignore]
    except ImportError as e:
        raise GpuplaceError(
            f"gpuplace.inventory.load_inventory is not available ({e}); cannot load fleet {spec!r}"
        ) from e
    inventory: Inventory = load_inventory(spec)
    return inventory


def add_fleet(
    cp: ControlPlane,
    inventory: Inventory,
    *,
    timeout_s: float = 300.0,
    on_node: Callable[[str], None] | None = None,
) -> dict[str, int]:
    """Register ``inventory``'s nodes in ``cp``, wait until KWOK reports all of them Ready, bind a
    placeholder pod to each node for the GPUs the inventory says are already allocated, and publish the
    fleet's GPUs as DRA devices (:mod:`gpuplace.testenv.dra`)."""
    from gpuplace.k8s import Api, connect
    from gpuplace.k8s.nodes import register_nodes
    from gpuplace.k8s.retry import Deadline

    api = Api(connect(cp.kubeconfig))
    try:
        counts = register_nodes(api, list(node_objects(inventory)), timeout_s=timeout_s, on_done=on_node)
        wanted = {n.name for n in inventory.nodes}
        deadline = Deadline(timeout_s)
        while True:
            nodes = api.list("v1", "Node", label_selector=f"{FLEET_LABEL}=true", deadline=deadline)
            ready = {
                n["metadata"]["name"]
                for n in nodes
                if any(
                    c.get("type") == "Ready" and c.get("status") == "True"
                    for c in n.get("status", {}).get("conditions") or ()
                )
            }
            if wanted <= ready:
                break
            if deadline.expired:
                missing = sorted(wanted - ready)
                raise ControlPlaneError(
                    f"{len(missing)} simulated nodes not Ready within {timeout_s:g} s (e.g. {missing[:3]}); "
                    f"see {cp.log('kwok')}"
                )
            time.sleep(0.2)
        placeholders = placeholder_pods(inventory)
        if placeholders:
            namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PLACEHOLDER_NAMESPACE}}
            api.apply(namespace, deadline=deadline)
            # Pods are refused until their ServiceAccount exists; don't wait for the controller to make it.
            account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
            api.apply(account, PLACEHOLDER_NAMESPACE, deadline=deadline)
            for pod in placeholders:
                if (
                    api.get_or_none(
                        "v1", "Pod", pod["metadata"]["name"], PLACEHOLDER_NAMESPACE, deadline=deadline
                    )
                    is None
                ):
                    api.create(pod, PLACEHOLDER_NAMESPACE, deadline=deadline)
            counts["placeholder_pods"] = len(placeholders)
        from gpuplace.testenv import dra

        counts.update(dra.publish(api, inventory, deadline=deadline))
    finally:
        api.client.close()
    cp.fleet = inventory.source or cp.fleet
    cp.save()
    return counts


def wait_for_default_service_account(cp: ControlPlane, *, timeout_s: float = 60.0) -> None:
    from gpuplace.k8s import Api, connect
    from gpuplace.k8s.retry import Deadline

    api = Api(connect(cp.kubeconfig))
    deadline = Deadline(timeout_s)
    try:
        while api.get_or_none("v1", "ServiceAccount", "default", "default", deadline=deadline) is None:
            if deadline.expired:
                raise ControlPlaneError(
                    f"ServiceAccount default/default not created within {timeout_s:g} s; "
                    f"see {cp.log('kube-controller-manager')}"
                )
            time.sleep(0.1)
    finally:
        api.client.close()


def up(
    inventory: Inventory | None = None,
    *,
    state_dir: Path | None = None,
    build: bool = False,
    timeout_s: float = 90.0,
    real_node: bool = False,
) -> ControlPlane:
    """Start a control plane (building missing binaries first if ``build``); add ``inventory``'s nodes, and
    a real node (:mod:`gpuplace.testenv.realnode`) when ``real_node``."""
    state_dir = state_dir or default_state_dir()
    if real_node:
        from gpuplace.testenv.realnode import require_short_sockets

        require_short_sockets(state_dir)  # before anything is built or started
    if build:
        binaries.build(node=real_node)
    if real_node:
        binaries.resolve(binaries.NODE_NAMES)  # fail before starting anything
    from gpuplace.testenv.realnode import GATEWAY  # where the node's pods reach the API server

    cp = ControlPlane.start(
        state_dir, bins=binaries.resolve(), timeout_s=timeout_s, pod_gateway=GATEWAY if real_node else ""
    )
    try:
        wait_for_default_service_account(cp, timeout_s=timeout_s)
        if inventory is not None:
            add_fleet(cp, inventory)
        if real_node:
            from gpuplace.testenv.realnode import RealNode

            RealNode.start(cp, timeout_s=max(timeout_s, 120.0))
    except BaseException:
        stop(cp)
        raise
    return cp


SERVERS_DIR = "standin-servers"  # where gpuplace.deploy.standin registers the servers it starts


def stop_registered_servers(state_dir: Path) -> int:
    """Stop (SIGTERM to its process group, then SIGKILL) every server registered in
    ``<state_dir>/standin-servers/`` that still runs; returns how many did."""
    import json
    import os
    import signal

    from gpuplace.testenv.controlplane import process_start_ticks
    from gpuplace.testenv.nodeclean import stop_pid

    stopped = 0
    for path in sorted((state_dir / SERVERS_DIR).glob("*.json")):
        entry = json.loads(path.read_text())
        pid, ticks = int(entry["pid"]), entry.get("start_ticks")
        if ticks is not None and process_start_ticks(pid) == ticks:
            stopped += 1
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGTERM)  # the server and any worker it forked
            stop_pid(pid, ticks, timeout_s=10.0)
        path.unlink()
    return stopped


def stop(cp: ControlPlane) -> int:
    """Stop every stand-in server started against this testenv, the real node (if any) while the API
    server still answers, then the control plane; returns how many stand-in servers were running."""
    from gpuplace.testenv.realnode import RealNode

    servers = stop_registered_servers(cp.state_dir)
    node = RealNode.load(cp.state_dir)
    if node is not None:
        node.stop(cp)
    cp.stop()
    return servers


def down(state_dir: Path | None = None) -> tuple[ControlPlane, int]:
    """Stop the testenv in ``state_dir``: (it, how many stand-in servers were still running)."""
    cp = ControlPlane.load(state_dir)
    return cp, stop(cp)
