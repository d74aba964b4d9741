"""FP8 weights (W8A8) and an FP8 KV cache: the value type, the memory model, the step-time model, the vLLM
arguments the plan emits, and the refusals (an FP8 precision on a GPU without FP8 tensor cores).

Pure arithmetic and planning over hand-made fleets: no GPU is needed. Simulations use 300 requests per
replica to keep the suite fast.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gpuplace.catalog import load_gpu_catalog, model_arch_from_config, resolve_model
from gpuplace.catalog.efficiency import load_efficiency_table
from gpuplace.errors import InvalidInput
from gpuplace.inventory import parse_fleet
from gpuplace.manifests import ServingOptions, serving_spec
from gpuplace.planner import plan_placement
from gpuplace.planner.engine import vllm_engine_params
from gpuplace.planner.hardware import ReplicaHardware
from gpuplace.planner.steptime import decode_weight_bytes, linear_params, roofline_step_model, weight_bytes
from gpuplace.steps.plan_params import plan_request
from gpuplace.types.engine import EngineParams
from gpuplace.types.precision import BF16, Precision

CATALOG = load_gpu_catalog()
TABLE = load_efficiency_table()
ARCH = model_arch_from_config("llama-3.1-8b", resolve_model("llama-3.1-8b").config)
FP8 = Precision("fp8")
FP8_KV = Precision("fp8", "fp8")


def test_the_default_is_bf16_and_emits_no_flag() -> None:
    assert Precision() == BF16 == Precision.parse(None, "")
    assert (BF16.weight_bytes, BF16.kv_bytes, BF16.uses_fp8) == (2, 2, False)
    assert BF16.vllm_args() == []


def test_fp8_is_spelt_as_vllm_serve_spells_it() -> None:
    assert FP8.vllm_args() == ["--quantization", "fp8"]
    assert Precision("bf16", "fp8").vllm_args() == ["--kv-cache-dtype", "fp8"]
    assert FP8_KV.vllm_args() == ["--quantization", "fp8", "--kv-cache-dtype", "fp8"]
    assert Precision.parse("FP8", "fp8") == FP8_KV
    assert Precision.from_json_dict(FP8_KV.to_json_dict()) == FP8_KV
    assert FP8_KV.label == "fp8 + fp8 KV"


@pytest.mark.parametrize(
    ("dtype", "kv", "field"), [("fp4", "auto", "dtype"), ("bf16", "int8", "kv_cache_dtype")]
)
def test_unknown_dtypes_are_refused_naming_the_field(dtype: str, kv: str, field: str) -> None:
    with pytest.raises(InvalidInput) as info:
        Precision.parse(dtype, kv)
    assert info.value.field == field
    assert "must be one of" in str(info.value)


def test_fp8_weights_halve_the_linear_layers_only() -> None:
    body = linear_params(ARCH)
    rest = ARCH.num_params - body  # the embedding and the untied LM head of Llama-3.1-8B stay bf16

    assert weight_bytes(ARCH) == 2 * ARCH.num_params
    assert weight_bytes(ARCH, FP8) == body + 2 * rest
    assert decode_weight_bytes(ARCH) == 2 * ARCH.decode_weight_params
    assert 0.5 < weight_bytes(ARCH, FP8) / weight_bytes(ARCH) < 0.6


def test_fp8_leaves_room_for_more_kv_blocks_and_an_fp8_cache_doubles_them() -> None:
    h100 = CATALOG.get("H100-SXM5-80GB")
    bf16 = vllm_engine_params(ARCH, h100)
    fp8 = vllm_engine_params(ARCH, h100, precision=FP8)
    fp8_kv = vllm_engine_params(ARCH, h100, precision=FP8_KV)

    assert bf16.precision == BF16 and fp8_kv.precision == FP8_KV
    assert bf16.num_gpu_blocks < fp8.num_gpu_blocks
    # the same memory left for the cache, at half the bytes per block
    assert fp8_kv.num_gpu_blocks == pytest.approx(2 * fp8.num_gpu_blocks, abs=1)
    # 8B in bf16 (16 GB) does not fit a 1g.10gb slice; in fp8 it still does not (8.5 GB of weights + the
    # reserve), but a 2g.20gb slice holds it with room for a cache
    with pytest.raises(InvalidInput):
        vllm_engine_params(ARCH, h100, memory_gib=9.75, precision=FP8)
    assert vllm_engine_params(ARCH, h100, memory_gib=19.62, precision=FP8).num_gpu_blocks > 0


def test_the_step_model_reads_fewer_bytes_and_runs_the_linear_layers_at_the_fp8_peak() -> None:
    h100 = ReplicaHardware(CATALOG.get("H100-SXM5-80GB"))
    eff = TABLE.for_gpu(h100.spec, ARCH)
    bf16 = roofline_step_model(ARCH, h100, eff)
    fp8 = roofline_step_model(ARCH, h100, eff, FP8)
    fp8_kv = roofline_step_model(ARCH, h100, eff, FP8_KV)

    assert fp8.weights_s < 0.6 * bf16.weights_s  # a small-batch decode step is bound by the weights
    assert fp8.gemm_s_per_token == pytest.approx(bf16.gemm_s_per_token * 989 / 1979)
    assert fp8.head_s_per_sample == bf16.head_s_per_sample  # the LM head stays bf16
    assert fp8.kv_s_per_token == bf16.kv_s_per_token
    # the roofline reads an FP8 cache's half the bytes at the same MBU; vLLM's measured kernels
    # (attention_fits.csv) read them at a lower fraction of the bandwidth than a bf16 cache's
    roofline = {
        p: roofline_step_model(ARCH, h100, eff, p, measured_gemms=False).kv_s_per_token for p in (FP8, FP8_KV)
    }
    assert roofline[FP8_KV] == pytest.approx(roofline[FP8] / 2)
    assert 0.5 * fp8.kv_s_per_token < fp8_kv.kv_s_per_token < fp8.kv_s_per_token
    assert "fp8 + fp8 KV" in fp8_kv.source
    assert fp8.decode_terms(1)[0] < bf16.decode_terms(1)[0]


def test_fp8_on_a_gpu_without_fp8_tensor_cores_is_refused_naming_it() -> None:
    a100 = ReplicaHardware(CATALOG.get("A100-SXM4-80GB"))
    with pytest.raises(InvalidInput) as info:
        roofline_step_model(ARCH, a100, TABLE.for_gpu(a100.spec, ARCH), FP8)
    assert info.value.field == "dtype"
    assert "A100-SXM4-80GB (ampere) has no FP8 tensor cores" in str(info.value)
    with pytest.raises(InvalidInput, match=r"A100-SXM4-80GB .* cannot serve an FP8 KV cache"):
        plan_request(_params(gpus="A100-SXM4-80GB", kv_cache_dtype="fp8"), CATALOG)
    with pytest.raises(InvalidInput) as info:
        plan_request(_params(gpus="H100-SXM5-80GB,A100-80GB", dtype="fp8"), CATALOG)
    assert info.value.field == "dtype" and "--gpus names A100-SXM4-80GB" in str(info.value)
    assert plan_request(_params(gpus="L4", dtype="fp8"), CATALOG).precision == FP8


def test_engine_params_carry_the_precision_into_the_flags_and_back() -> None:
    engine = vllm_engine_params(ARCH, CATALOG.get("H100-SXM5-80GB"), precision=FP8_KV)
    args = engine.to_vllm_args()

    assert args[-4:] == ["--quantization", "fp8", "--kv-cache-dtype", "fp8"]
    assert EngineParams.from_json_dict(engine.to_json_dict()) == engine
    old = engine.to_json_dict()
    del old["precision"]  # a plan written before precision existed reads back as bf16
    assert EngineParams.from_json_dict(old).precision == BF16
    assert "--quantization" not in replace(engine, precision=BF16).to_vllm_args()


def _params(**overrides: object) -> dict[str, object]:
    base: dict[str, object] = {
        "model": "llama-3.1-8b",
        "slo_tpot_ms": 60,
        "slo_ttft_ms": 3000,
        "rate": 1,
        "prompt_tokens": 512,
        "output_tokens": 64,
    }
    return base | overrides


MIXED = parse_fleet(
    {
        "nodes": [
            {"name": "a100", "gpus": [{"product": "A100-SXM4-80GB", "count": 1}]},
            {"name": "l4", "gpus": [{"product": "L4-24GB", "count": 1}]},
        ]
    },
    "t",
    CATALOG,
)


def test_an_fp8_plan_rejects_the_gpus_without_fp8_and_serves_with_the_fp8_flags() -> None:
    request = replace(plan_request(_params(dtype="fp8"), CATALOG), simulated_requests=300)
    plan = plan_placement(ARCH, MIXED, CATALOG, request, efficiency=TABLE)

    a100 = [c for c in plan.candidates if c.gpu == "A100-SXM4-80GB" and c.tp == 1]
    assert a100 and all("no FP8 tensor cores" in c.reason for c in a100)
    assert plan.chosen.gpu == "L4-24GB"
    assert plan.engine is not None and plan.engine.precision == FP8
    serving = serving_spec(plan, MIXED, ServingOptions())
    assert serving.args[serving.args.index("--quantization") + 1] == "fp8"
    assert "--kv-cache-dtype" not in serving.args
    # in bf16 the same fleet plans as it always did: no precision flag
    bf16 = plan_placement(ARCH, MIXED, CATALOG, replace(request, precision=BF16), efficiency=TABLE)
    assert "--quantization" not in serving_spec(bf16, MIXED, ServingOptions()).args


def test_a_b200_fleet_plans_with_gpus_b200() -> None:
    fleet = parse_fleet(
        {
            "nodes": [
                {"name": "b200", "gpus": [{"product": "NVIDIA-B200", "count": 8, "nvlink_island": "nvs"}]}
            ]
        },
        "t",
        CATALOG,
    )
    request = replace(plan_request(_params(gpus="B200", rate=20), CATALOG), simulated_requests=300)
    plan = plan_placement(ARCH, fleet, CATALOG, request, efficiency=TABLE)

    assert plan.chosen.gpu == "B200-SXM-180GB"
    assert any("efficiency.csv[blackwell]" in n or "GPU-class default" in n for n in plan.notes)


def test_gpuplace_plan_says_the_precision_it_chose_and_refuses_fp8_on_a_named_ampere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpuplace.cli import main

    base = ["plan", "--model", "llama-3.1-8b", "--inventory", "h100-nvlink", "--slo-tpot-ms", "50"]
    base += ["--slo-ttft-ms", "2000", "--rate", "4"]
    assert main([*base, "--dtype", "fp8", "--kv-cache-dtype", "fp8", "--out", str(tmp_path / "p")]) == 0
    chosen = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("chosen:"))
    assert "in fp8 + fp8 KV" in chosen
    assert main([*base, "--out", str(tmp_path / "b")]) == 0
    assert " in fp8" not in capsys.readouterr().out
    assert main([*base, "--dtype", "fp8", "--gpus", "A100-80GB", "--out", str(tmp_path / "a")]) != 0
    err = capsys.readouterr().err
    assert "dtype='fp8'" in err and "A100-SXM4-80GB (ampere) has no FP8 tensor cores" in err
    assert not (tmp_path / "a").exists()  # nothing half-written
