"""KFP component ``discover_inventory``: a thin adapter over :mod:`gpuplace.inventory`.

Loads a fleet — a bundled fleet name, a fleet YAML, an Alibaba node CSV, or ``cluster`` (the cluster
the task runs in, through its service account) — and writes it as JSON for ``plan_placement``.
"""

from kfp import dsl
from kfp.dsl import Artifact, Metrics, Output

from gpuplace.components.images import CPU_IMAGE


@dsl.component(base_image=CPU_IMAGE, install_kfp_package=False)
def discover_inventory(
    inventory: Output[Artifact],
    metrics: Output[Metrics],
    source: str = "mixed-a100-h100-l4",
    label_selector: str = "",
) -> str:
    """Discover the GPU fleet.

    Args:
        source: Bundled fleet name (mixed-a100-h100-l4, h100-nvlink), a fleet YAML path, an Alibaba node
            CSV path, or ``cluster`` for the cluster the task runs in (needs RBAC to list nodes and pods).
        label_selector: With ``cluster``: only nodes matching this selector.

    Returns:
        A one-line summary of the fleet.
    """
    import json
    from pathlib import Path

    from gpuplace.inventory import load_inventory
    from gpuplace.inventory.jsonfile import inventory_to_json

    if source == "cluster":
        from gpuplace.inventory.cluster import inventory_from_cluster
        from gpuplace.k8s.client import IN_CLUSTER, connect

        inv = inventory_from_cluster(client=connect(IN_CLUSTER), label_selector=label_selector)
    else:
        inv = load_inventory(source)
    Path(inventory.path).write_text(json.dumps(inventory_to_json(inv), indent=2))
    inventory.metadata.update({"source": inv.source, "format": "gpuplace-inventory-json"})
    metrics.log_metric("nodes", float(len(inv.nodes)))
    metrics.log_metric("gpus", float(inv.physical_gpu_count))
    metrics.log_metric("mig_slices", float(inv.mig_slice_count))
    metrics.log_metric(
        "free_gpus", float(sum(1 for _, g in inv.devices() if not g.mig_profile and g.allocated == 0))
    )
    return f"{len(inv.nodes)} nodes, {inv.physical_gpu_count} GPUs from {inv.source}"
