"""Core value types: distributions, catalog entries, model shapes, devices and latency profiles.

Frozen dataclasses only: strings, JSON and labels are parsed into these once at the boundary, and
everything inside gpuplace passes them around. This module imports nothing heavier than the
standard library so that the planner, the extender and the benchmarks can use it without torch,
kubernetes or mlflow. Units live in field names (``_s``, ``_gib``, ``_gbps``: GB/s, 10^9 bytes per
second, ``_usd_per_hour``); times are seconds everywhere inside gpuplace.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

PERCENTILES: tuple[int, ...] = (50, 90, 95, 99)


def json_clean(value: Any) -> Any:
    """JSON has no NaN or infinity: write them as null (read back as NaN); tuples become lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: json_clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_clean(v) for v in value]
    return value


def json_num(value: Any) -> float:
    """The inverse of :func:`json_clean` for one number: null reads back as NaN."""
    return math.nan if value is None else float(value)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile of already sorted values (numpy's default, 'linear').

    vLLM's benchmark uses ``np.percentile`` with that method, so our figures are comparable.
    """
    if not sorted_values:
        return math.nan
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q={q!r} is outside [0, 100]")
    rank = (len(sorted_values) - 1) * q / 100
    lo = math.floor(rank)
    hi = math.ceil(rank)
    if lo == hi:
        return float(sorted_values[lo])
    return float(sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (rank - lo))


@dataclass(frozen=True, slots=True)
class Distribution:
    """Summary of a sample: count, mean, median, population std, min, max and percentiles.

    ``std`` is the population standard deviation (``np.std`` default), as vLLM reports it.
    """

    count: int
    mean: float
    median: float
    std: float
    min: float
    max: float
    p50: float
    p90: float
    p95: float
    p99: float

    @classmethod
    def of(cls, samples: Iterable[float]) -> Distribution:
        values = sorted(float(v) for v in samples)
        n = len(values)
        if n == 0:
            nan = math.nan
            return cls(0, nan, nan, nan, nan, nan, nan, nan, nan, nan)
        mean = math.fsum(values) / n
        std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / n)
        p = {q: percentile(values, q) for q in PERCENTILES}
        return cls(n, mean, p[50], std, values[0], values[-1], p[50], p[90], p[95], p[99])

    def flat(self, prefix: str) -> dict[str, float]:
        """Columns ``<prefix>_<stat>`` for a table row (count as a float for a uniform dtype)."""
        return {f"{prefix}_{k}": float(v) for k, v in asdict(self).items()}

    @classmethod
    def from_flat(cls, row: Mapping[str, Any], prefix: str) -> Distribution:
        stats = {name: float(row[f"{prefix}_{name}"]) for name in cls.__dataclass_fields__ if name != "count"}
        count = row[f"{prefix}_count"]
        return cls(count=0 if count != count else int(count), **stats)


@dataclass(frozen=True, slots=True)
class MigProfile:
    """One MIG instance profile of a GPU model, e.g. ``3g.40gb`` on an A100-80GB."""

    name: str
    memory_gib: float
    compute_slices: int
    memory_slices: int
    max_instances: int


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """A catalog entry: one GPU model with its datasheet figures and an editable price."""

    name: str
    aliases: tuple[str, ...]
    architecture: str
    compute_capability: str
    memory_gib: float
    hbm_bandwidth_gbps: float
    bf16_tflops: float  # dense tensor-core TFLOP/s; 0 where the GPU has no bf16 tensor cores
    fp16_tflops: float
    pcie_gen: int
    pcie_lanes: int
    nvlink_gbps: float  # total NVLink bandwidth per GPU, both directions; 0 without NVLink
    form_factor: str
    price_usd_per_hour: float
    compute_slices: int = 0  # MIG compute slices of the whole GPU (7 on A100/H100/H200), 0 without MIG
    memory_slices: int = 0
    mig_profiles: tuple[MigProfile, ...] = ()

    @property
    def mig_capable(self) -> bool:
        return bool(self.mig_profiles)

    def peak_tflops(self, dtype: str) -> float:
        """Dense tensor TFLOP/s for a torch dtype name; fp32 is not tabulated and returns NaN."""
        if dtype in ("bfloat16", "bf16"):
            return self.bf16_tflops
        if dtype in ("float16", "fp16", "half"):
            return self.fp16_tflops
        return math.nan


@dataclass(frozen=True, slots=True)
class ModelArch:
    """The shapes of a decoder-only transformer that latency and memory depend on."""

    name: str
    model_type: str
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    max_position_embeddings: int
    tie_word_embeddings: bool
    num_params: int

    def kv_bytes_per_token(self, dtype_bytes: int) -> int:
        """Bytes of K and V cache that one token adds across all layers."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * dtype_bytes

    @property
    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def decode_weight_params(self) -> int:
        """Parameters read from memory by one decode step.

        The input embedding is a gather of ``batch`` rows, not a full read; the LM head reads its
        whole matrix (which is the embedding matrix when tied).
        """
        if self.tie_word_embeddings:
            return self.num_params
        return self.num_params - self.embedding_params


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
    bandwidth_source: str  # "catalog:<gpu>" or "measured"
    peak_tflops: Mapping[str, float] = field(default_factory=dict)  # by dtype, what MFU used
    gpuplace_version: str = ""
    created_at: str = ""

    @property
    def ok_results(self) -> tuple[PointResult, ...]:
        return tuple(r for r in self.results if r.ok)
