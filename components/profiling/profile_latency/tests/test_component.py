"""profile_latency: the function's wiring called directly, and the real component under kfp.local."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from gpuplace.components.profiling.profile_latency import profile_latency
from gpuplace.profiling import load_profile
from tests.support.kfp_artifacts import FakeArtifact as _Out


def test_python_func_writes_all_outputs(tmp_path: Path) -> None:
    outs = {
        n: _Out(tmp_path / n)
        for n in ("profile", "device_info", "metrics", "summary", "engine_steps", "operators")
    }
    profile_latency.python_func(
        **outs,
        model="tiny",
        device="cpu",
        batch_sizes="1,2",
        prompt_tokens="16",
        output_tokens="4",
        repeats=2,
    )
    prof = load_profile(outs["profile"].path)
    assert [r.point.batch_size for r in prof.results] == [1, 2]
    assert json.loads(Path(outs["device_info"].path).read_text())["kind"] == "cpu"
    assert outs["metrics"].logged["points"] == 2.0
    assert outs["metrics"].logged["b1_p16_o4_float32_eager_tpot_p50_ms"] > 0
    assert "| batch |" in Path(outs["summary"].path).read_text()
    assert outs["profile"].metadata["model"] == "tiny"
    # not asked to measure the local engine: its output is empty, which the plan step reads as "not
    # measured" (and says how to measure it)
    assert Path(outs["engine_steps"].path).read_text() == ""
    assert Path(outs["operators"].path).read_text() == ""  # not measured: the plan reads it as none


def test_python_func_rejects_bad_input_before_writing(tmp_path: Path) -> None:
    outs = {
        n: _Out(tmp_path / n)
        for n in ("profile", "device_info", "metrics", "summary", "engine_steps", "operators")
    }
    with pytest.raises(ValueError, match=r"batch_sizes='1,x'"):
        profile_latency.python_func(**outs, model="tiny", device="cpu", batch_sizes="1,x")
    assert not any(Path(o.path).exists() for o in outs.values())


def test_component_spec_compiles_with_its_interface() -> None:
    spec = profile_latency.component_spec
    assert set(spec.outputs or {}) == {
        "profile",
        "device_info",
        "metrics",
        "summary",
        "engine_steps",
        "operators",
    }
    assert spec.inputs["measure_engine_steps"].default is False
    assert spec.inputs["model"].default == "tiny"
    assert spec.implementation.container.image.startswith("ghcr.io/gpuplace/gpuplace-cuda:")


@pytest.mark.integration
def test_runs_under_the_local_runner(kfp_local: Path) -> None:
    task = profile_latency(
        model="tiny", device="cpu", batch_sizes="1", prompt_tokens="16", output_tokens="4", repeats=2
    )
    frame = pd.read_parquet(task.outputs["profile"].path)
    assert list(frame["ok"]) == [True]
    assert frame.loc[0, "decode_step_s_count"] == 2 * 3  # repeats × (output_tokens - 1) decode steps
    assert task.outputs["metrics"].metadata["points"] == 1.0
    assert Path(task.outputs["summary"].path).read_text().startswith("# Latency profile: tiny")
