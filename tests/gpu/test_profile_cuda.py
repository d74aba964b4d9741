"""GPU tests: run only where CUDA exists (`pytest -m gpu`, called by tests/gpu/run.sh).

CI has no GPU and deselects them (`-m "not gpu"` in make test); on a machine without CUDA they
fail loudly rather than skip, so a GPU run that lost its GPU cannot pass silently.
"""

from __future__ import annotations

import pytest

from gpuplace.profiling import ProfileConfig, run_profile

pytestmark = pytest.mark.gpu


def test_cuda_profile_eager_and_cuda_graphs() -> None:
    config = ProfileConfig(
        model="tiny",
        device="cuda",
        batch_sizes=(1, 4),
        prompt_tokens=(64,),
        output_tokens=(16,),
        dtypes=("auto",),
        modes=("both",),
        repeats=3,
        warmup=3,
    ).validated()
    profile = run_profile(config, show_progress=False)
    assert profile.device.kind == "cuda"
    assert all(r.ok for r in profile.results), [r.error for r in profile.results]
    assert {r.point.dtype for r in profile.results} == {"bfloat16"}
    for r in profile.results:
        assert r.peak_memory_gib > 0  # torch allocator peak on CUDA
        assert r.decode_step.count == 3 * 15


def test_device_topology_and_catalog_bandwidth() -> None:
    config = ProfileConfig(
        model="tiny",
        device="cuda",
        batch_sizes=(1,),
        prompt_tokens=(16,),
        output_tokens=(4,),
        repeats=1,
        warmup=1,
    )
    profile = run_profile(config, show_progress=False)
    d = profile.device
    assert d.compute_capability and d.memory_gib > 1
    assert d.topology_source in ("nvml", "nvidia-smi", "torch")
    if d.catalog_gpu:
        assert profile.bandwidth_source.startswith("catalog:")
        assert 0 < profile.results[0].mbu < 1
    if d.topology_source == "nvml":
        assert d.pcie_gen_max and d.pcie_width_max and d.driver_version
