"""The engine's own costs of GPU engines: the CPU-side work every vLLM step pays whatever the model
(scheduler, input preparation, sampling, detokenising), from ``efficiency.csv``'s ``step_floor_s``.

Pure arithmetic; the floor's fit on published rows is tests/benchmarks/fit_step_floor.py, whose recorded
result (docs/benchmarks/step_floor.json) the shipped value must equal.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from gpuplace.catalog import load_gpu_catalog, model_arch_from_config, resolve_model
from gpuplace.catalog.efficiency import load_efficiency_table
from gpuplace.planner.hardware import ReplicaHardware
from gpuplace.planner.steptime import roofline_step_model
from gpuplace.types import ModelArch

CATALOG = load_gpu_catalog()
TABLE = load_efficiency_table()
REPO = Path(__file__).resolve().parents[2]


def _arch(name: str) -> ModelArch:
    return model_arch_from_config(name, resolve_model(name).config)


def test_the_floor_is_a_default_for_every_gpu_and_enters_the_step_overhead() -> None:
    floor = TABLE.rows["default"]["step_floor_s"].value
    tiny = _arch("tiny")
    for name in ("L4-24GB", "H100-SXM5-80GB", "B200-SXM-180GB", "T4-16GB"):
        eff = TABLE.for_gpu(CATALOG.get(name), tiny)
        per_layer = TABLE.lookup(CATALOG.get(name), "step_overhead_s_per_layer")[0].value
        assert eff.step_overhead_s == pytest.approx(per_layer * tiny.num_layers + floor), name
        assert "step floor" in eff.sources["step_overhead_s"]


def test_tiny_on_half_an_l4_steps_like_a_gpu_engine() -> None:
    """Without the floor, tiny's predicted decode step on a GPU was tens of microseconds (the old fleet
    line's 0.04 ms TPOT); with it, a step takes what vLLM's CPU side takes."""
    tiny, l4 = _arch("tiny"), CATALOG.get("L4-24GB")
    floor = TABLE.rows["default"]["step_floor_s"].value
    shape = ReplicaHardware(l4, 1, 0.5, 0.5, l4.memory_gib, shared=True)
    eff = TABLE.for_gpu(l4, tiny)
    with_floor = roofline_step_model(tiny, shape, eff).decode_terms(1)[0]
    without = roofline_step_model(
        tiny, shape, replace(eff, step_overhead_s=eff.step_overhead_s - floor, seq_overhead_s=0.0)
    )
    assert without.decode_terms(1)[0] < 1e-4
    assert with_floor >= floor
    # an 8B model's step is the floor plus its weights: the floor adds, it does not replace
    arch = _arch("llama-3.1-8b")
    h100 = ReplicaHardware(CATALOG.get("H100-SXM5-80GB"))
    e8 = TABLE.for_gpu(h100.spec, arch)
    step = roofline_step_model(arch, h100, e8).decode_terms(1)[0]
    bare = roofline_step_model(arch, h100, replace(e8, step_overhead_s=e8.step_overhead_s - floor))
    assert step == pytest.approx(bare.decode_terms(1)[0] + floor)


def test_the_shipped_floor_is_the_recorded_fit() -> None:
    recorded = json.loads((REPO / "docs" / "benchmarks" / "step_floor.json").read_text())
    shipped = TABLE.rows["default"]["step_floor_s"].value
    assert shipped == pytest.approx(recorded["fit_floor_s"], abs=5e-6)
    assert TABLE.rows["default"]["seq_cost_s"].value == pytest.approx(recorded["fit_seq_cost_s"], abs=5e-8)
    fit_lines = [r["line"] for r in recorded["subsets"]["fit: 8B on H100 SXM"]["rows"]]
    assert fit_lines == list(range(229, 249))  # the rows efficiency.csv's sources name
    for quantity in ("step_floor_s", "seq_cost_s"):
        assert "rows 229-248" in TABLE.rows["default"][quantity].source


def test_the_engine_pays_its_cost_per_sequence_in_every_step() -> None:
    """A decode step of N sequences carries N × seq_cost_s of engine work beside the floor: without it the
    predicted step of a large batch on an H100 was 25% short of Argonne's static batches of 64
    (docs/benchmarks/step_floor.md)."""
    arch = _arch("llama-3.1-8b")
    h100 = ReplicaHardware(CATALOG.get("H100-SXM5-80GB"))
    eff = TABLE.for_gpu(h100.spec, arch)
    per_seq = TABLE.rows["default"]["seq_cost_s"].value
    assert eff.seq_overhead_s == per_seq > 0 and "per sequence" in eff.sources["seq_overhead_s"]
    with_cost = roofline_step_model(arch, h100, eff)
    without = roofline_step_model(arch, h100, replace(eff, seq_overhead_s=0.0))
    for n in (1, 16, 64):
        gap = with_cost.decode_terms(n)[0] - without.decode_terms(n)[0]
        assert gap == pytest.approx(n * per_seq), n


@pytest.mark.parametrize(
    "name", ["B200-SXM-180GB", "B300-SXM-288GB", "GB200-NVL72-186GB", "RTX-PRO-6000-BW-96GB"]
)
def test_a_blackwell_gpu_without_its_own_rows_takes_the_documented_architecture_default(name: str) -> None:
    spec = CATALOG.get(name)
    eff = TABLE.for_gpu(spec, _arch("llama-3.1-8b"))
    for quantity in ("mbu", "mfu", "attention_mfu", "link_efficiency", "gemm_latency_s"):
        source = eff.sources[quantity]
        assert source.startswith("efficiency.csv[blackwell]"), (name, quantity)
        assert "no Blackwell" in source  # the row says it is Hopper's, not a Blackwell measurement
    assert eff.mbu == TABLE.rows["hopper"]["mbu"].value
