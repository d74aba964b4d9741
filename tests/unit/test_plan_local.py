"""The local plan (``gpuplace plan --inventory local``) refuses rates above its share of the local
engine's measured capacity: transformers serve admits without a cap, and on this machine it collapsed
from about half of that capacity up while the simulation predicted nothing of it
(docs/benchmarks/fidelity.md).

The step profile is synthetic (a known line, as a calibration of ``tiny`` on this CPU fits it); the
planner is the real one."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from gpuplace.catalog import model_arch_from_config, resolve_model
from gpuplace.errors import InvalidInput
from gpuplace.planner.engine import transformers_engine_params
from gpuplace.planner.local import LocalTarget, measured_capacity_rps, plan_local
from gpuplace.planner.request import PlanRequest
from gpuplace.types.engine import EngineStepProfile, EngineStepSample
from gpuplace.types.plan import NoFeasiblePlacement, Slo
from gpuplace.types.workload import Traffic

FIXED, PER_SEQ, PER_TOKEN = 0.002, 0.0003, 0.00002


def _profile(largest_batch: int = 16) -> EngineStepProfile:
    decodes = [n for n in (1, 2, 4, 8, 16, 32, 64) if n <= largest_batch]
    samples = [EngineStepSample(n, 0, 0, n * 40, 0, FIXED + (PER_SEQ + PER_TOKEN) * n) for n in decodes] + [
        EngineStepSample(0, c, 1, 0, 0, FIXED + PER_SEQ + PER_TOKEN * c, True) for c in (16, 128, 512)
    ]
    return EngineStepProfile(
        engine="transformers serve --continuous-batching",
        device_kind="cpu",
        device_name="x86_64",
        model="tiny",
        fixed_s=FIXED,
        per_token_s=PER_TOKEN,
        per_seq_s=PER_SEQ,
        per_context_token_s=0.0,
        request_overhead_s=0.003,
        samples=tuple(samples),
        rms_relative_error=0.0,
    )


def _target(profile: EngineStepProfile) -> tuple[object, LocalTarget]:
    arch = model_arch_from_config("tiny", resolve_model("tiny").config)
    engine = transformers_engine_params(arch, memory_gib=0.0, num_blocks=512)
    return arch, LocalTarget(node="this-machine", unit="cpu", steps=profile, engine=engine)


def _request(rate: float, share: float | None = None) -> PlanRequest:
    return PlanRequest(
        model="tiny",
        slo=Slo(ttft_p99_s=10.0, tpot_p99_s=1.0, rate_rps=rate),
        traffic=Traffic.parse(128, 32),
        simulated_requests=300,
        max_load_share=share,
    )


def _capacity(target: LocalTarget) -> float:
    return measured_capacity_rps(target.engine, target.steps, 128, 32)


def test_the_capacity_is_bounded_by_the_largest_measured_batch() -> None:
    """Beyond the largest measured batch the fitted line is not extrapolated: a calibration up to 16
    decodes gives a lower capacity than one up to 64 on the same line."""
    _, small = _target(_profile(16))
    _, large = _target(_profile(64))
    assert 0 < _capacity(small) < _capacity(large)


def test_a_rate_below_the_share_is_planned_and_the_plan_says_its_share() -> None:
    arch, target = _target(_profile())
    rate = 0.3 * _capacity(target)
    plan = plan_local(arch, target, _request(rate))  # type: ignore[arg-type]
    assert plan.chosen.verdict == "chosen"
    assert any("30% of the engine's measured capacity" in n for n in plan.notes)


def test_a_rate_above_the_share_is_refused_naming_the_share_and_the_highest_rate() -> None:
    """At 70% of the capacity the simulation still meets this loose SLO, so only the share refuses it."""
    arch, target = _target(_profile())
    capacity = _capacity(target)
    with pytest.raises(NoFeasiblePlacement) as err:
        plan_local(arch, target, _request(0.7 * capacity))  # type: ignore[arg-type]
    text = str(err.value)
    assert "70% of the local engine's measured capacity" in text
    assert "max_load_share=0.5" in text
    assert f"lower the rate to at most {0.5 * capacity:.2f} req/s" in text
    # the same rate, with the share raised on purpose, is planned
    plan = plan_local(arch, target, _request(0.7 * capacity, share=0.8))  # type: ignore[arg-type]
    assert plan.chosen.verdict == "chosen"


def test_a_cuda_engine_is_planned_up_to_its_capacity_by_default() -> None:
    """The CPU rule (half the capacity: the CPU engine collapsed above it) is not applied to an engine
    measured on a GPU, where no collapse was measured: the H200's closed loop at 69% of capacity was
    refused by it. The same steps measured on a CPU are refused at that share; asked for, a share holds
    on a GPU too."""
    arch, target = _target(_profile())
    rate = 0.7 * _capacity(target)
    with pytest.raises(NoFeasiblePlacement, match=r"max_load_share=0\.5"):
        plan_local(arch, target, _request(rate))  # type: ignore[arg-type]
    gpu = replace(target, unit="H200-SXM-141GB", steps=replace(target.steps, device_kind="cuda"))
    plan = plan_local(arch, gpu, _request(rate))  # type: ignore[arg-type]
    assert plan.chosen.verdict == "chosen"
    assert any("the default on a GPU, where no collapse was measured" in n for n in plan.notes)
    with pytest.raises(NoFeasiblePlacement, match=r"max_load_share=0\.5"):
        plan_local(arch, gpu, _request(rate, share=0.5))  # type: ignore[arg-type]


@pytest.mark.parametrize("share", [0.0, -0.1, 1.5])
def test_a_share_outside_0_1_is_refused_naming_the_field(share: float) -> None:
    with pytest.raises(InvalidInput, match="max_load_share"):
        _request(1.0, share=share)


def test_the_edges_spelling_refuses_a_share_of_0_and_defaults_only_when_absent() -> None:
    """``--max-load-share 0`` is bad input, not "unset"; absent, the engine's device decides."""
    from gpuplace.catalog import load_gpu_catalog
    from gpuplace.steps.plan_params import plan_request

    params = {"model": "tiny", "slo_ttft_ms": 2000, "slo_tpot_ms": 50, "rate": 1.0}
    catalog = load_gpu_catalog()
    assert plan_request(params, catalog).max_load_share is None
    assert plan_request({**params, "max_load_share": None}, catalog).max_load_share is None
    assert plan_request({**params, "max_load_share": 0.8}, catalog).max_load_share == 0.8
    with pytest.raises(InvalidInput, match="max_load_share"):
        plan_request({**params, "max_load_share": 0}, catalog)


def test_fp8_is_refused_for_the_local_target_naming_it() -> None:
    from dataclasses import replace

    from gpuplace.types.precision import Precision

    arch, target = _target(_profile())
    request = replace(_request(0.3 * _capacity(target)), precision=Precision("bf16", "fp8"))
    with pytest.raises(InvalidInput) as info:
        plan_local(arch, target, request)  # type: ignore[arg-type]
    assert info.value.field == "kv_cache_dtype" and "transformers serve on cpu" in str(info.value)


def test_one_answer_to_is_this_a_local_plan(tmp_path: Path) -> None:
    """This machine's inventory, a plan of it, and that plan read back from its directory all say local
    (the plan directory then loads no manifests); a fleet and a fleet's plan do not."""
    from gpuplace.inventory import load_inventory
    from gpuplace.manifests.local import local_kfp_fragments, local_serving_spec
    from gpuplace.plandir import read_plan_dir, write_plan_dir
    from gpuplace.types.fleet import LOCAL_INVENTORY, is_local_inventory

    assert is_local_inventory(LOCAL_INVENTORY) and not is_local_inventory("h100-nvlink")
    assert load_inventory(LOCAL_INVENTORY).is_local and not load_inventory("h100-nvlink").is_local
    arch, target = _target(_profile())
    plan = plan_local(arch, target, _request(0.3 * _capacity(target)))  # type: ignore[arg-type]
    assert plan.is_local and not replace(plan, inventory_source="h100-nvlink").is_local
    plan = replace(plan, serving=local_serving_spec(plan))
    write_plan_dir(
        tmp_path, plan, manifests={}, alternatives={}, kfp=local_kfp_fragments(plan), candidates_md=""
    )
    back = read_plan_dir(tmp_path)
    assert back.plan.is_local and back.manifests == ()
