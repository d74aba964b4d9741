"""The measured linear-layer curves (``catalog/data/gemm_curves.csv``, from AIConfigurator's GEMM tables) and
where the step model uses them: whole H100 SXM, H200 SXM and A100 SXM GPUs, for the catalog presets'
shapes, bf16 and (Hopper) FP8 weights; never a MIG slice, a time-sliced share, or a shape the file lacks;
and never in place of a table the user measured (``gpuplace profile --operators``).

The file is checked against AIConfigurator's tables themselves by ``tests/benchmarks/bench_gemm_tables.py``
(``shipped ÷ measured``), which needs AIConfigurator's venv; here it is held to its own structure."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpuplace.catalog import load_gpu_catalog, model_arch_from_config, resolve_model
from gpuplace.catalog.efficiency import load_efficiency_table
from gpuplace.catalog.gemm_curves import (
    COLUMNS,
    load_gemm_curves,
    measured_gemm_curves,
    shapes_key,
)
from gpuplace.errors import InvalidInput
from gpuplace.planner.hardware import ReplicaHardware
from gpuplace.planner.kernels import operator_step_model
from gpuplace.planner.steptime import StepTimeModel, choose_efficiencies, interp_loglog, roofline_step_model
from gpuplace.profiling.operator_table import read_operator_table
from gpuplace.types import ModelArch
from gpuplace.types.operators import sharded_shapes
from gpuplace.types.precision import BF16, Precision

REPO = Path(__file__).resolve().parents[2]
FP8 = Precision("fp8", "auto")


def _arch(name: str = "llama-3.1-8b") -> ModelArch:
    return model_arch_from_config(name, resolve_model(name).config)


def _step(gpu: str, arch: ModelArch, precision: Precision = BF16, **hw: Any) -> StepTimeModel:
    shape = ReplicaHardware(spec=load_gpu_catalog().get(gpu), **hw)
    eff, _ = choose_efficiencies(arch, shape, load_efficiency_table())
    return roofline_step_model(arch, shape, eff, precision)


def test_shards_are_vllms() -> None:
    """Column-parallel QKV, gate-up and LM head split n; O and down split k; KV heads are replicated when
    TP exceeds them (70B has 8)."""
    arch = _arch("llama-3.1-70b")
    assert sharded_shapes(arch, 8) == [
        ("qkv", 64 * 128 // 8 + 2 * 128, 8192),
        ("o", 8192, 8192 // 8),
        ("gate_up", 2 * 28672 // 8, 8192),
        ("down", 8192, 28672 // 8),
        ("lm_head", 128256 // 8, 8192),
    ]
    assert sharded_shapes(arch, 16)[0] == ("qkv", 64 * 128 // 16 + 2 * 128, 8192)
    with pytest.raises(InvalidInput, match=r"^tp=0"):
        sharded_shapes(arch, 0)


def test_the_shipped_file_covers_the_presets_on_the_measured_gpus() -> None:
    curves = load_gemm_curves()
    catalog = load_gpu_catalog()
    assert {(gpu, dtype) for gpu, dtype, *_ in curves} == {
        ("H100-SXM5-80GB", "bfloat16"),
        ("H100-SXM5-80GB", "fp8"),
        ("H200-SXM-141GB", "bfloat16"),
        ("H200-SXM-141GB", "fp8"),
        ("A100-SXM4-80GB", "bfloat16"),
    }
    for (gpu, _, _, tp), c in curves.items():
        assert catalog.get(gpu).name == gpu and tp in (1, 2, 4, 8)
        tokens = [t for t, _ in c.layer]
        assert tokens == sorted(tokens) and tokens[0] == 1 and tokens[-1] >= 8192
        assert c.layer[-1][1] > 10 * c.layer[0][1]  # a full compute-bound step costs more than a decode
        assert "AIConfigurator 0.12.0" in c.source and "vLLM" in c.source
    for model in ("llama-3.1-8b", "llama-3.1-70b"):
        for tp in (1, 2, 4, 8):
            assert measured_gemm_curves("H100-SXM5-80GB", _arch(model), tp) is not None, (model, tp)
    assert measured_gemm_curves("L40S-48GB", _arch(), 1) is None
    assert measured_gemm_curves("A100-SXM4-80GB", _arch(), 1, "fp8") is None
    assert measured_gemm_curves("H100-SXM5-80GB", _arch("tiny"), 1) is None


def test_a_malformed_file_is_refused_naming_the_line_and_column(tmp_path: Path) -> None:
    head = ",".join(COLUMNS)
    good = 'H100-SXM5-80GB,bfloat16,qkv=1x1,1,1,1e-4,2e-4,"src"'
    bad = tmp_path / "bad.csv"
    bad.write_text(f"{head}\n{good}\nH100-SXM5-80GB,bfloat16,qkv=1x1,1,2,fast,2e-4,src\n")
    with pytest.raises(InvalidInput, match=r"^bad.csv:3 layer_s='fast': must be a positive number"):
        load_gemm_curves(bad)
    for tp in ("2.5", "0", "two"):
        bad.write_text(f"{head}\n{good}\nH100-SXM5-80GB,bfloat16,qkv=1x1,{tp},2,1e-4,2e-4,src\n")
        load_gemm_curves.cache_clear()
        with pytest.raises(InvalidInput, match=rf"^bad.csv:3 tp='{tp}': must be a whole number of at least"):
            load_gemm_curves(bad)
    other = tmp_path / "other.csv"
    other.write_text("gpu,tokens\nH100-SXM5-80GB,1\n")
    with pytest.raises(InvalidInput, match="has other columns"):
        load_gemm_curves(other)
    repeated = tmp_path / "repeated.csv"
    repeated.write_text(f"{head}\n{good}\n{good}\n")
    with pytest.raises(InvalidInput, match="repeats a tokens count"):
        load_gemm_curves(repeated)
    fine = tmp_path / "fine.csv"
    fine.write_text(f"{head}\n{good}\n")
    assert load_gemm_curves(fine)[("H100-SXM5-80GB", "bfloat16", "qkv=1x1", 1)].layer == ((1.0, 1e-4),)


def test_a_whole_h100_prices_its_linear_layers_from_the_curves() -> None:
    """The step at 1 and at 4096 tokens costs the measured layers × the model's layers plus the head,
    beside the rest of the step (which the class roofline still prices)."""
    arch = _arch()
    step = _step("H100-SXM5-80GB", arch)
    c = measured_gemm_curves("H100-SXM5-80GB", arch, 1)
    assert c is not None
    assert "linear layers measured (AIConfigurator 0.12.0 h100_sxm" in step.source
    roof = replace(step, gemm_curve=(), head_curve=())
    for tokens in (1, 4096):
        linear = arch.num_layers * interp_loglog(c.layer, tokens) + interp_loglog(c.head, 1)
        rest = roof.step_s(tokens, 1, 1) - max(
            roof.weights_s, tokens * roof.gemm_s_per_token + roof.head_s_per_sample
        )
        assert step.step_s(tokens, 1, 1) == pytest.approx(linear + rest, rel=1e-9)
    fp8 = _step("H100-SXM5-80GB", arch, FP8)
    assert "fp8; LM head bfloat16" in fp8.source
    assert fp8.step_s(4096, 1, 1) < step.step_s(4096, 1, 1)


@pytest.mark.parametrize(
    ("gpu", "model", "hw"),
    [
        ("H100-SXM5-80GB", "llama-3.1-8b", {"bandwidth_share": 1 / 7, "compute_share": 1 / 7}),  # a MIG slice
        ("H100-SXM5-80GB", "llama-3.1-8b", {"shared": True}),  # a time-sliced share
        ("L40S-48GB", "llama-3.1-8b", {}),  # a GPU the file does not cover
        ("H100-SXM5-80GB", "tiny", {}),  # shapes the file lacks
    ],
)
def test_elsewhere_the_class_roofline_stays(gpu: str, model: str, hw: dict[str, object]) -> None:
    step = _step(gpu, _arch(model), **hw)
    assert step.gemm_curve == () and "measured" not in step.source


def test_a_table_the_user_measured_comes_first() -> None:
    """``gpuplace profile --operators`` (here the real H200's table, priced on an H100 shape as the caller
    would after checking the GPU) replaces the bundled curves."""
    table = read_operator_table(REPO / "docs/benchmarks/gpu/2026-12-04/operators.json")
    arch = _arch()
    shape = ReplicaHardware(spec=load_gpu_catalog().get("H100-SXM5-80GB"))
    eff, _ = choose_efficiencies(arch, shape, load_efficiency_table())
    bundled = roofline_step_model(arch, shape, eff)
    mine, _ = operator_step_model(arch, shape, eff, table)
    assert mine.gemm_curve and mine.gemm_curve != bundled.gemm_curve
    assert "AIConfigurator" not in mine.source
    assert shapes_key(arch).startswith("qkv=6144x4096 ")


def test_a_prediction_says_where_its_linear_layers_came_from() -> None:
    from gpuplace.planner.predict import replica_model, shape_spec
    from gpuplace.planner.replica import TrafficShape
    from gpuplace.workload import LengthDist

    arch, catalog = _arch(), load_gpu_catalog()
    traffic = TrafficShape(LengthDist("fixed", 512), LengthDist("fixed", 128), requests=50)
    _, notes = replica_model(
        arch, shape_spec(arch, catalog.get("H100-SXM5-80GB")), traffic, load_efficiency_table()
    )
    assert any(n.startswith("H100-SXM5-80GB: linear layers from measured kernels") for n in notes), notes
    assert any(n.startswith("H100-SXM5-80GB: decode attention from measured kernels") for n in notes), notes
    _, notes = replica_model(
        arch, shape_spec(arch, catalog.get("L40S-48GB")), traffic, load_efficiency_table()
    )
    assert not any("measured kernels" in n for n in notes), notes


def test_the_h200_curves_agree_with_the_kernels_measured_on_the_projects_own_h200() -> None:
    """The referee is a real GPU: ``gpuplace profile --operators`` on an H200 (2026-12-04) timed
    llama-3.1-8b's fused linear layers at 1 to 4,096 tokens. AIConfigurator's table, read for the same
    shapes, is within 10% of it at every count (body: QKV + O + gate-up + down; the LM head within 20%)."""
    table = read_operator_table(REPO / "docs/benchmarks/gpu/2026-12-04/operators.json")
    curves = measured_gemm_curves("H200-SXM-141GB", table.model, 1)
    assert curves is not None and table.model.name == "llama-3.1-8b"
    rows = {(r.layer, r.tokens): r.seconds for r in table.of("gemm", "bfloat16")}
    counts = sorted({t for layer, t in rows if layer == "qkv" and ("lm_head", t) in rows})
    assert counts[0] == 1 and counts[-1] >= 4096
    for t in counts:
        mine = sum(rows[layer, t] for layer in ("qkv", "o", "gate_up", "down"))
        assert interp_loglog(curves.layer, t) == pytest.approx(mine, rel=0.10), t
        assert interp_loglog(curves.head, t) == pytest.approx(rows["lm_head", t], rel=0.20), t


def test_a_profile_of_the_same_gpu_keeps_the_roofline_it_calibrated() -> None:
    """A latency profile measured on this very GPU calibrates MBU and MFU: the user's own measurement then
    prices the linear layers, not the bundled curves; a profile of another GPU changes nothing here."""
    from tests.unit.test_steptime import _profile

    arch = _arch()
    shape = ReplicaHardware(spec=load_gpu_catalog().get("H100-SXM5-80GB"))
    for gpu, measured in (("H100-SXM5-80GB", False), ("A100-SXM4-80GB", True)):
        eff, _ = choose_efficiencies(arch, shape, load_efficiency_table(), _profile("cuda", gpu, 0.6, 0.5))
        step = roofline_step_model(arch, shape, eff)
        assert bool(step.gemm_curve) is measured, gpu
