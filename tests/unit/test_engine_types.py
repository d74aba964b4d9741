"""EngineParams, Efficiencies and EngineStepProfile: validation, vLLM arguments, JSON round trips."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from gpuplace.errors import InvalidInput
from gpuplace.types.engine import Efficiencies, EngineParams, EngineStepProfile, EngineStepSample

PARAMS = EngineParams(
    max_num_batched_tokens=8192,
    max_num_seqs=1024,
    block_size=16,
    gpu_memory_utilization=0.9,
    max_model_len=131072,
    enable_chunked_prefill=True,
    num_gpu_blocks=27906,
    sources={"max_num_seqs": "vLLM get_batch_defaults"},
)


def test_kv_capacity_in_tokens_is_blocks_times_block_size() -> None:
    assert PARAMS.kv_capacity_tokens == 27906 * 16


def test_vllm_args_carry_every_scheduler_setting() -> None:
    args = PARAMS.to_vllm_args()

    pairs = dict(zip(args[0:-1:2], args[1::2], strict=False))
    assert pairs["--max-num-batched-tokens"] == "8192"
    assert pairs["--max-num-seqs"] == "1024"
    assert pairs["--block-size"] == "16"
    assert pairs["--gpu-memory-utilization"] == "0.9"
    assert pairs["--max-model-len"] == "131072"
    assert args[-1] == "--enable-chunked-prefill"
    assert (
        replace(PARAMS, enable_chunked_prefill=False, max_num_batched_tokens=131072).to_vllm_args()[-1]
        == "--no-enable-chunked-prefill"
    )


def test_transformers_serve_args_pin_the_cache_and_budget() -> None:
    args = PARAMS.to_transformers_serve_args()

    assert args[0] == "--continuous-batching"
    assert args[args.index("--cb-num-blocks") + 1] == "27906"
    assert args[args.index("--cb-max-batch-tokens") + 1] == "8192"


def test_engine_params_round_trip_through_json() -> None:
    text = json.dumps(PARAMS.to_json_dict())
    back = EngineParams.from_json_dict(json.loads(text))

    assert back == PARAMS
    assert back.sources["max_num_seqs"] == "vLLM get_batch_defaults"
    assert json.loads(text)["kv_capacity_tokens"] == PARAMS.kv_capacity_tokens


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"max_num_seqs": 0}, "max_num_seqs"),
        ({"block_size": 1.5}, "block_size"),
        ({"gpu_memory_utilization": 1.2}, "gpu_memory_utilization"),
        ({"num_gpu_blocks": -3}, "num_gpu_blocks"),
        ({"max_num_batched_tokens": 512}, "max_num_batched_tokens"),  # below max_num_seqs
        ({"enable_chunked_prefill": False}, "max_num_batched_tokens"),  # below max_model_len
    ],
)
def test_engine_params_refuse_bad_values_naming_the_field(change: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput) as e:
        replace(PARAMS, **change)  # type: ignore[arg-type]
    assert e.value.field == field


def test_from_json_names_missing_fields() -> None:
    data = PARAMS.to_json_dict()
    del data["block_size"]
    with pytest.raises(InvalidInput, match="block_size"):
        EngineParams.from_json_dict(data)


def test_efficiencies_refuse_a_fraction_above_one() -> None:
    with pytest.raises(InvalidInput, match="above 1") as e:
        Efficiencies(mbu=1.43, mfu=0.5, attention_mfu=0.5)
    assert e.value.field == "mbu"
    with pytest.raises(InvalidInput):
        Efficiencies(mbu=0.7, mfu=0.0, attention_mfu=0.5)
    with pytest.raises(InvalidInput):
        Efficiencies(mbu=0.7, mfu=0.5, attention_mfu=0.5, step_overhead_s=-1e-3)


def test_step_profile_predicts_its_linear_model_and_round_trips() -> None:
    profile = EngineStepProfile(
        engine="transformers-serve 5.24.0 --continuous-batching",
        device_kind="cpu",
        device_name="x86_64",
        model="tiny",
        fixed_s=0.004,
        per_token_s=2e-5,
        per_seq_s=2e-4,
        per_context_token_s=1e-7,
        per_pair_s=1e-9,
        request_overhead_s=0.006,
        samples=(EngineStepSample(4, 0, 0, 100, 0, 0.0049), EngineStepSample(0, 64, 1, 0, 2080, 0.011, True)),
        rms_relative_error=0.05,
    )

    assert profile.predict_s(4, 4, 100) == pytest.approx(0.004 + 4 * 2e-5 + 4 * 2e-4 + 100 * 1e-7)
    back = EngineStepProfile.from_json_dict(json.loads(json.dumps(profile.to_json_dict())))
    assert back == profile
    no_error = EngineStepProfile.from_json_dict(profile.to_json_dict() | {"rms_relative_error": None})
    assert math.isnan(no_error.rms_relative_error)


def test_an_engine_can_be_run_as_an_older_release_ran_it_each_change_checked() -> None:
    """A published run of vLLM 0.6 ran at most 256 sequences, with multi-step scheduling; the changes
    are checked as the fields are, and the KV cache, precision and sources cannot be changed this way."""
    older = PARAMS.with_changes({"max_num_seqs": 4, "num_scheduler_steps": 10})

    assert (older.max_num_seqs, older.num_scheduler_steps) == (4, 10)
    assert older.sources["max_num_seqs"] == "set for this prediction"
    assert older.num_gpu_blocks == PARAMS.num_gpu_blocks
    with pytest.raises(InvalidInput, match=r"engine_changes.*num_gpu_blocks"):
        PARAMS.with_changes({"num_gpu_blocks": 1})
    with pytest.raises(InvalidInput, match=r"engine_changes.*max_num_seq'"):
        PARAMS.with_changes({"max_num_seq": 4})
    with pytest.raises(InvalidInput, match="max_num_seqs"):
        PARAMS.with_changes({"max_num_seqs": 0})
    # an engine that schedules asynchronously (vLLM V1's default) run as V0's multi-step: V0 had none
    v1 = replace(PARAMS, async_scheduling=True)
    v0 = v1.with_changes({"num_scheduler_steps": 10})
    assert v0.async_scheduling is False and "V0" in v0.sources["async_scheduling"]
    with pytest.raises(InvalidInput, match="async_scheduling"):
        v1.with_changes({"num_scheduler_steps": 10, "async_scheduling": True})
