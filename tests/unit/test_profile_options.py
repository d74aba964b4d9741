"""The profile step's edge spellings added for the GPU check: inductor options, the operator table's token
range, and the decode-step breakdown's arithmetic (tests/gpu runs the breakdown itself, on the CPU in make
test through tests/integration/test_gpu_check_bare.py)."""

from __future__ import annotations

import pytest

from gpuplace.errors import InvalidInput
from gpuplace.profiling.breakdown import breakdown, kernel_group
from gpuplace.steps.profile import operator_config, parse_options, profile_config


def test_compile_options_parse_to_typed_values_and_bad_ones_name_the_field() -> None:
    assert parse_options("compile_options", "coordinate_descent_tuning=true, x=3,y=0.5,z=max") == (
        ("coordinate_descent_tuning", True),
        ("x", 3),
        ("y", 0.5),
        ("z", "max"),
    )
    assert parse_options("compile_options", "") == ()
    with pytest.raises(InvalidInput) as err:
        parse_options("compile_options", "coordinate_descent_tuning")
    assert err.value.field == "compile_options"
    config = profile_config({"mode": "static", "compile_options": "coordinate_descent_tuning=true"})
    assert config.compile_options == (("coordinate_descent_tuning", True),)


def test_the_operator_tables_token_counts_are_powers_of_two_up_to_the_limit() -> None:
    config = operator_config({"model": "tiny", "operator_max_tokens": 300})
    assert config.gemm_tokens == (1, 2, 4, 8, 16, 32, 64, 128, 256)
    assert config.prefill_tokens == (128, 256) and config.decode_contexts == (256,)
    assert operator_config({"model": "tiny"}).gemm_tokens[-1] == 16384
    with pytest.raises(InvalidInput, match="operator_max_tokens"):
        operator_config({"model": "tiny", "operator_max_tokens": 0})


def test_kernels_are_grouped_by_name_and_the_gaps_are_the_rest_of_the_step() -> None:
    assert kernel_group("nvjet_tst_128x64_64x6_1x1_h_bz_TNT") == "gemm"
    assert kernel_group("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n") == "gemm"
    assert kernel_group("aten::addmm") == "gemm"
    assert kernel_group("pytorch_flash::flash_fwd_splitkv_kernel") == "attention"
    assert kernel_group("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0") == "other"
    kernels = {"gemv_a": (0.004, 4), "flash_fwd": (0.0004, 2), "triton_poi_fused_0": (0.0006, 20)}
    b = breakdown(
        kernels,
        2,
        batch_size=1,
        prompt_tokens=8,
        dtype="bfloat16",
        mode="static",
        step_s=0.003,
        weight_bytes=4.8e9,
        bandwidth_gbps=4800,
    )
    assert (b.gemm_s, b.attention_s, b.other_s) == pytest.approx((0.002, 0.0002, 0.0003))
    assert b.gaps_s == pytest.approx(0.0005) and b.kernels_per_step == 13
    assert b.gemm_bandwidth_share == pytest.approx(0.5)
    assert "gaps 0.50 ms" in b.describe()
