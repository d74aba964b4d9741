"""KFP component ``discover_inventory``: a thin adapter over :mod:`gpuplace.steps.inventory`.

Loads a fleet — a bundled fleet name, a fleet YAML, an Alibaba node CSV, or ``cluster`` (the cluster
the task runs in, through its service account) — and writes it as JSON for ``plan_placement``.
"""

from kfp import dsl
from kfp.dsl import Artifact, Metrics, Output

from gpuplace.components.images import COMPONENTS_IMAGE


@dsl.component(base_image=COMPONENTS_IMAGE, install_kfp_package=False)
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
    params = {"source": source, "label_selector": label_selector}  # gpuplace.steps.inventory.PARAMS
    from gpuplace.steps.inventory import inventory_metrics, run_inventory_step

    inv = run_inventory_step(params, inventory.path, in_cluster=True)
    inventory.metadata.update({"source": inv.source, "format": "gpuplace-inventory-json"})
    for name, value in inventory_metrics(inv).items():
        metrics.log_metric(name, value)
    return f"{len(inv.nodes)} nodes, {inv.physical_gpu_count} GPUs from {inv.source}"
