"""The fleet inventory: from a fleet file (or a bundled fleet by name), a live cluster, or a trace.

Every source ends as one :class:`~gpuplace.types.Inventory` that the planner, the simulated control
plane and the extender read. :func:`load_inventory` resolves a ``--inventory`` value: a bundled fleet
name (``mixed-a100-h100-l4``, ``h100-nvlink``), a path to a fleet YAML (docs/inventory.md), an
Alibaba node-list CSV (``*.csv``), an inventory JSON written by ``gpuplace inventory --out``,
``local`` (this machine, :mod:`gpuplace.inventory.local`), or ``cluster`` (the current kubeconfig
context). Only the cluster
source talks to Kubernetes, and only it imports the kubernetes client (lazily, in
:mod:`gpuplace.inventory.cluster`).
"""

from __future__ import annotations

import re
from pathlib import Path

from gpuplace.catalog import GpuCatalog, load_gpu_catalog
from gpuplace.errors import InvalidInput, UnknownName
from gpuplace.inventory.fleetfile import SCHEMA, parse_fleet, read_fleet_file, require_gpus
from gpuplace.inventory.local import LOCAL, local_inventory
from gpuplace.types import Inventory

DATA_DIR = Path(__file__).parent / "data"


def bundled_fleet_names() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in DATA_DIR.glob("*.yaml")))


def bundled_fleet_path(name: str) -> Path:
    path = DATA_DIR / f"{name}.yaml"
    if not path.is_file():
        raise UnknownName("inventory", name, bundled_fleet_names())
    return path


def load_inventory(spec: str, *, catalog: GpuCatalog | None = None) -> Inventory:
    """The inventory that ``spec`` names: a bundled fleet, a fleet YAML, an Alibaba CSV, or ``cluster``.

    ``cluster`` reads the current kubeconfig context; use
    :func:`gpuplace.inventory.cluster.inventory_from_cluster` to pass a client explicitly.
    """
    catalog = catalog or load_gpu_catalog()
    if spec == LOCAL:
        return local_inventory(catalog)
    if spec == "cluster":
        from gpuplace.inventory.cluster import inventory_from_cluster

        return inventory_from_cluster(catalog=catalog)
    path = Path(spec).expanduser()
    if path.suffix in (".yaml", ".yml", ".csv", ".json") or path.exists() or "/" in spec:
        if not path.is_file():
            raise InvalidInput(
                "inventory",
                spec,
                "no such file",
                "Give a fleet YAML, an Alibaba node CSV, 'cluster', or a bundled fleet: "
                + ", ".join(bundled_fleet_names()),
            )
        if path.suffix == ".csv":
            from gpuplace.inventory.alibaba import read_alibaba_nodes

            return read_alibaba_nodes(path, catalog=catalog)
        # KFP artifacts have no suffix: an inventory JSON is recognised by its first character.
        if path.suffix == ".json" or re.match(r'\s*\{\s*"source"', path.read_text(errors="replace")[:64]):
            from gpuplace.inventory.jsonfile import read_inventory_json

            inventory = read_inventory_json(path)
            if inventory.source != LOCAL:  # this machine may have no GPU: it is planned with its CPU
                require_gpus(inventory, "inventory")
            return inventory
        return read_fleet_file(path, catalog)
    return read_fleet_file(bundled_fleet_path(spec), catalog, source=spec)


__all__ = [
    "SCHEMA",
    "bundled_fleet_names",
    "bundled_fleet_path",
    "load_inventory",
    "parse_fleet",
    "read_fleet_file",
    "require_gpus",
]
