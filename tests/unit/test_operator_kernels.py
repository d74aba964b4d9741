"""The step model built from an operator table (planner/kernels.py), held to the table measured on a real H200
(docs/benchmarks/gpu/2026-12-04/operators.json, ``gpuplace profile --operators`` on 2026-12-04): the real
measurement is the referee, not a table this test writes."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from gpuplace.catalog import load_gpu_catalog
from gpuplace.catalog.efficiency import load_efficiency_table
from gpuplace.cli import main
from gpuplace.errors import InvalidInput
from gpuplace.planner.hardware import ReplicaHardware
from gpuplace.planner.kernel_fit import kernel_fit
from gpuplace.planner.kernels import (
    BODY_LAYERS,
    gemm_dtype,
    kernel_curves,
    linear_curves,
    operator_step_model,
    operators_refusal,
)
from gpuplace.planner.steptime import roofline_step_model
from gpuplace.profiling.operator_table import read_operator_table, write_operator_table
from gpuplace.types.operators import OperatorTable
from gpuplace.types.precision import Precision

REPO = Path(__file__).resolve().parents[2]
H200_TABLE = REPO / "docs/benchmarks/gpu/2026-12-04/operators.json"
GPU = "H200-SXM-141GB"


@pytest.fixture(scope="module")
def table() -> OperatorTable:
    return read_operator_table(H200_TABLE)


def _shape(tp: int = 1) -> ReplicaHardware:
    spec = load_gpu_catalog().get(GPU)
    return ReplicaHardware(spec=spec, tp=tp, link="single" if tp == 1 else "nvlink")


def test_the_h200_table_reads_back_and_names_its_gpu(table: OperatorTable, tmp_path: Path) -> None:
    assert table.gpu == GPU and table.device.kind == "cuda"
    assert set(table.dtypes) >= {"bfloat16", "fp8"}
    again = read_operator_table(write_operator_table(table, tmp_path / "t.json"))
    assert again.to_json_dict() == table.to_json_dict()


@pytest.mark.parametrize(
    ("text", "why"),
    [("", "holds no operator table"), ("[1]", "holds no operator table"), ("{", "is not JSON")],
)
def test_a_file_that_is_not_a_table_is_refused_naming_the_field(tmp_path: Path, text: str, why: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(InvalidInput) as err:
        read_operator_table(path)
    assert err.value.field == "operators" and why in str(err.value)


def test_a_bad_row_is_refused(table: OperatorTable, tmp_path: Path) -> None:
    data = {"format": "gpuplace-operators/1", **table.to_json_dict()}
    data["rows"][0]["seconds"] = -1
    (tmp_path / "t.json").write_text(json.dumps(data))
    with pytest.raises(InvalidInput, match="not a positive time"):
        read_operator_table(tmp_path / "t.json")


def test_the_linear_layers_of_the_tables_own_model_are_its_measured_kernels(table: OperatorTable) -> None:
    """At TP 1, for the model the table measured, the step model's linear layers at a measured token count
    are the measured kernels: layers × (qkv + o + gate_up + down), and the head on its own."""
    spec = load_gpu_catalog().get(GPU)
    curves = kernel_curves(table, "bfloat16")
    body, head = linear_curves(
        table.model,
        curves,
        tp=1,
        bandwidth_gbps=spec.hbm_bandwidth_gbps,
        peak_tflops=spec.peak_tflops("bfloat16"),
    )
    rows = {(r.layer, r.tokens): r.seconds for r in table.of("gemm", "bfloat16")}
    for t, seconds in body:
        if (BODY_LAYERS[0], int(t)) in rows:
            measured = table.model.num_layers * sum(rows[layer, int(t)] for layer in BODY_LAYERS)
            assert seconds == pytest.approx(measured, rel=1e-9)
    for t, seconds in head:
        if ("lm_head", int(t)) in rows:
            assert seconds == pytest.approx(rows["lm_head", int(t)], rel=1e-9)


def test_the_linear_layers_shard_as_vllm_shards_them(table: OperatorTable) -> None:
    """Beyond the model's 8 KV heads vLLM replicates them: at TP 16 a GPU's QKV shard keeps one KV head
    each of K and V (32·128/16 + 2·128 = 512 columns, not (32 + 16)·128/16 = 384), so in the compute-bound
    regime the linear layers at TP 16 take more than half their time at TP 8."""
    spec = load_gpu_catalog().get(GPU)
    curves = kernel_curves(table, "bfloat16")

    def body(tp: int) -> tuple[tuple[float, float], ...]:
        return linear_curves(
            table.model, curves, tp=tp, bandwidth_gbps=spec.hbm_bandwidth_gbps,
            peak_tflops=spec.peak_tflops("bfloat16"),
        )[0]  # fmt: skip

    assert table.model.num_kv_heads == 8
    (t8, s8), (t16, s16) = body(8)[-1], body(16)[-1]
    assert t8 == t16 >= 4096 and s16 > 0.51 * s8


def test_a_prediction_with_the_table_moves_as_its_measured_times_say(table: OperatorTable) -> None:
    """A decode step of 1 and of 64 sequences, and a 4,096-token prefill: the model with the table differs
    from the class-default one by what the measured kernels differ from the defaults' roofline."""
    arch = table.model
    eff = load_efficiency_table().for_gpu(load_gpu_catalog().get(GPU), arch)
    default = roofline_step_model(arch, _shape(), eff, measured_gemms=False)  # the class roofline
    measured, _ = operator_step_model(arch, _shape(), eff, table)
    assert measured.source.startswith(f"measured kernels of {GPU}") and measured.gemm_curve
    rows = {(r.layer, r.tokens): r.seconds for r in table.of("gemm", "bfloat16")}
    for n in (1, 64):
        gemm_measured = arch.num_layers * sum(rows[layer, n] for layer in BODY_LAYERS) + rows["lm_head", n]
        gemm_default = max(default.weights_s, n * default.gemm_s_per_token + n * default.head_s_per_sample)
        with_table = measured.step_s(n, n, n, decode_context=n * 1024)
        without = default.step_s(n, n, n, decode_context=n * 1024)
        # the linear layers' difference is the measured kernels' difference from the defaults' roofline
        others = (with_table - gemm_measured) - (without - gemm_default)
        assert (with_table - without) == pytest.approx(gemm_measured - gemm_default + others)
        assert abs(others) < 0.25 * abs(gemm_measured - gemm_default) + 2e-4  # attention and overheads only
    # prefill attention: at the MFU the table's prefills were fitted to (not the class's 0.5)
    curves = kernel_curves(table, "bfloat16")
    flops_per_pair = 4 * arch.num_layers * arch.num_attention_heads * arch.head_dim
    assert curves.prefill_mfu != pytest.approx(eff.attention_mfu, rel=0.02)
    peak = load_gpu_catalog().get(GPU).peak_tflops("bfloat16") * 1e12
    assert measured.attn_s_per_pair == pytest.approx(flops_per_pair / (peak * curves.prefill_mfu))


def test_other_gpus_models_and_tp_are_priced_with_their_reasons(table: OperatorTable) -> None:
    assert operators_refusal(table, GPU) == ""
    assert "not on H100-SXM5-80GB" in operators_refusal(table, "H100-SXM5-80GB")
    cpu = replace(table, device=replace(table.device, kind="cpu", name="x86_64", catalog_gpu=""))
    assert "never calibrates a GPU" in operators_refusal(cpu, GPU)
    assert gemm_dtype(table, fp8_weights=True) == "fp8" and gemm_dtype(table, fp8_weights=False) == "bfloat16"
    from gpuplace.catalog.models import model_arch_from_config, resolve_model

    arch = model_arch_from_config("llama-3.1-70b", resolve_model("llama-3.1-70b").config)
    eff = load_efficiency_table().for_gpu(load_gpu_catalog().get(GPU), arch)
    model, notes = operator_step_model(arch, _shape(tp=4), eff, table, Precision.parse("fp8", "auto"))
    assert "(fp8," in model.source and "TP4" in model.source
    assert any("applied to llama-3.1-70b at TP 4" in n for n in notes)


def test_the_fit_is_scored_out_of_sample_per_regime(table: OperatorTable) -> None:
    """Each point is predicted by the model built without it; the regimes the H200 measured are all
    there, and the GEMM interpolation between measured token counts holds its points to a few percent."""
    eff = load_efficiency_table().for_gpu(load_gpu_catalog().get(GPU), table.model)
    fits = {f.regime: f for f in kernel_fit(table, eff)}
    assert {
        "GEMM bfloat16, memory-bound",
        "GEMM bfloat16, compute-bound",
        "GEMM fp8, memory-bound",
        "decode attention",
        "prefill attention",
    } <= set(fits)
    assert fits["GEMM bfloat16, memory-bound"].held_out_median_abs < 0.05
    assert fits["decode attention"].held_out_median_abs < 0.10
    # the class defaults price this GPU's attention optimistically: what the table corrects
    assert fits["decode attention"].defaults_median < 0 and fits["prefill attention"].defaults_median < 0
    assert all(math.isfinite(f.held_out_median_abs) for f in fits.values())


def _fleet(tmp_path: Path) -> Path:
    path = tmp_path / "h200.yaml"
    path.write_text(
        "schema: gpuplace.io/fleet/v1\nname: h200-test\ndescription: two 8×H200 hosts\n"
        "defaults: {cpu_cores: 192, memory_gib: 2048, numa_nodes: 2}\n"
        "nodes:\n  - name: h200-{i}\n    count: 2\n    gpus:\n"
        "      - {product: NVIDIA-H200, count: 8, numa_node: 0, nvlink_island: nvswitch}\n"
    )
    return path


def test_plan_with_the_table_prices_its_gpu_with_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`gpuplace plan --operators` on a fleet of the table's GPU: the chosen shape's prediction is made on the
    measured kernels (its note says so), and differs from the plan without the table."""
    fleet = _fleet(tmp_path)
    args = ["plan", "--model", "llama-3.1-8b", "--inventory", str(fleet), "--slo-tpot-ms", "50"]
    args += ["--slo-ttft-ms", "2000", "--rate", "20", "--prompt-tokens", "1024", "--output-tokens", "128"]
    assert main([*args, "--out", str(tmp_path / "plain")]) == 0
    assert main([*args, "--operators", str(H200_TABLE), "--out", str(tmp_path / "measured")]) == 0
    err = capsys.readouterr().err
    assert "linear layers and attention from kernels measured on it" in err
    plain = json.loads((tmp_path / "plain" / "plan.json").read_text())
    measured = json.loads((tmp_path / "measured" / "plan.json").read_text())
    assert plain["plan_id"] != measured["plan_id"]
    assert plain["chosen"]["prediction"] != measured["chosen"]["prediction"]


def test_predict_refuses_a_table_of_another_device(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "predict",
            "--model",
            "llama-3.1-8b",
            "--gpu",
            "H100-SXM5-80GB",
            "--rate",
            "1",
            "--operators",
            str(H200_TABLE),
        ]
    )
    err = capsys.readouterr().err
    assert code != 0
    assert "operators" in err and f"was measured on {GPU}, not on H100-SXM5-80GB" in err
