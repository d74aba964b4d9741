"""The roofline arithmetic on the tiny preset, checked against figures worked out by hand.

tiny: 2 layers, hidden 64, 4 heads, 2 KV heads, head_dim 16, MLP 256, vocab 1024, tied embeddings,
188,736 parameters (65,536 of them the embedding).
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from gpuplace.catalog import model_arch_from_config, resolve_model
from gpuplace.profiling import roofline
from gpuplace.types import ModelArch

TINY_PARAMS = 188_736
TINY_EMBED = 1024 * 64


@pytest.fixture(scope="module")
def tiny() -> ModelArch:
    arch = model_arch_from_config("tiny", resolve_model("tiny").config)
    assert arch.num_params == TINY_PARAMS
    assert arch.tie_word_embeddings
    return arch


@pytest.fixture(scope="module")
def tiny_untied(tiny: ModelArch) -> ModelArch:
    # The same body with a separate LM head: one more vocab × hidden matrix.
    return dataclasses.replace(tiny, tie_word_embeddings=False, num_params=TINY_PARAMS + TINY_EMBED)


def test_dtype_bytes() -> None:
    assert roofline.dtype_bytes("float32") == 4
    assert roofline.dtype_bytes("bfloat16") == 2
    assert roofline.dtype_bytes("float16") == 2
    with pytest.raises(KeyError):
        roofline.dtype_bytes("fp8")


# --- decode -------------------------------------------------------------------------------------


def test_tiny_kv_bytes_per_token(tiny: ModelArch) -> None:
    # 2 (K, V) × 2 layers × 2 kv heads × 16 head_dim × 2 bytes
    assert tiny.kv_bytes_per_token(2) == 256


def test_decode_bytes_per_step_tiny_bf16(tiny: ModelArch) -> None:
    # weights: all 188,736 params (tied: the head reads the embedding matrix) × 2 bytes = 377,472
    # KV: batch 4 × 100 tokens × 256 bytes = 102,400
    assert roofline.decode_bytes_per_step(tiny, 4, 100, "bfloat16") == 377_472 + 102_400


def test_decode_bytes_per_step_tiny_fp32_fractional_context(tiny: ModelArch) -> None:
    # fp32 doubles both terms; the context is a mean and may be fractional
    expected = TINY_PARAMS * 4 + 1 * 16.5 * 512
    assert roofline.decode_bytes_per_step(tiny, 1, 16.5, "float32") == expected


def test_decode_bytes_untied_skip_the_input_embedding(tiny: ModelArch, tiny_untied: ModelArch) -> None:
    # Untied: the input embedding is a gather, so only the body and the head are read, which is
    # the same count as the tied model's parameters.
    assert roofline.decode_bytes_per_step(tiny_untied, 2, 10, "float16") == roofline.decode_bytes_per_step(
        tiny, 2, 10, "float16"
    )


def test_decode_bytes_grow_linearly_with_batch_and_context(tiny: ModelArch) -> None:
    base = roofline.decode_bytes_per_step(tiny, 1, 0, "bfloat16")
    one = roofline.decode_bytes_per_step(tiny, 1, 1, "bfloat16")

    assert base == TINY_PARAMS * 2
    assert one - base == 256
    assert roofline.decode_bytes_per_step(tiny, 8, 64, "bfloat16") - base == 8 * 64 * 256


@pytest.mark.parametrize(
    ("prompt", "output", "expected"),
    [
        (128, 32, 144.0),  # 31 steps attend to 129..159 tokens: mean 128 + 16
        (128, 2, 129.0),  # one step, attending to prompt + 1
        (0, 11, 5.5),  # steps 1..10: mean 5.5
        (512, 1, 513.0),  # no decode step: treated as one, never a division by zero
        (512, 0, 513.0),
    ],
)
def test_mean_decode_context(prompt: int, output: int, expected: float) -> None:
    assert roofline.mean_decode_context(prompt, output) == expected


def test_mean_decode_context_is_the_mean_over_steps() -> None:
    prompt, output = 37, 9
    contexts = [prompt + k for k in range(1, output)]  # step k attends to prompt + k tokens

    assert roofline.mean_decode_context(prompt, output) == sum(contexts) / len(contexts)


def test_memory_floor_s() -> None:
    assert roofline.memory_floor_s(2e9, 1000) == pytest.approx(2e-3)
    assert roofline.memory_floor_s(3.35e12, 3350) == pytest.approx(1.0)
    assert roofline.memory_floor_s(0, 100) == 0.0


@pytest.mark.parametrize("bandwidth", [0, 0.0, -1.0, math.nan])
def test_memory_floor_s_unknown_bandwidth_is_nan(bandwidth: float) -> None:
    assert math.isnan(roofline.memory_floor_s(1e9, bandwidth))


def test_tiny_decode_floor_on_an_h100(tiny: ModelArch) -> None:
    bytes_moved = roofline.decode_bytes_per_step(tiny, 4, 100, "bfloat16")

    assert roofline.memory_floor_s(bytes_moved, 3350) == pytest.approx(479_872 / 3.35e12)


# --- prefill ------------------------------------------------------------------------------------


def test_prefill_flops_tiny_by_hand(tiny: ModelArch) -> None:
    # body = 188,736 − 65,536 embedding = 123,200 (tied: no separate head)
    # linear = 2 × batch 2 × prompt 10 × 123,200 + 2 × 2 × 65,536 (head on the last position only)
    # attention = 2 × 2 layers × 2 × 10² × 4 heads × 16
    linear = 2 * 2 * 10 * 123_200 + 2 * 2 * 65_536
    attention = 2 * 2 * 2 * 100 * 4 * 16
    assert linear == 5_190_144
    assert attention == 51_200

    assert roofline.prefill_flops(tiny, 2, 10) == 5_241_344


def test_prefill_flops_do_not_depend_on_tying(tiny: ModelArch, tiny_untied: ModelArch) -> None:
    assert roofline.prefill_flops(tiny_untied, 3, 17) == roofline.prefill_flops(tiny, 3, 17)


def test_prefill_attention_term_is_quadratic_in_prompt(tiny: ModelArch) -> None:
    def attention(prompt: int) -> float:
        linear_per_token = 2 * 123_200
        return roofline.prefill_flops(tiny, 1, prompt) - prompt * linear_per_token - 2 * 65_536

    assert attention(10) == 2 * 2 * 100 * 4 * 16
    assert attention(20) == 4 * attention(10)


def test_prefill_flops_scale_with_batch(tiny: ModelArch) -> None:
    assert roofline.prefill_flops(tiny, 8, 64) == 8 * roofline.prefill_flops(tiny, 1, 64)


# --- floors and utilisation ---------------------------------------------------------------------


def test_compute_floor_s() -> None:
    assert roofline.compute_floor_s(989e12, 989) == pytest.approx(1.0)
    assert roofline.compute_floor_s(5_241_344, 1) == pytest.approx(5.241344e-6)


@pytest.mark.parametrize("peak", [0, -5.0, math.nan])
def test_compute_floor_s_unknown_peak_is_nan(peak: float) -> None:
    assert math.isnan(roofline.compute_floor_s(1e12, peak))


def test_utilisation() -> None:
    assert roofline.utilisation(0.5e-3, 1e-3) == 0.5
    assert roofline.utilisation(2.0, 1.0) == 2.0  # not clamped: >1 means the floor inputs are wrong


@pytest.mark.parametrize(
    ("floor_s", "measured_s"),
    [(math.nan, 1.0), (1.0, math.nan), (1.0, 0.0), (1.0, -1.0), (math.nan, math.nan)],
)
def test_utilisation_unknown_is_nan(floor_s: float, measured_s: float) -> None:
    assert math.isnan(roofline.utilisation(floor_s, measured_s))


def test_mbu_end_to_end_with_nan_bandwidth_stays_nan(tiny: ModelArch) -> None:
    floor = roofline.memory_floor_s(roofline.decode_bytes_per_step(tiny, 1, 10, "float32"), math.nan)

    assert math.isnan(roofline.utilisation(floor, 0.01))
