"""Kubernetes names gpuplace reads and writes: GPU Feature Discovery's node labels and resources, and
gpuplace's own labels on the objects it creates. Pure functions over the domain types.

How a :class:`~gpuplace.types.Node` looks to Kubernetes: GPU Feature Discovery labels and resources.

The NVIDIA GPU Feature Discovery (GFD) and device plugin put these on real GPU nodes; the local
control plane puts the same on its simulated nodes, and :mod:`gpuplace.inventory.cluster` reads them
back, so a fleet survives the round trip fleet file → Node objects → inventory. Pure functions.

* ``none``: every GPU is ``nvidia.com/gpu``; ``nvidia.com/gpu.product`` names the GPU.
* ``single``: every GPU is split into one MIG profile; each slice is an ``nvidia.com/gpu`` and the
  product label reads ``<product>-MIG-<profile>`` with the slice's memory, as GFD writes it.
* ``mixed``: whole GPUs are ``nvidia.com/gpu``; slices are ``nvidia.com/mig-<profile>`` with
  ``nvidia.com/mig-<profile>.count`` and ``.memory`` labels.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from gpuplace.types import GpuDevice, Node

PRODUCT = "nvidia.com/gpu.product"
MEMORY = "nvidia.com/gpu.memory"  # MiB
COUNT = "nvidia.com/gpu.count"
PRESENT = "nvidia.com/gpu.present"
MIG_STRATEGY = "nvidia.com/mig.strategy"
REPLICAS = "nvidia.com/gpu.replicas"  # time-slicing replicas per GPU (GFD)
ZONE = "topology.kubernetes.io/zone"
RACK = "gpuplace.io/rack"
NVLINK_CLIQUE = "nvidia.com/gpu.clique"  # GFD: the multi-node NVLink domain of a GB200-class node
HOSTNAME = "kubernetes.io/hostname"
GPU_RESOURCE = "nvidia.com/gpu"
GPU_TAINT_KEY = "nvidia.com/gpu"  # the GPU operator taints GPU nodes nvidia.com/gpu=present:NoSchedule
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"

# gpuplace's own labels: every object a plan creates carries the first three; the run id ties objects to
# a pipeline run (teardown by run id), the replica label pairs a pod with its planned placement.
APP = "app.kubernetes.io/name"
MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "gpuplace"
PLAN_LABEL = "gpuplace.io/plan-id"
RUN_LABEL = "gpuplace.io/run-id"
REPLICA_LABEL = "gpuplace.io/replica"


def _mib(gib: float) -> str:
    return str(round(gib * 1024))


def _product(g: GpuDevice) -> str:
    return g.product or g.gpu or "unknown"


def gfd_labels(node: Node) -> dict[str, str]:
    """The labels GFD (and the kubelet) would put on this node, merged over the node's own labels."""
    labels = dict(node.labels)
    labels[HOSTNAME] = node.name
    if node.zone:
        labels[ZONE] = node.zone
    if node.rack:
        labels[RACK] = node.rack
    if not node.gpus:
        return labels
    labels[PRESENT] = "true"
    labels[MIG_STRATEGY] = node.mig_strategy
    first = min(node.gpus, key=lambda g: (g.index, g.id))
    if node.mig_strategy == "single" and node.mig_slices:
        labels[PRODUCT] = f"{_product(first)}-MIG-{first.mig_profile}"
        labels[MEMORY] = _mib(first.memory_gib)
        labels[COUNT] = str(len(node.mig_slices))
        return labels
    whole = node.whole_gpus
    labels[PRODUCT] = _product(first)
    labels[COUNT] = str(node.physical_gpu_count)
    if node.gpu_sharing > 1:
        labels[REPLICAS] = str(node.gpu_sharing)
    # A MIG-partitioned GPU still reports its full memory on the node level label.
    labels[MEMORY] = _mib(
        whole[0].memory_gib if whole else sum(s.memory_gib for s in node.mig_slices if s.index == first.index)
    )
    for profile, n in sorted(Counter(s.mig_profile for s in node.mig_slices).items()):
        memory = next(s.memory_gib for s in node.mig_slices if s.mig_profile == profile)
        labels[f"nvidia.com/mig-{profile}.count"] = str(n)
        labels[f"nvidia.com/mig-{profile}.memory"] = _mib(memory)
    return labels


def mig_profile_of(resource: str) -> str:
    """The MIG profile of a device-plugin resource name (``nvidia.com/mig-3g.40gb`` → ``3g.40gb``); ""
    for a whole-GPU resource."""
    return resource.removeprefix(MIG_RESOURCE_PREFIX) if resource.startswith(MIG_RESOURCE_PREFIX) else ""


def resource_of(node: Node, device: GpuDevice) -> str:
    """The extended resource a device is advertised as on this node."""
    if device.mig_profile and node.mig_strategy == "mixed":
        return MIG_RESOURCE_PREFIX + device.mig_profile
    return GPU_RESOURCE


def node_resources(node: Node) -> dict[str, str]:
    """Capacity (= allocatable) of the node: cpu, memory, pods and its GPU extended resources."""
    resources = {
        "cpu": str(node.cpu_cores or 1),
        "memory": f"{math.floor(node.memory_gib or 1)}Gi",
        "pods": "110",
    }
    counts = Counter(resource_of(node, g) for g in node.gpus)
    # Time-slicing advertises each whole GPU as ``replicas`` schedulable nvidia.com/gpu.
    counts[GPU_RESOURCE] = counts.get(GPU_RESOURCE, 0) * node.gpu_sharing if GPU_RESOURCE in counts else 0
    for resource, n in sorted(counts.items()):
        if n:
            resources[resource] = str(n)
    return resources


def used_resources(node: Node) -> dict[str, int]:
    """GPU resources already taken, per resource: a device with any share allocated is in use.

    Extended resources are integers: on a time-sliced node an allocated share takes ``ceil(share ×
    replicas)`` slots, elsewhere any share takes the device. The control plane reproduces these with
    placeholder pods.
    """
    used: Counter[str] = Counter()
    for g in node.gpus:
        if g.allocated > 0:
            slots = node.gpu_sharing if resource_of(node, g) == GPU_RESOURCE else 1
            used[resource_of(node, g)] += math.ceil(g.allocated * slots - 1e-9)
    return dict(sorted(used.items()))


TOPOLOGY_ANNOTATION = "gpuplace.io/gpu-topology"
NUMA_NODES_ANNOTATION = "gpuplace.io/numa-nodes"


def topology_annotations(node: Node) -> dict[str, str]:
    """Annotations for what GFD does not label: NUMA node, PCIe switch, NVLink island, MIG layout per GPU.

    :mod:`gpuplace.inventory.cluster` reads them back; a node without them gets a guessed topology.
    """
    import json

    per_gpu: dict[int, dict[str, Any]] = {}
    for g in sorted(node.gpus, key=lambda d: (d.index, d.id)):
        entry = per_gpu.setdefault(
            g.index,
            {
                "index": g.index,
                "numa_node": g.numa_node,
                "pcie_switch": g.pcie_switch,
                "nvlink_island": g.nvlink_island,
                "mig": [],
            },
        )
        if g.mig_profile:
            entry["mig"].append(g.mig_profile)
    return {
        TOPOLOGY_ANNOTATION: json.dumps(list(per_gpu.values()), separators=(",", ":")),
        NUMA_NODES_ANNOTATION: str(node.numa_nodes),
    }
