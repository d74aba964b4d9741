"""The inventory step: a ``--inventory`` value in, the fleet (:class:`~gpuplace.types.Inventory`) out, and
its JSON (:mod:`gpuplace.inventory.jsonfile`, the one writer) when asked.

Shared by ``gpuplace inventory`` and the ``discover_inventory`` component, through its parameter table
:data:`PARAMS` (:mod:`gpuplace.params`), so both read the same sources
(:func:`gpuplace.inventory.load_inventory`; a live cluster through the given kubeconfig) and write the
same file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuplace.catalog import GpuCatalog
from gpuplace.inventory import load_inventory
from gpuplace.inventory.jsonfile import write_inventory_json
from gpuplace.params import Param, parse_as
from gpuplace.types import Inventory

PARAMS: tuple[Param, ...] = (
    Param(
        "source",
        str,
        "mixed-a100-h100-l4",
        "bundled fleet name, fleet YAML, Alibaba node CSV, or 'cluster'",
        "--inventory",
    ),
    Param("label_selector", str, "", "for 'cluster': only nodes matching this selector"),
    Param(
        "kubeconfig",
        str,
        "",
        "for 'cluster' (default: $KUBECONFIG, ~/.kube/config, in-cluster; a task: in-cluster)",
        component=False,
    ),
)


@dataclass(frozen=True, slots=True)
class InventoryValues:
    """:data:`PARAMS`'s values, typed: one field per row, read by :func:`~gpuplace.params.parse_as` (its
    defaults are the table's alone)."""

    source: str
    label_selector: str
    kubeconfig: str


def run_inventory_step(
    params: Mapping[str, Any],
    out: str | Path | None = None,
    *,
    catalog: GpuCatalog | None = None,
    in_cluster: bool = False,
) -> Inventory:
    """The fleet ``params`` name (:data:`PARAMS` by name; ``cluster``: the one ``kubeconfig`` reaches, or
    in-cluster when ``in_cluster`` and no kubeconfig is given, nodes matching ``label_selector``), written
    as inventory JSON to the file ``out`` when given."""
    p = parse_as(InventoryValues, PARAMS, params)
    if p.source == "cluster":
        from gpuplace.inventory.cluster import inventory_from_cluster
        from gpuplace.k8s.client import IN_CLUSTER, connect

        kubeconfig = p.kubeconfig or (IN_CLUSTER if in_cluster else None)
        inventory = inventory_from_cluster(
            client=connect(kubeconfig), catalog=catalog, label_selector=p.label_selector
        )
    else:
        inventory = load_inventory(p.source, catalog=catalog)
    if out is not None:
        write_inventory_json(inventory, out)
    return inventory


def inventory_metrics(inventory: Inventory) -> dict[str, float]:
    """The ``discover_inventory`` component's KFP metrics: nodes, GPUs, MIG slices, free whole GPUs."""
    free = sum(1 for _, g in inventory.devices() if not g.mig_profile and g.allocated == 0)
    return {
        "nodes": float(len(inventory.nodes)),
        "gpus": float(inventory.physical_gpu_count),
        "mig_slices": float(inventory.mig_slice_count),
        "free_gpus": float(free),
    }
