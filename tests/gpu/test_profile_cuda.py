"""GPU tests: `pytest -m gpu tests/gpu`, called by tests/gpu/run.sh on the device it checks.

They run on ``GPUPLACE_TEST_DEVICE`` (default ``cuda``). CI has no GPU and deselects them (``-m "not gpu"``
in make test); on a machine without CUDA they fail loudly rather than skip, so a GPU run that lost its GPU
cannot pass silently. ``run.sh`` with ``DEVICE=cpu`` runs them on the CPU (tests/integration/
test_gpu_check_bare.py does, in a venv with only the GPU machine's packages): the same steps, without
what only a GPU has (CUDA graphs, NVML topology, FP8), which the assertions below say by device.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpuplace.profiling import ProfileConfig, run_profile

pytestmark = pytest.mark.gpu
DEVICE = os.environ.get("GPUPLACE_TEST_DEVICE", "cuda")


def test_profile_eager_and_static(tmp_path: Path) -> None:
    """Eager and static modes on the device; on CUDA, static replays CUDA graphs whose output token feeds
    the next step (the H200 crash of 2026-12-04), and the breakdown traces its kernels."""
    config = ProfileConfig(
        model="tiny",
        device=DEVICE,
        batch_sizes=(1, 4),
        prompt_tokens=(64,),
        output_tokens=(16,),
        dtypes=("auto",),
        modes=("both",),
        repeats=3,
        warmup=3,
        breakdown_out=str(tmp_path / "breakdown.json"),
    ).validated()
    profile = run_profile(config, show_progress=False)
    assert profile.device.kind == DEVICE.split(":")[0]
    assert all(r.ok for r in profile.results), [r.error for r in profile.results]
    assert {r.point.dtype for r in profile.results} == {"bfloat16" if DEVICE != "cpu" else "float32"}
    for r in profile.results:
        assert r.peak_memory_gib > 0
        assert r.decode_step.count == 3 * 15
    # the breakdown of each static point: the CUDA graph's kernels on a GPU, torch's operators on a CPU
    rows = json.loads((tmp_path / "breakdown.json").read_text())
    assert [r["batch_size"] for r in rows] == [1, 4], profile.device.notes
    assert all(r["gemm_s"] > 0 and r["kernels_per_step"] > 10 for r in rows), rows


def test_device_topology_and_catalog_bandwidth() -> None:
    config = ProfileConfig(
        model="tiny",
        device=DEVICE,
        batch_sizes=(1,),
        prompt_tokens=(16,),
        output_tokens=(4,),
        repeats=1,
        warmup=1,
    )
    profile = run_profile(config, show_progress=False)
    d = profile.device
    if DEVICE == "cpu":
        assert d.kind == "cpu" and profile.bandwidth_source.startswith("measured")
        return
    assert d.compute_capability and d.memory_gib > 1
    assert d.topology_source in ("nvml", "nvidia-smi", "torch")
    if d.catalog_gpu:
        assert profile.bandwidth_source.startswith("catalog:")
        assert 0 < profile.results[0].mbu < 1
    if d.topology_source == "nvml":
        assert d.pcie_gen_max and d.pcie_width_max and d.driver_version


def test_operator_table_on_the_device(tmp_path: Path) -> None:
    """The operator table times every layer at every token count, attention and (on FP8 GPUs) fp8 GEMMs,
    and reads back as written."""
    from gpuplace.profiling.device import resolve_device
    from gpuplace.profiling.operator_table import read_operator_table, write_operator_table
    from gpuplace.profiling.operators import OperatorConfig, fp8_supported, run_operators

    config = OperatorConfig(
        model="tiny",
        device=DEVICE,
        gemm_tokens=(1, 16, 256),
        prefill_tokens=(64, 256),
        decode_batches=(1, 8),
        decode_contexts=(64, 256),
        repeats=3,
        warmup=1,
    )
    table = run_operators(config, show_progress=False)
    dtypes = {r.dtype for r in table.of("gemm")}
    assert len(table.of("gemm")) == len(dtypes) * 3 * 5
    assert ("fp8" in dtypes) == fp8_supported(resolve_device(DEVICE))
    assert len(table.of("attention_prefill")) == 2 and len(table.of("attention_decode")) == 4
    assert all(r.seconds > 0 for r in table.rows)
    path = write_operator_table(table, tmp_path / "operators.json")
    assert read_operator_table(path).to_json_dict() == table.to_json_dict()
