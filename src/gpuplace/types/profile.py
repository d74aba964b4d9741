"""Profile value types: the device a profile ran on (:class:`DeviceInfo`), one sweep point and its
measurements, and the whole :class:`LatencyProfile` the profiler writes and the planner calibrates from.

Standard library only; times in seconds, memory in GiB, bandwidth in GB/s (10^9 bytes per second).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from gpuplace.types.catalog import ModelArch
from gpuplace.types.stats import Distribution


@dataclass(frozen=True, slots=True)
class NvLinkPeer:
    """One active NVLink of a GPU: its link index and the PCI bus id at the other end."""

    link: int
    remote_pci_bus_id: str


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """What the profiler ran on, with the topology the planner needs to interpret the numbers."""

    kind: str  # "cuda" or "cpu"
    name: str
    index: int | None = None
    memory_gib: float = math.nan
    compute_capability: str = ""
    catalog_gpu: str = ""  # matching GpuSpec.name, "" when the device is not in the catalog
    mig_mode: bool = False
    mig_device: str = ""  # e.g. "MIG 3g.40gb" when the profile ran on a MIG slice
    pcie_gen: int | None = None
    pcie_width: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_max: int | None = None
    pci_bus_id: str = ""
    numa_node: int | None = None
    nvlink_peers: tuple[NvLinkPeer, ...] = ()
    driver_version: str = ""
    cuda_version: str = ""
    cpu_model: str = ""
    cpu_physical_cores: int | None = None
    cpu_logical_cores: int | None = None
    torch_threads: int | None = None
    numa_nodes: int | None = None
    torch_version: str = ""
    transformers_version: str = ""
    topology_source: str = ""  # "nvml", "nvidia-smi", "torch" or "cpu"
    notes: tuple[str, ...] = ()

    def to_json_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["nvlink_peers"] = [asdict(p) for p in self.nvlink_peers]
        data["notes"] = list(self.notes)
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in data.items()}

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> DeviceInfo:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["nvlink_peers"] = tuple(NvLinkPeer(**p) for p in known.get("nvlink_peers") or ())
        known["notes"] = tuple(known.get("notes") or ())
        if known.get("memory_gib") is None:
            known["memory_gib"] = math.nan
        return cls(**known)


@dataclass(frozen=True, slots=True)
class SweepPoint:
    """One configuration of the profiling sweep."""

    batch_size: int
    prompt_tokens: int
    output_tokens: int
    dtype: str
    mode: str  # "eager" or "static" (static KV cache + torch.compile; CUDA graphs on CUDA)


@dataclass(frozen=True, slots=True)
class PointResult:
    """The measurements of one sweep point; a failed point is data with ``error`` set.

    ``prefill`` is the zero-load TTFT (prompt forward pass plus choosing the first token), one sample
    per repeat. ``decode_step`` holds every decode step of every repeat (the per-token latency, i.e.
    TPOT at zero load); ``tpot`` holds one mean per repeat. ``e2e`` is prefill plus all decode steps.
    """

    point: SweepPoint
    ok: bool
    error: str = ""
    repeats: int = 0
    prefill: Distribution = field(default_factory=lambda: Distribution.of(()))
    decode_step: Distribution = field(default_factory=lambda: Distribution.of(()))
    tpot: Distribution = field(default_factory=lambda: Distribution.of(()))
    e2e: Distribution = field(default_factory=lambda: Distribution.of(()))
    peak_memory_gib: float = math.nan  # torch allocator peak on CUDA; process peak RSS on CPU
    device_memory_used_gib: float = math.nan  # whole device, from NVML, when present
    decode_bytes_per_step: float = math.nan
    decode_floor_s: float = math.nan  # memory-traffic floor of one decode step
    mbu: float = math.nan  # decode_floor_s / decode_step.p50
    prefill_flops: float = math.nan
    mfu: float = math.nan  # prefill FLOPs / (prefill p50 * peak FLOP/s)
    decode_tokens_per_s: float = math.nan


@dataclass(frozen=True, slots=True)
class LatencyProfile:
    """The profiler's output: one result per sweep point, the device and the model it ran."""

    model: ModelArch
    device: DeviceInfo
    results: tuple[PointResult, ...]
    memory_bandwidth_gbps: float  # what the roofline used
    bandwidth_source: str  # "catalog:<gpu>", "measured" or "measured (disturbed: best round)"
    peak_tflops: Mapping[str, float] = field(default_factory=dict)  # by dtype, what MFU used
    gpuplace_version: str = ""
    created_at: str = ""  # ISO 8601, when the profile was finished
    started_at: str = ""  # ISO 8601, when profiling started ("" in profiles written before it was kept)

    @property
    def ok_results(self) -> tuple[PointResult, ...]:
        return tuple(r for r in self.results if r.ok)
