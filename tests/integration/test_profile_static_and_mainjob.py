"""Slower real runs: static KV cache + torch.compile on the CPU, and the main job through kfp.local."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuplace.cli import main
from gpuplace.profiling import ProfileConfig, load_profile, run_profile

pytestmark = pytest.mark.integration


def test_static_mode_compiles_and_reports_both_modes() -> None:
    """torch.compile (inductor, no CUDA graphs on a CPU) of the decode step with a static cache."""
    config = ProfileConfig(
        model="tiny",
        device="cpu",
        batch_sizes=(2,),
        prompt_tokens=(16,),
        output_tokens=(6,),
        modes=("both",),
        repeats=2,
        warmup=3,
    ).validated()
    profile = run_profile(config, show_progress=False)
    eager, static = profile.results
    assert (eager.point.mode, static.point.mode) == ("eager", "static")
    assert eager.ok and static.ok, (eager.error, static.error)
    assert static.decode_step.count == 2 * 5
    # the compiled step must not be timing compilation: warm-up absorbed it, so its slowest step
    # is nowhere near a compile (seconds)
    assert static.decode_step.max < 0.5


def test_static_cache_decode_matches_eager_tokens() -> None:
    """The static path computes the same greedy tokens as the eager one (it measures the same work)."""
    import torch

    from gpuplace.catalog.models import resolve_model
    from gpuplace.profiling.model import build_model
    from gpuplace.profiling.profiler import _Runner
    from gpuplace.profiling.timing import CpuClock

    torch.manual_seed(0)
    model = build_model(resolve_model("tiny"), torch.float32, torch.device("cpu"))
    ids = torch.randint(512, 1024, (2, 12))
    tokens = {}
    for mode in ("eager", "static"):
        runner = _Runner(model, torch.device("cpu"), mode, CpuClock())
        runner._decode = runner._eager_decode  # compare the cache semantics, not the compiler
        cache = runner._cache(2, 20)
        with torch.inference_mode():
            tok = runner._prefill(ids, cache)
            seq = [tok]
            for _ in range(5):
                tok = runner._decode(tok, cache)
                seq.append(tok)
        tokens[mode] = torch.cat(seq, dim=1)
    assert torch.equal(tokens["eager"], tokens["static"])


def test_main_job_runs_profile_through_local_runner(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--workdir", str(tmp_path / "runs"), "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "TPOT p50 ms" in out and "run directory" in out
    profiles = [p for p in (tmp_path / "runs").rglob("profile") if p.is_file()]
    assert len(profiles) == 1
    assert [r.point.batch_size for r in load_profile(profiles[0]).results] == [1, 4]
