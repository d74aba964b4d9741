"""The roofline arithmetic of decoding and prefill: bytes and FLOPs per step, floors, MBU and MFU.

Pure functions of a :class:`~gpuplace.types.ModelArch` and a shape, so the planner can use them to
scale a measured profile to a GPU that was not profiled. Definitions (docs/profiling.md):

* decode bytes per step = weights read by one step + the KV cache read by it
  (``batch × context × kv_bytes_per_token``, context = prompt + tokens generated so far, averaged
  over the decode);
* decode floor = decode bytes per step ÷ memory bandwidth; MBU = floor ÷ measured step latency;
* prefill FLOPs = 2 × batch × prompt × (non-embedding, non-head parameters) + 2 × batch × head
  parameters (the head runs on the last position only, as servers do) + causal attention
  ``2 × layers × batch × prompt² × heads × head_dim``; MFU = FLOPs ÷ (latency × peak FLOP/s).
"""

from __future__ import annotations

import math

from gpuplace.types import ModelArch

DTYPE_BYTES: dict[str, int] = {"float32": 4, "bfloat16": 2, "float16": 2}


def dtype_bytes(dtype: str) -> int:
    return DTYPE_BYTES[dtype]


def mean_decode_context(prompt_tokens: int, output_tokens: int) -> float:
    """Mean number of cached tokens read over the ``output_tokens - 1`` decode steps."""
    steps = max(output_tokens - 1, 1)
    # step k (1-based) attends to prompt + k tokens
    return prompt_tokens + (steps + 1) / 2


def decode_bytes_per_step(arch: ModelArch, batch: int, context_tokens: float, dtype: str) -> float:
    b = dtype_bytes(dtype)
    weights = arch.decode_weight_params * b
    kv = batch * context_tokens * arch.kv_bytes_per_token(b)
    return float(weights + kv)


def memory_floor_s(bytes_moved: float, bandwidth_gbps: float) -> float:
    if not bandwidth_gbps or bandwidth_gbps <= 0 or math.isnan(bandwidth_gbps):
        return math.nan
    return bytes_moved / (bandwidth_gbps * 1e9)


def prefill_flops(arch: ModelArch, batch: int, prompt_tokens: int) -> float:
    head = arch.vocab_size * arch.hidden_size
    body = arch.num_params - arch.embedding_params - (0 if arch.tie_word_embeddings else head)
    linear = 2.0 * batch * prompt_tokens * body + 2.0 * batch * head
    attention = 2.0 * arch.num_layers * batch * prompt_tokens**2 * arch.num_attention_heads * arch.head_dim
    return linear + attention


def utilisation(floor_s: float, measured_s: float) -> float:
    """Achieved fraction of a floor (MBU or MFU); NaN when either side is unknown."""
    if math.isnan(floor_s) or math.isnan(measured_s) or measured_s <= 0:
        return math.nan
    return floor_s / measured_s


def compute_floor_s(flops: float, peak_tflops: float) -> float:
    if not peak_tflops or peak_tflops <= 0 or math.isnan(peak_tflops):
        return math.nan
    return flops / (peak_tflops * 1e12)
