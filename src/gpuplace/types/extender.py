"""Domain types of the scheduler extender: what a pod asks of a node's GPUs, and the verdict on a node.

Parsed once at the HTTP boundary (:mod:`gpuplace.extender.wire`) from the pod's resources and its
``gpuplace.io/*`` annotations (docs/extender.md); read by :mod:`gpuplace.extender.fit`.
"""

from __future__ import annotations

from dataclasses import dataclass

# A multi-GPU pod's requirement on the GPU set it gets, loosest first.
TOPOLOGY_REQUIREMENTS: tuple[str, ...] = ("none", "numa", "pcie-switch", "nvlink")


@dataclass(frozen=True, slots=True)
class GpuRequest:
    """The GPUs one pod asks for: ``count`` devices of ``resource`` meeting ``topology`` and ``models``."""

    resource: str  # labels.GPU_RESOURCE, or labels.MIG_RESOURCE_PREFIX + a profile
    count: int = 0  # 0: the pod asks for no GPU
    topology: str = "none"  # one of TOPOLOGY_REQUIREMENTS
    models: tuple[str, ...] = ()  # accepted GPU models (catalog names or products), lower case; () = any


@dataclass(frozen=True, slots=True)
class NodeFit:
    """Whether a node can take the pod, on which devices, and how well (the planner's scores)."""

    node: str
    devices: tuple[str, ...] = ()  # GpuDevice ids, empty when it does not fit
    interconnect: str = ""  # the planner's tier of the chosen set: single, nvlink, pcie-switch, numa, ...
    fit_score: float = 0.0  # the planner's GPU-fit score of the set, in [0, 1]
    frag_delta_gpus: float = 0.0  # increase of the node's FGD fragmentation, in GPUs
    gpus_left: float = 0.0  # free GPU capacity left on the node after placement
    reason: str = ""  # why it does not fit
    unresolvable: bool = False  # True when freeing GPUs (preemption) would not help

    @property
    def fits(self) -> bool:
        return not self.reason
