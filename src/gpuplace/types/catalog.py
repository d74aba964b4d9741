r"""Catalog value types: a GPU model's datasheet figures (:class:`GpuSpec`, its :class:`MigProfile`\s) and
the shapes of a model architecture (:class:`ModelArch`) that latency and memory depend on.

Read from the versioned data files of :mod:`gpuplace.catalog`; standard library only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


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
    fp8_tflops: float = 0.0  # dense FP8 tensor-core TFLOP/s; 0 where the GPU has no FP8 tensor cores
    # GPUs one NVLink domain joins: 8 on an HGX board, 72 on a GB200 NVL72 rack (across its nodes), 2 for
    # bridged PCIe pairs, 1 without NVLink; 0 = not recorded (derived: :attr:`nvlink_domain`)
    nvlink_domain_gpus: int = 0

    @property
    def mig_capable(self) -> bool:
        return bool(self.mig_profiles)

    @property
    def nvlink_domain(self) -> int:
        """GPUs one NVLink domain joins: the catalog's figure, else 8 on an SXM board with NVLink, 2 for
        a PCIe card with an NVLink bridge, 1 without NVLink."""
        if self.nvlink_domain_gpus > 0:
            return self.nvlink_domain_gpus
        if self.nvlink_gbps <= 0:
            return 1
        return 2 if self.form_factor == "pcie" else 8

    def peak_tflops(self, dtype: str) -> float:
        """Dense tensor TFLOP/s for a torch dtype name (or ``fp8``); fp32 is not tabulated and returns NaN."""
        if dtype in ("bfloat16", "bf16"):
            return self.bf16_tflops
        if dtype in ("float16", "fp16", "half"):
            return self.fp16_tflops
        if dtype in ("fp8", "float8_e4m3fn"):
            return self.fp8_tflops
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
