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
from dataclasses import dataclass
from pathlib import Path

from gpuplace.catalog import GpuCatalog, load_gpu_catalog
from gpuplace.errors import InvalidInput, UnknownName
from gpuplace.inventory.fleetfile import SCHEMA, parse_fleet, read_fleet_file, require_gpus
from gpuplace.inventory.local import local_inventory
from gpuplace.types import Inventory
from gpuplace.types.fleet import is_local_inventory

DATA_DIR = Path(__file__).parent / "data"


def bundled_fleet_names() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in DATA_DIR.glob("*.yaml")))


def bundled_fleet_path(name: str) -> Path:
    path = DATA_DIR / f"{name}.yaml"
    if not path.is_file():
        raise UnknownName("inventory", name, bundled_fleet_names())
    return path


@dataclass(frozen=True, slots=True)
class InventorySource:
    """A ``--inventory`` value, interpreted once: what it names (``kind``) and the file it is (``path``).

    ``kind`` is ``local`` (this machine), ``cluster`` (the current kubeconfig context), ``alibaba`` (a
    node-list CSV of the Alibaba trace), ``json`` (an inventory JSON, :mod:`.jsonfile`), ``fleet`` (a fleet
    YAML) or ``bundled`` (a bundled fleet by name, ``path`` its file).
    """

    spec: str
    kind: str
    path: Path | None = None


def inventory_source(spec: str) -> InventorySource:
    """What the ``--inventory`` value ``spec`` names; a missing file or an unknown fleet is refused here."""
    if is_local_inventory(spec):
        return InventorySource(spec, "local")
    if spec == "cluster":
        return InventorySource(spec, "cluster")
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
            return InventorySource(spec, "alibaba", path)
        # KFP artifacts have no suffix: an inventory JSON is recognised by its first character.
        if path.suffix == ".json" or re.match(r'\s*\{\s*"source"', path.read_text(errors="replace")[:64]):
            return InventorySource(spec, "json", path)
        return InventorySource(spec, "fleet", path)
    return InventorySource(spec, "bundled", bundled_fleet_path(spec))


def load_inventory(spec: str | InventorySource, *, catalog: GpuCatalog | None = None) -> Inventory:
    """The inventory that ``spec`` names (:func:`inventory_source`): a bundled fleet, a fleet YAML, an
    Alibaba CSV, an inventory JSON, this machine, or ``cluster``.

    ``cluster`` reads the current kubeconfig context; use
    :func:`gpuplace.inventory.cluster.inventory_from_cluster` to pass a client explicitly.
    """
    source = spec if isinstance(spec, InventorySource) else inventory_source(spec)
    catalog = catalog or load_gpu_catalog()
    if source.kind == "local":
        return local_inventory(catalog)
    if source.kind == "cluster":
        from gpuplace.inventory.cluster import inventory_from_cluster

        return inventory_from_cluster(catalog=catalog)
    path = source.path or Path(source.spec)  # every other kind is a file
    if source.kind == "alibaba":
        from gpuplace.inventory.alibaba import read_alibaba_nodes

        return read_alibaba_nodes(path, catalog=catalog)
    if source.kind == "json":
        from gpuplace.inventory.jsonfile import read_inventory_json

        inventory = read_inventory_json(path)
        if not inventory.is_local:  # this machine may have no GPU: it is planned with its CPU
            require_gpus(inventory, "inventory")
        return inventory
    if source.kind == "bundled":
        return read_fleet_file(path, catalog, source=source.spec)
    return read_fleet_file(path, catalog)


__all__ = [
    "SCHEMA",
    "InventorySource",
    "bundled_fleet_names",
    "bundled_fleet_path",
    "inventory_source",
    "load_inventory",
    "parse_fleet",
    "read_fleet_file",
    "require_gpus",
]
