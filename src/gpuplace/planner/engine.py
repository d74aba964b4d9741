"""Engine parameters per shape: what the serving engine would use, and the KV-cache capacity it leaves.

:func:`vllm_engine_params` gives the values ``vllm serve`` (v0.34.0, the image the manifests run) picks
by itself for a replica of a shape, each with its source, so that the serving model simulates the
engine as it will run and the manifests can pass the same values explicitly (the referee test
``tests/referee/test_vllm_args.py`` reads them from the installed vLLM and compares):

* ``max_num_batched_tokens`` / ``max_num_seqs``: ``EngineArgs.get_batch_defaults`` in
  ``vllm/engine/arg_utils.py`` for the OpenAI server: 16384 / 1024 on a GPU with at least 160 GiB
  (B200, B300, GB200), 8192 / 1024 on one with at least 70 GiB that is not an A100 (H100, H200, RTX PRO
  6000), else 2048 / 256 (vLLM PR #17885 found larger budgets slower on A100);
* ``block_size`` 64: ``CacheConfig.DEFAULT_BLOCK_SIZE`` (16 up to vLLM 0.33);
* ``gpu_memory_utilization`` 1.0: ``CacheConfig.resolved_gpu_memory_utilization`` with the extensible KV
  cache, the default on CUDA since vLLM 0.34 (0.92 up to 0.33);
* ``enable_chunked_prefill``: always on in the V1 engine (``_set_default_args_v1``);
* ``num_gpu_blocks`` (:func:`kv_cache_blocks`): (min(device memory × gpu_memory_utilization, device memory
  − margin) − weights/TP − activation peak of a full step − runtime reserve) ÷ (block_size × KV bytes per
  token per GPU), the arithmetic of vLLM 0.34's extensible KV cache (``measure_kv_cache_bytes``: the margin
  is max(1 GiB, 0.75 × the transient peak)) with the measured peaks estimated;
* ``max_model_len``: the model's ``max_position_embeddings``, lowered to what the KV cache holds when
  that is less (vLLM refuses to start otherwise).

:func:`transformers_engine_params` does the same for ``transformers serve --continuous-batching``, the
local target (``ContinuousBatchingConfig`` defaults in transformers 5.x).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gpuplace.planner.hardware import RUNTIME_OVERHEAD_GIB, SERVING_DTYPE_BYTES
from gpuplace.planner.steptime import kv_bytes_per_token_per_gpu, weight_bytes
from gpuplace.types import GpuSpec, ModelArch
from gpuplace.types.engine import EngineParams
from gpuplace.types.precision import BF16, Precision
from gpuplace.types.serving import VLLM_VERSION

GIB = 2**30
# vLLM 0.34 CacheConfig: an unset gpu_memory_utilization resolves to 1.0 with the extensible KV cache (the
# default on CUDA: the cache is sized from the memory measured free after warmup), 0.92 without it
VLLM_GPU_MEMORY_UTILIZATION = 1.0
VLLM_BLOCK_SIZE = 64  # vLLM 0.34 CacheConfig.DEFAULT_BLOCK_SIZE (16 up to 0.33)
# vLLM 0.34 v1/worker/extensible_kv_cache.py measure_kv_cache_bytes: the cache leaves free a margin of
# max(1 GiB, 0.75 × the transient peak) below the device's headroom, and the transient peak itself
KV_CACHE_MARGIN_FLOOR_GIB = 1.0
KV_CACHE_MARGIN_FRACTION = 0.75
LOGITS_BYTES = 4  # the sampler's dummy run holds fp32 logits of max_num_seqs rows


@dataclass(frozen=True, slots=True)
class KvBudget:
    """How the KV-cache capacity of one GPU of a replica was derived (bytes unless named)."""

    usable_bytes: float  # device memory × gpu_memory_utilization
    device_bytes: float  # the device's memory (a MIG slice's own)
    weights_bytes: float  # this GPU's share of the weights
    activation_bytes: float  # peak of one full step (max_num_batched_tokens) + the sampler's logits
    reserve_bytes: float  # CUDA context, NCCL buffers, CUDA graphs
    kv_bytes_per_token: int  # on this GPU
    block_size: int

    @property
    def margin_bytes(self) -> float:
        return max(KV_CACHE_MARGIN_FLOOR_GIB * GIB, KV_CACHE_MARGIN_FRACTION * self.activation_bytes)

    @property
    def kv_bytes(self) -> float:
        """vLLM 0.34's ``measure_kv_cache_bytes``: the requested memory or the device's less the margin,
        whichever is less, less what the engine holds (weights, reserve) and its transient peak."""
        ceiling = min(self.usable_bytes, self.device_bytes - self.margin_bytes)
        return ceiling - self.weights_bytes - self.activation_bytes - self.reserve_bytes

    @property
    def blocks(self) -> int:
        per_block = self.kv_bytes_per_token * self.block_size
        return int(self.kv_bytes // per_block) if self.kv_bytes > 0 else -1

    def describe(self) -> str:
        return (
            f"(min({self.usable_bytes / GIB:.1f} GiB usable, {self.device_bytes / GIB:.1f} GiB "
            f"− {self.margin_bytes / GIB:.2f} GiB margin) − {self.weights_bytes / GIB:.1f} GiB weights "
            f"− {self.activation_bytes / GIB:.2f} GiB activations "
            f"− {self.reserve_bytes / GIB:.1f} GiB reserve) "
            f"÷ ({self.block_size} tokens × {self.kv_bytes_per_token / 1024:g} KiB per token)"
        )


def activation_peak_bytes(arch: ModelArch, tp: int, batched_tokens: int, max_num_seqs: int) -> float:
    """Peak activation memory of a step of ``batched_tokens`` tokens on one GPU, with the logits.

    Inside a layer the largest live tensors are the MLP's gate/up output (2 × intermediate ÷ TP per
    token) next to the residual stream, the normed input and the attention output (hidden each).
    """
    per_token = (2 * arch.intermediate_size / tp + 4 * arch.hidden_size) * SERVING_DTYPE_BYTES
    logits = max_num_seqs * arch.vocab_size * LOGITS_BYTES / tp
    return batched_tokens * per_token + logits


def kv_cache_blocks(
    arch: ModelArch,
    memory_gib: float,
    tp: int,
    *,
    gpu_memory_utilization: float,
    block_size: int,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    reserve_gib: float = RUNTIME_OVERHEAD_GIB,
    precision: Precision = BF16,
) -> KvBudget:
    """The KV-cache budget of one GPU of a replica (every GPU of a TP group holds the same blocks), with
    the weights and the KV cache in ``precision`` (activations stay bf16)."""
    return KvBudget(
        usable_bytes=memory_gib * GIB * gpu_memory_utilization,
        device_bytes=memory_gib * GIB,
        weights_bytes=weight_bytes(arch, precision) / tp,
        activation_bytes=activation_peak_bytes(arch, tp, max_num_batched_tokens, max_num_seqs),
        reserve_bytes=reserve_gib * GIB,
        kv_bytes_per_token=kv_bytes_per_token_per_gpu(arch, tp, precision.kv_bytes),
        block_size=block_size,
    )


def _max_model_len(arch: ModelArch, capacity_tokens: int, block_size: int) -> tuple[int, str]:
    limit = arch.max_position_embeddings
    if 0 < capacity_tokens < limit:
        fitted = capacity_tokens // block_size * block_size
        return max(fitted, block_size), (
            f"lowered from max_position_embeddings={limit} to the {capacity_tokens} tokens the KV cache "
            "holds (vLLM refuses to start with a longer max_model_len)"
        )
    return limit, "the model's max_position_embeddings (vLLM's default)"


def vllm_batch_defaults(spec: GpuSpec, memory_gib: float) -> tuple[int, int, str]:
    """``(max_num_batched_tokens, max_num_seqs, why)`` that ``vllm serve`` picks on this device."""
    # vLLM asks the device it runs on: a MIG slice reports its own memory, not its GPU's
    why = f"vLLM {VLLM_VERSION} EngineArgs.get_batch_defaults (OpenAI server): "
    if memory_gib >= 160:
        return 16384, 1024, why + "≥ 160 GiB"
    if memory_gib >= 70 and "a100" not in spec.name.lower():
        return 8192, 1024, why + "≥ 70 GiB and not an A100"
    return 2048, 256, why + "below 70 GiB or an A100"


def vllm_kv_budget(
    arch: ModelArch,
    spec: GpuSpec,
    tp: int = 1,
    *,
    memory_gib: float | None = None,
    gpu_memory_utilization: float = VLLM_GPU_MEMORY_UTILIZATION,
    precision: Precision = BF16,
) -> KvBudget:
    """The KV-cache budget of one GPU of a ``vllm serve`` replica of ``arch`` on ``tp`` × ``spec``."""
    memory = spec.memory_gib if memory_gib is None else memory_gib
    batched, seqs, _ = vllm_batch_defaults(spec, memory)
    return kv_cache_blocks(
        arch,
        memory,
        tp,
        gpu_memory_utilization=gpu_memory_utilization,
        block_size=VLLM_BLOCK_SIZE,
        max_num_batched_tokens=batched,
        max_num_seqs=seqs,
        precision=precision,
    )


def vllm_engine_params(
    arch: ModelArch,
    spec: GpuSpec,
    tp: int = 1,
    *,
    memory_gib: float | None = None,
    gpu_memory_utilization: float = VLLM_GPU_MEMORY_UTILIZATION,
    precision: Precision = BF16,
) -> EngineParams:
    """The engine parameters ``vllm serve`` would choose for ``arch`` on ``tp`` × ``spec``, serving in
    ``precision`` (bf16 by default; FP8 weights and KV cache shrink the weights and grow the cache).

    ``memory_gib`` is one GPU's memory (a MIG slice's, a share's); the GPU's own by default. A
    negative ``num_gpu_blocks`` is refused by :class:`EngineParams`: the weights do not fit.
    """
    memory = spec.memory_gib if memory_gib is None else memory_gib
    batched, seqs, why = vllm_batch_defaults(spec, memory)
    budget = vllm_kv_budget(
        arch,
        spec,
        tp,
        memory_gib=memory,
        gpu_memory_utilization=gpu_memory_utilization,
        precision=precision,
    )
    max_len, len_why = _max_model_len(arch, budget.blocks * VLLM_BLOCK_SIZE, VLLM_BLOCK_SIZE)
    return EngineParams(
        max_num_batched_tokens=batched,
        max_num_seqs=seqs,
        block_size=VLLM_BLOCK_SIZE,
        gpu_memory_utilization=gpu_memory_utilization,
        max_model_len=max_len,
        enable_chunked_prefill=True,
        num_gpu_blocks=budget.blocks,
        precision=precision,
        async_scheduling=True,
        sources={
            "max_num_batched_tokens": why,
            "max_num_seqs": why,
            "block_size": f"vLLM {VLLM_VERSION} CacheConfig.DEFAULT_BLOCK_SIZE",
            "gpu_memory_utilization": f"vLLM {VLLM_VERSION} CacheConfig.resolved_gpu_memory_utilization "
            "with the extensible KV cache (the default on CUDA)"
            + ("" if gpu_memory_utilization == VLLM_GPU_MEMORY_UTILIZATION else ", × the time-sliced share"),
            "max_model_len": len_why,
            "enable_chunked_prefill": "always on in vLLM's V1 engine",
            "num_gpu_blocks": budget.describe() + f" on {spec.name}, TP={tp}",
            "async_scheduling": f"vLLM {VLLM_VERSION} VllmConfig.__post_init__: on when not set (a "
            "generation model on the uni or mp executor, no pipeline parallelism, no speculative decoding "
            "but EAGLE/MTP/n-gram/draft); passed explicitly",
        },
    )


# transformers 5.x ContinuousBatchingConfig / PagedAttentionMemoryHandler defaults
TRANSFORMERS_PAGE_SIZE = 256
TRANSFORMERS_MAX_BATCH_TOKENS = 8192
TRANSFORMERS_MAX_REQUESTS = 1024
TRANSFORMERS_CPU_MEMORY_PERCENT = 0.6
# The local target's KV cache, pinned: transformers' default takes 60% of a CPU's free memory, which a
# shared machine cannot spare; 256 pages of 256 tokens hold 64k tokens, far more than a local load test.
LOCAL_KV_BLOCKS = 256


def transformers_engine_params(
    arch: ModelArch,
    memory_gib: float,
    *,
    max_batch_tokens: int = TRANSFORMERS_MAX_BATCH_TOKENS,
    num_blocks: int | None = None,
) -> EngineParams:
    """The engine parameters of ``transformers serve --continuous-batching`` on one CPU or GPU.

    Its scheduler (FIFO: decodes first, then chunked prefills, then new requests, under a token budget)
    is vLLM's; its defaults differ: 256-token pages, an 8192-token budget, up to 1024 requests, and a
    KV cache of 60% of free memory on a CPU (``resolve_max_memory_percent``). ``memory_gib`` is the
    memory free after the weights are loaded; ``num_blocks`` pins the cache (``--cb-num-blocks``).
    """
    seqs = min(TRANSFORMERS_MAX_REQUESTS, max_batch_tokens)
    per_block = kv_bytes_per_token_per_gpu(arch, 1) * TRANSFORMERS_PAGE_SIZE
    if num_blocks is None:
        blocks = int(memory_gib * GIB * TRANSFORMERS_CPU_MEMORY_PERCENT // per_block)
        blocks_why = (
            f"{TRANSFORMERS_CPU_MEMORY_PERCENT:.0%} of {memory_gib:.1f} GiB free ÷ {per_block} B/block"
        )
    else:
        blocks, blocks_why = num_blocks, "--cb-num-blocks"
    max_len, len_why = _max_model_len(arch, blocks * TRANSFORMERS_PAGE_SIZE, TRANSFORMERS_PAGE_SIZE)
    src = "transformers 5.x ContinuousBatchingConfig default"
    return EngineParams(
        max_num_batched_tokens=max_batch_tokens,
        max_num_seqs=seqs,
        block_size=TRANSFORMERS_PAGE_SIZE,
        gpu_memory_utilization=TRANSFORMERS_CPU_MEMORY_PERCENT,
        max_model_len=max_len,
        enable_chunked_prefill=True,
        num_gpu_blocks=blocks,
        sources={
            "max_num_batched_tokens": f"{src} (PagedAttentionMemoryHandler._default_max_batch_tokens)",
            "max_num_seqs": f"{src}: max_requests_per_batch 1024, capped at max_batch_tokens",
            "block_size": f"{src}: page_size 256",
            "gpu_memory_utilization": "transformers resolve_max_memory_percent: 0.6 on a CPU",
            "max_model_len": len_why,
            "enable_chunked_prefill": "transformers' scheduler always splits a prompt over the budget",
            "num_gpu_blocks": blocks_why,
        },
    )


def local_engine_params(arch: ModelArch, num_blocks: int = LOCAL_KV_BLOCKS) -> EngineParams:
    """The local target's engine: ``transformers serve --continuous-batching`` with its own defaults and
    the KV cache pinned to ``num_blocks`` pages; the engine-step profile is measured with these, the
    local plan simulates them and the local server is started with them."""
    params = transformers_engine_params(arch, 0.0, num_blocks=num_blocks)
    sources = dict(params.sources)
    sources["num_gpu_blocks"] = f"--cb-num-blocks {num_blocks}: pinned by gpuplace (LOCAL_KV_BLOCKS)"
    return replace(params, sources=sources)
