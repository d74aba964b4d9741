"""The hardware one replica runs on (:class:`ReplicaHardware`) and the links between its GPUs.

Of the planner's two shape types, this is the physical one: a GPU model, its share of one GPU (a MIG
slice's memory and compute slices, a time-sliced share, as fractions), a tensor-parallel degree and the
interconnect tier its GPU set really has. :class:`~gpuplace.planner.offers.OfferedShape` is the other: a
shape the fleet offers by name (whole/MIG profile/shared), which says what hardware it is; the plan's
:class:`~gpuplace.types.plan.Candidate` is an offered shape with its replicas and verdict. :data:`LINKS`
orders the tiers best first, each with a per-message latency and the factor applied to the GPU's link
bandwidth; :func:`link_gbps` is the per-direction bandwidth of a tier. The step-time model
(:mod:`gpuplace.planner.steptime`) prices a step on a shape; the placement code
(:mod:`gpuplace.planner.placement`) ranks GPU sets by these tiers. Pure data and arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuplace.types import GpuSpec

SERVING_DTYPE_BYTES = 2  # bf16: activations, embeddings, LM head; weights and KV cache per Precision
SHARED_OVERHEAD = 1.15  # time-slicing context switches and cache thrash (docs/placement.md)
RUNTIME_OVERHEAD_GIB = 1.0  # CUDA context, NCCL buffers and CUDA graphs per GPU
PCIE_GBPS_PER_LANE = {3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


@dataclass(frozen=True, slots=True)
class Link:
    """An interconnect tier: per-message latency and the bandwidth factor applied to the GPU's link."""

    latency_s: float
    bandwidth_factor: float
    uses_nvlink: bool


# Ordered best first; the planner prefers earlier tiers.
LINKS: dict[str, Link] = {
    "single": Link(0.0, 1.0, False),
    "nvlink": Link(8e-6, 1.0, True),
    "pcie-switch": Link(15e-6, 1.0, False),
    "numa": Link(20e-6, 0.8, False),  # through the root complex of one socket
    "cross-numa": Link(30e-6, 0.5, False),  # over the inter-socket link
}
TIERS: tuple[str, ...] = tuple(LINKS)


@dataclass(frozen=True, slots=True)
class ReplicaHardware:
    """What one replica's step runs on, as the step-time model prices it: a GPU model, its share of one
    GPU's bandwidth and compute, a TP degree and the link between (:meth:`OfferedShape.hardware`)."""

    spec: GpuSpec
    tp: int = 1
    bandwidth_share: float = 1.0
    compute_share: float = 1.0
    memory_gib: float = 0.0  # device memory per GPU the engine sees (a MIG slice's; 0 = the GPU's)
    link: str = "single"
    shared: bool = False


def link_gbps(spec: GpuSpec, link: str) -> float:
    """Per-direction bandwidth of the GPU's link to its TP peers on this tier."""
    tier = LINKS[link]
    if tier.uses_nvlink and spec.nvlink_gbps > 0:
        return spec.nvlink_gbps / 2
    return PCIE_GBPS_PER_LANE.get(spec.pcie_gen, 1.969) * spec.pcie_lanes * tier.bandwidth_factor
