"""The client's pure parts: SSE event handling, request bodies and learning what a server rejects;
and the step's input checks (every bad value named before anything is sent)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuplace.errors import InvalidInput
from gpuplace.loadtest.client import FORCE_GENERATION_CONFIG, FORCE_NONE, EndpointState, _Stream
from gpuplace.loadtest.step import LoadTestConfig, read_plan_prediction
from gpuplace.types import DeploymentRecord


def test_stream_counts_text_chunks_takes_usage_and_sees_finish_without_done() -> None:
    s = _Stream("completions")
    s.feed(json.dumps({"choices": [{"text": " a"}]}), 0.1)
    s.feed(json.dumps({"choices": [{"text": ""}]}), 0.15)  # empty text is not a token
    s.feed(json.dumps({"choices": [{"text": " b"}]}), 0.2)
    assert not s.finished
    s.feed(
        json.dumps({"choices": [{"text": "", "finish_reason": "length"}], "usage": {"completion_tokens": 2}}),
        0.3,
    )
    assert s.finished and s.chunk_times == [0.1, 0.2] and s.usage_completion == 2


def test_stream_chat_deltas_done_and_error_events() -> None:
    s = _Stream("chat")
    s.feed(json.dumps({"choices": [{"delta": {"role": "assistant"}}]}), 0.05)
    s.feed(json.dumps({"choices": [{"delta": {"content": "hi"}}]}), 0.1)
    s.feed("[DONE]", 0.2)
    assert s.finished and s.chunk_times == [0.1]
    e = _Stream("chat")
    e.feed('{"error": "boom"}', 0.1)
    assert e.error == "boom"
    with pytest.raises(ValueError):
        e.feed("{not json", 0.2)


def test_endpoint_learns_from_422_which_fields_to_drop() -> None:
    ep = EndpointState("http://x", "m")
    body = ep.body("p", 8)
    assert body["ignore_eos"] is True and body["min_tokens"] == 8 and body["stream"] is True
    assert ep.drop_rejected("Unexpected fields in the request: {'ignore_eos'}")
    assert ep.force == FORCE_GENERATION_CONFIG
    body = ep.body("p", 8)
    assert "ignore_eos" not in body
    assert json.loads(body["generation_config"]) == {"max_new_tokens": 8, "min_new_tokens": 8}
    assert ep.drop_rejected("Unexpected fields: {'generation_config', 'stream_options'}")
    assert ep.force == FORCE_NONE and not ep.include_usage
    assert set(ep.body("p", 8)) == {"model", "max_tokens", "stream", "prompt"}
    assert not ep.drop_rejected("prompt is too long")
    chat = EndpointState("http://x/", "m", api="chat")
    assert chat.url == "http://x/v1/chat/completions" and "messages" in chat.body("p", 1)


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "endpoint"),
        ({"endpoint": "localhost:8000"}, "endpoint"),
        ({"endpoint": "http://h", "rate": 0}, "rate"),
        ({"endpoint": "http://h", "rate": -2.0}, "rate"),
        ({"endpoint": "http://h", "concurrency": 0}, "concurrency"),
        ({"endpoint": "http://h", "max_requests": 0}, "max_requests"),
        ({"endpoint": "http://h", "api": "responses"}, "api"),
        ({"endpoint": "http://h", "arrival": "uniform"}, "arrival"),
        ({"endpoint": "http://h", "prompt_tokens": "many"}, "prompt_tokens"),
        ({"endpoint": "http://h", "trace": "/nonexistent.csv"}, "trace"),
        ({"endpoint": "http://h", "slo_ttft_s": -1.0}, "slo_ttft_s"),
        ({"endpoint": "http://h", "plan": "/nonexistent-plan.json"}, "plan"),
        ({"deployment": "/nonexistent-deployment.json"}, "deployment"),
    ],
)
def test_config_rejects_bad_input_naming_the_field(params: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput, match=rf"^{field}="):
        LoadTestConfig.from_params(**params)  # type: ignore[arg-type]


def test_config_reads_endpoint_and_model_from_a_deployment_record(tmp_path: Path) -> None:
    record = DeploymentRecord(
        target="local", name="d", namespace="", endpoint="http://127.0.0.1:9", model="tiny", ready=True,
        served_model_name="/models/tiny",
    )  # fmt: skip
    path = tmp_path / "deployment.json"
    path.write_text(json.dumps(record.to_json_dict()))
    config = LoadTestConfig.from_params(deployment=str(path))
    assert (config.endpoint, config.model, config.deployment_model) == (
        "http://127.0.0.1:9",
        "/models/tiny",
        "tiny",
    )
    with pytest.raises(InvalidInput, match="conflicts"):
        LoadTestConfig.from_params(deployment=str(path), endpoint="http://other:1")


def test_plan_prediction_is_optional(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"predicted": {"tpot_p99_s": 0.041, "ttft_p99_s": 0.3}}))
    assert read_plan_prediction(plan) == {"tpot_p99_s": 0.041, "ttft_p99_s": 0.3}
    plan.write_text(json.dumps({"placements": []}))
    assert read_plan_prediction(plan) == {}
    plan.write_text("{")
    with pytest.raises(InvalidInput, match=r"^plan="):
        read_plan_prediction(plan)
