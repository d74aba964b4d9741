"""The fleet: nodes, their GPUs (or MIG slices) and topology, taints and what is already allocated.

Produced by :mod:`gpuplace.inventory` (live cluster, fleet file, Alibaba trace); read by the
planner, the simulated control plane (one Node object per :class:`Node`) and the extender.
Topology is expressed as group ids on each GPU: GPUs with the same ``nvlink_island`` are joined by
NVLink, the same ``pcie_switch`` hang off one PCIe switch, and ``numa_node`` is the host NUMA node.

A MIG-partitioned GPU appears only as its slices (one :class:`GpuDevice` per MIG instance, all with
the physical ``index`` of their GPU and ``mig_profile`` set); a whole GPU appears once. That is what
the NVIDIA device plugin advertises: with the ``mixed`` strategy slices are ``nvidia.com/mig-<profile>``
resources, with ``single`` they are ``nvidia.com/gpu``; a MIG-enabled GPU is never also a whole GPU.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

TAINT_EFFECTS: tuple[str, ...] = ("NoSchedule", "PreferNoSchedule", "NoExecute")
MIG_STRATEGIES: tuple[str, ...] = ("none", "single", "mixed")
# The bundled fleet gpuplace run also plans on a local run (a prediction for its GPUs) and testenv simulates.
DEFAULT_FLEET = "mixed-a100-h100-l4"


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"  # NoSchedule | PreferNoSchedule | NoExecute


@dataclass(frozen=True, slots=True)
class GpuDevice:
    """One physical GPU, or one MIG slice of it (``mig_profile`` set), on a node."""

    id: str  # unique in the inventory, e.g. "node-a/gpu3" or "node-a/gpu3/3g.40gb-0"
    index: int  # physical GPU index on the node
    gpu: str  # catalog name (GpuSpec.name); "" when the product is not in the catalog
    product: str = ""  # as reported, e.g. the nvidia.com/gpu.product label
    memory_gib: float = 0.0
    numa_node: int = 0
    pcie_switch: str = ""  # GPUs with the same id share a PCIe switch; "" unknown
    nvlink_island: str = ""  # GPUs with the same id are NVLink-connected; "" none
    mig_profile: str = ""  # "" = whole GPU
    allocated: float = 0.0  # share already in use: 0 free, 1 fully allocated (fractions for shared GPUs)

    @property
    def free(self) -> float:
        return max(0.0, 1.0 - self.allocated)

    @property
    def is_mig(self) -> bool:
        return bool(self.mig_profile)

    @property
    def known(self) -> bool:
        """Whether the product matched a catalog entry (the planner only places on known GPUs)."""
        return bool(self.gpu)


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    gpus: tuple[GpuDevice, ...] = ()
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    taints: tuple[Taint, ...] = ()
    zone: str = ""
    rack: str = ""
    cpu_cores: int = 0
    memory_gib: float = 0.0
    cpu_allocated: float = 0.0  # cores requested by the pods running on it (fragmentation counts CPU)
    numa_nodes: int = 1
    mig_strategy: str = "none"  # none | single | mixed (NVIDIA device plugin)
    gpu_sharing: int = 1  # time-slicing replicas per whole GPU (device plugin sharing config); 1 = exclusive

    @property
    def whole_gpus(self) -> tuple[GpuDevice, ...]:
        return tuple(g for g in self.gpus if not g.mig_profile)

    @property
    def mig_slices(self) -> tuple[GpuDevice, ...]:
        return tuple(g for g in self.gpus if g.mig_profile)

    @property
    def physical_gpu_count(self) -> int:
        """Physical GPUs, a MIG-partitioned one counted once."""
        return len({g.index for g in self.gpus})

    @property
    def gpu_models(self) -> tuple[str, ...]:
        """Catalog names of the GPUs on the node, sorted, without repeats ("" for unknown)."""
        return tuple(sorted({g.gpu for g in self.gpus}))

    def cpus_per_numa_node(self) -> int:
        return self.cpu_cores // max(self.numa_nodes, 1)


# This machine as the fleet: planned with its own measured engine, served by the local engine.
LOCAL_INVENTORY = "local"


def is_local_inventory(inventory: str) -> bool:
    """Whether an inventory (as given, or an Inventory's or a plan's source) is this machine: the one
    answer to "is this a local plan"."""
    return inventory == LOCAL_INVENTORY


@dataclass(frozen=True, slots=True)
class Inventory:
    nodes: tuple[Node, ...]
    source: str = ""  # "cluster", a fleet file path, a bundled fleet name, a trace path, or LOCAL_INVENTORY
    warnings: tuple[str, ...] = ()  # what the loader kept but could not fully interpret

    @property
    def is_local(self) -> bool:
        return is_local_inventory(self.source)

    @property
    def gpu_count(self) -> int:
        return sum(1 for n in self.nodes for g in n.gpus if not g.mig_profile)

    @property
    def physical_gpu_count(self) -> int:
        """Physical GPUs in the fleet, MIG-partitioned ones included (each counted once)."""
        return sum(n.physical_gpu_count for n in self.nodes)

    @property
    def mig_slice_count(self) -> int:
        return sum(len(n.mig_slices) for n in self.nodes)

    def devices(self) -> Iterator[tuple[Node, GpuDevice]]:
        for n in self.nodes:
            for g in n.gpus:
                yield n, g

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)
