"""The profiler on the real CPU with real torch modules (the `tiny` preset builds in about a second)."""

from __future__ import annotations

import math

import pytest
import torch

from gpuplace.errors import InvalidInput
from gpuplace.profiling import ProfileConfig, run_profile
from gpuplace.profiling.device import resolve_device
from gpuplace.profiling.profiler import _Runner, estimate_point_gib, measure_point
from gpuplace.profiling.timing import CpuClock
from gpuplace.types import DeviceInfo, SweepPoint


def _config(**kw: object) -> ProfileConfig:
    base: dict[str, object] = dict(
        model="tiny",
        device="cpu",
        batch_sizes=(1, 2),
        prompt_tokens=(16,),
        output_tokens=(5,),
        repeats=3,
        warmup=1,
    )
    base.update(kw)
    return ProfileConfig(**base)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def tiny_profile():  # type: ignore[no-untyped-def]
    return run_profile(_config(), show_progress=False)


def test_one_result_per_point_in_sweep_order(tiny_profile) -> None:  # type: ignore[no-untyped-def]
    assert [(r.point.batch_size, r.point.dtype, r.point.mode) for r in tiny_profile.results] == [
        (1, "float32", "eager"),
        (2, "float32", "eager"),
    ]
    assert all(r.ok for r in tiny_profile.results)


def test_output_length_is_forced(tiny_profile) -> None:  # type: ignore[no-untyped-def]
    # random weights would stop at EOS early; the harness always runs output_tokens - 1 decode steps
    for r in tiny_profile.results:
        assert r.decode_step.count == 3 * (5 - 1)
        assert r.prefill.count == 3
        assert r.tpot.count == 3


def test_distributions_are_consistent(tiny_profile) -> None:  # type: ignore[no-untyped-def]
    for r in tiny_profile.results:
        assert 0 < r.decode_step.min <= r.decode_step.median <= r.decode_step.p99 <= r.decode_step.max
        # e2e = prefill + all decode steps of one generation, so its mean is the sum of the means
        expected = r.prefill.mean + 4 * r.decode_step.mean
        assert r.e2e.mean == pytest.approx(expected, rel=1e-9)
        assert r.decode_tokens_per_s == pytest.approx(r.point.batch_size / r.decode_step.mean)


def test_roofline_columns_on_cpu_use_measured_bandwidth(tiny_profile) -> None:  # type: ignore[no-untyped-def]
    # a probe another process disturbed keeps its best round and says so ("measured (disturbed: best round)")
    assert tiny_profile.bandwidth_source.startswith("measured")
    assert tiny_profile.memory_bandwidth_gbps > 0.5
    for r in tiny_profile.results:
        assert 0 < r.mbu < 1.5
        assert r.decode_floor_s == pytest.approx(
            r.decode_bytes_per_step / (tiny_profile.memory_bandwidth_gbps * 1e9)
        )
        assert r.prefill_flops > 0 and r.mfu > 0


def test_model_arch_counts_the_real_parameters(tiny_profile) -> None:  # type: ignore[no-untyped-def]
    from gpuplace.catalog.models import count_params, resolve_model

    assert tiny_profile.model.num_params == count_params(resolve_model("tiny").config)
    assert tiny_profile.device.kind == "cpu" and tiny_profile.device.cpu_logical_cores


def test_point_that_does_not_fit_is_recorded_and_sweep_continues() -> None:
    # batch 4096 × 2048 tokens of KV cache is far beyond a 0.01 GiB limit; batch 1 fits
    profile = run_profile(
        _config(
            batch_sizes=(4096, 1), prompt_tokens=(1024,), output_tokens=(2,), memory_limit_gib=0.01, repeats=1
        ),
        show_progress=False,
    )
    big, small = profile.results
    assert not big.ok and "would not fit" in big.error and "GiB" in big.error
    assert math.isnan(big.decode_step.median)
    assert small.ok and small.decode_step.count == 1


class _OomModel(torch.nn.Module):
    """Raises CUDA's out-of-memory error from forward().

    A real CUDA OOM cannot happen on this CPU-only machine, so this stands in for the GPU; the
    handling under test (record the point as failed, keep sweeping) is the real code path.
    """

    config = None

    def forward(
        self, input_ids: torch.Tensor, use_cache: bool = True, cache: object = None, **kw: object
    ) -> None:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")


def test_out_of_memory_is_recorded_as_failed_point() -> None:
    from gpuplace.catalog.models import model_arch_from_config, resolve_model

    arch = model_arch_from_config("tiny", resolve_model("tiny").config)
    runner = _Runner(_OomModel(), torch.device("cpu"), "eager", CpuClock())
    runner._cache = lambda batch, max_len: None  # type: ignore[method-assign]
    result = measure_point(
        runner,
        arch,
        SweepPoint(1, 8, 2, "float32", "eager"),
        repeats=1,
        warmup=0,
        seed=0,
        memory_limit_gib=None,
        bandwidth_gbps=10.0,
        peak_tflops=1.0,
        info=DeviceInfo(kind="cpu", name="cpu"),
    )
    assert not result.ok
    assert result.error.startswith("out of memory: CUDA out of memory")


def test_other_runtime_errors_are_not_swallowed() -> None:
    class Broken(_OomModel):
        def forward(self, *a: object, **kw: object) -> None:
            raise RuntimeError("shape mismatch")

    from gpuplace.catalog.models import model_arch_from_config, resolve_model

    arch = model_arch_from_config("tiny", resolve_model("tiny").config)
    runner = _Runner(Broken(), torch.device("cpu"), "eager", CpuClock())
    runner._cache = lambda batch, max_len: None  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="shape mismatch"):
        measure_point(
            runner,
            arch,
            SweepPoint(1, 8, 2, "float32", "eager"),
            repeats=1,
            warmup=0,
            seed=0,
            memory_limit_gib=None,
            bandwidth_gbps=1.0,
            peak_tflops=1.0,
            info=DeviceInfo(kind="cpu", name="cpu"),
        )


def test_estimate_grows_with_batch_and_length() -> None:
    from gpuplace.catalog.models import model_arch_from_config, resolve_model

    arch = model_arch_from_config("llama-3.1-8b", resolve_model("llama-3.1-8b").config)
    one = estimate_point_gib(arch, SweepPoint(1, 1024, 128, "bfloat16", "eager"))
    eight = estimate_point_gib(arch, SweepPoint(8, 1024, 128, "bfloat16", "eager"))
    # KV cache of llama-3.1-8b in bf16: 128 KiB per token; 1152 tokens ≈ 0.14 GiB
    assert 0.14 < one < 0.5
    assert eight == pytest.approx(8 * one, rel=0.01)


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"repeats": 0}, "repeats"),
        ({"warmup": -1}, "warmup"),
        ({"modes": ("fast",)}, "modes"),
        ({"modes": ("static",), "warmup": 1}, "warmup"),
        ({"batch_sizes": ()}, "batch_sizes"),
        ({"batch_sizes": (0,)}, "batch_sizes"),
        ({"output_tokens": (-3,)}, "output_tokens"),
        ({"memory_limit_gib": 0.0}, "memory_limit_gib"),
    ],
)
def test_config_validation_names_the_field(kw: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput) as e:
        _config(**kw).validated()
    assert e.value.field == field


def test_the_profile_step_parses_lists_and_picks_warmup() -> None:
    from gpuplace.steps.profile import profile_config

    c = profile_config({"model": "tiny", "batch_sizes": "1, 8", "mode": "both"})
    assert c.batch_sizes == (1, 8) and c.modes == ("eager", "static") and c.warmup == 3
    assert profile_config({"mode": "eager"}).warmup == 2 and profile_config({"warmup": 0}).warmup == 0
    assert profile_config({"memory_limit_gib": 0.0}).memory_limit_gib is None
    assert profile_config({"real_weights": True}).random_weights is False
    with pytest.raises(InvalidInput, match=r"prompt_tokens='128;256'"):
        profile_config({"model": "tiny", "prompt_tokens": "128;256"})
    with pytest.raises(InvalidInput, match=r"warmup=-2"):
        profile_config({"warmup": -2})


def test_sequence_longer_than_the_model_allows_is_rejected() -> None:
    with pytest.raises(InvalidInput, match="max_position_embeddings=2048"):
        run_profile(_config(prompt_tokens=(2000,), output_tokens=(100,)), show_progress=False)


def test_unknown_dtype_and_missing_gpu_are_clear() -> None:
    with pytest.raises(InvalidInput, match=r"dtype='fp8'"):
        run_profile(_config(dtypes=("fp8",)), show_progress=False)
    if not torch.cuda.is_available():
        with pytest.raises(InvalidInput, match=r"device='cuda:0'.*sees no GPU"):
            run_profile(_config(device="cuda:0"), show_progress=False)


def test_torch_profiler_on_is_refused() -> None:
    with torch.profiler.profile(), pytest.raises(RuntimeError, match="torch profiler is on"):
        run_profile(_config(), show_progress=False)


def test_auto_device_resolves_to_what_torch_sees() -> None:
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
