"""What ``gpuplace run --target kubernetes`` plans on: the cluster's own inventory, or a ``--fleet`` that
matches it.

A plan for nodes the cluster does not have pins its pods to nothing: they stay Pending (a user once
waited 600 s on a task pod pinned to ``l4-shared-0`` of the default fleet, on a testenv started with
``h100-nvlink``). So without ``--fleet`` the run reads the cluster's nodes (:mod:`gpuplace.inventory.cluster`)
and plans on them, written as an inventory JSON in the run directory; with ``--fleet`` every node of the
fleet must be a node of the cluster, else the run is refused before anything starts, naming both.
"""

from __future__ import annotations

from pathlib import Path

from gpuplace.errors import InvalidInput
from gpuplace.types import Inventory


def read_cluster_inventory(kubeconfig: str) -> Inventory:
    from gpuplace.inventory.cluster import inventory_from_cluster
    from gpuplace.k8s.client import connect

    client = connect(kubeconfig)
    try:
        return inventory_from_cluster(client=client)
    finally:
        client.close()


def _testenv_fleet(kubeconfig: str) -> str:
    """The fleet a gpuplace testenv was started with ("" when not a testenv or unknown)."""
    from gpuplace.testenv.controlplane import STATE_FILE, ControlPlane, is_testenv_kubeconfig

    state_dir = Path(kubeconfig).resolve().parent
    if not is_testenv_kubeconfig(kubeconfig) or not (state_dir / STATE_FILE).is_file():
        return ""
    return ControlPlane.load(state_dir).fleet


def check_fleet_matches(fleet: Inventory, spec: str, cluster: Inventory, kubeconfig: str) -> None:
    """Refuse ``fleet`` (given as ``spec``) unless every one of its nodes is a node of ``cluster``."""
    have = {n.name for n in cluster.nodes}
    missing = sorted(n.name for n in fleet.nodes if n.name not in have)
    if not missing:
        return
    gpu_nodes = sorted(n.name for n in cluster.nodes if n.gpus)
    started = _testenv_fleet(kubeconfig)
    which = f" (a gpuplace testenv started with --fleet {started})" if started else ""
    shown = ", ".join(gpu_nodes[:6]) + (f" and {len(gpu_nodes) - 6} more" if len(gpu_nodes) > 6 else "")
    raise InvalidInput(
        "fleet",
        spec,
        f"does not match the cluster of {kubeconfig}{which}: {len(missing)} of its {len(fleet.nodes)} nodes "
        f"are not in the cluster (e.g. {', '.join(missing[:3])}); the cluster's GPU nodes are "
        f"{shown or 'none'}",
        "Leave --fleet out to plan on the cluster's own nodes"
        + (f", or pass --fleet {started}" if started else ""),
    )


def cluster_inventory_file(kubeconfig: str, fleet_spec: str, out: Path) -> str:
    """The inventory a kubernetes run plans on: ``fleet_spec`` when it matches the cluster, else (when
    none is given) the cluster's own nodes, written to ``out`` as inventory JSON; returns the spec."""
    from gpuplace.inventory import load_inventory
    from gpuplace.inventory.jsonfile import write_inventory_json

    cluster = read_cluster_inventory(kubeconfig)
    if fleet_spec:
        check_fleet_matches(load_inventory(fleet_spec), fleet_spec, cluster, kubeconfig)
        return fleet_spec
    if not any(n.gpus for n in cluster.nodes):
        raise InvalidInput(
            "kubeconfig",
            kubeconfig,
            "the cluster has no GPU nodes to plan on",
            "Start the testenv with a fleet (gpuplace testenv up --fleet h100-nvlink), or pass --inventory",
        )
    return str(write_inventory_json(cluster, out))
