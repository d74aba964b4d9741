"""The client's pure parts: SSE event handling, request bodies and learning what a server rejects;
and the step's input checks (every bad value named before anything is sent)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from gpuplace.errors import InvalidInput
from gpuplace.loadtest.client import FORCE_GENERATION_CONFIG, FORCE_NONE, EndpointState, _Stream
from gpuplace.steps.loadtest import load_test_config, read_load_test_inputs
from gpuplace.types import DeploymentRecord
from gpuplace.types.plan import Slo
from gpuplace.types.workload import Traffic
from tests.support.plans import sample_plan, write_sample_plan, yaml_docs


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
        ({"endpoint": "http://h", "rate": -2.0}, "rate"),
        ({"endpoint": "http://h", "concurrency": -1}, "concurrency"),
        ({"endpoint": "http://h", "max_requests": 0}, "max_requests"),
        ({"endpoint": "http://h", "api": "responses"}, "api"),
        ({"endpoint": "http://h", "arrival": "uniform"}, "arrival"),
        ({"endpoint": "http://h", "prompt_tokens": "many"}, "prompt_tokens"),
        ({"endpoint": "http://h", "trace": "/nonexistent.csv"}, "trace"),
        ({"endpoint": "http://h", "time_scale": -1.0}, "time_scale"),
        ({"endpoint": "http://h", "max_duration_s": -5.0}, "max_duration_s"),
    ],
)
def test_config_rejects_bad_input_naming_the_field(params: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput, match=rf"^{field}="):
        load_test_config(params)


def test_config_zero_means_unset() -> None:
    config = load_test_config({"endpoint": "http://h", "rate": 0, "concurrency": 0})
    assert (config.rate, config.concurrency, config.slo.bounded) == (None, None, False)
    assert config.traffic.prompt_tokens.describe() == "64"


def test_config_reads_endpoint_and_model_from_a_deployment_record() -> None:
    record = DeploymentRecord(
        target="local", name="d", namespace="", endpoint="http://127.0.0.1:9", model="tiny", ready=True,
        served_model_name="/models/tiny",
    )  # fmt: skip
    config = load_test_config({}, deployment=record)
    assert (config.endpoint, config.model, config.deployment_model) == (
        "http://127.0.0.1:9",
        "/models/tiny",
        "tiny",
    )
    with pytest.raises(InvalidInput, match="conflicts"):
        load_test_config({"endpoint": "http://other:1"}, deployment=record)


def test_the_plan_gives_the_slo_the_traffic_the_rate_and_the_prediction(tmp_path: Path) -> None:
    plan = replace(
        sample_plan(),
        traffic=Traffic.parse("uniform:100:200", "50"),
        slo=Slo(ttft_p99_s=1.5, tpot_p99_s=0.04, rate_rps=3.0),
    )
    write_sample_plan(tmp_path, plan, {"10-d.yaml": yaml_docs(DEPLOYMENT)})
    # the load-test step reads the plan directory once; the config takes the plan's value
    record, read = read_load_test_inputs(plan=tmp_path)
    assert record is None and read == plan
    config = load_test_config({"endpoint": "http://h"}, plan=read)
    assert config.slo == plan.slo and config.rate == 3.0 and config.concurrency is None
    assert config.traffic.prompt_tokens.describe() == "uniform:100:200"
    assert config.plan_id == plan.plan_id
    # The prediction is compared only with a measurement on the device it is for.
    assert config.predicted is None and "not compared" in config.prediction_note
    served = DeploymentRecord("local", "d", "", "http://h", "tiny", True, served_on=plan.chosen.unit)
    config = load_test_config({}, plan=plan, deployment=served)
    assert config.predicted == plan.prediction and not config.prediction_note
    on_cpu = replace(served, served_on="cpu")
    config = load_test_config({}, plan=plan, deployment=on_cpu)
    assert config.predicted is None and "served on cpu" in config.prediction_note
    # Explicit parameters win over the plan's, and the SLO judges at the rate actually sent.
    config = load_test_config({"endpoint": "http://h", "prompt_tokens": "64", "rate": 1.0}, plan=plan)
    assert config.traffic.prompt_tokens.describe() == "64" and config.slo.rate_rps == 1.0
    with pytest.raises(InvalidInput, match=r"^plan="):
        read_load_test_inputs(plan=tmp_path / "nope")


DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: llm}
spec: {template: {spec: {containers: [{name: c, image: x}]}}}
"""


def test_a_rate_replays_the_trace_at_that_mean_rate(tmp_path: Path) -> None:
    """The pipelines pass their planned rate to a load test that replays a trace: its arrivals are scaled
    to that mean rate (the gaps' pattern kept), so the measurement is at the load the plan was made for.
    Before, the load test refused the rate and the pipeline's load test failed on every trace."""
    import itertools

    trace = tmp_path / "t.csv"
    gaps = [0.5, 1.5, 0.2, 3.0, 0.8]  # 6 rows over 6 s: 5 gaps, a mean of 5/6 req/s as recorded
    times = [0.0, *itertools.accumulate(gaps)]
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(f"{t},8,4\n" for t in times))
    config = load_test_config({"endpoint": "http://h", "trace": str(trace), "rate": 4.0})
    specs = config.specs()
    assert config.rate == 4.0 and config.workload()["rate_rps"] == 4.0
    assert specs[-1].arrival_s == pytest.approx(5 / 4.0)  # 5 gaps at a mean of 1/4 s
    assert [b.arrival_s - a.arrival_s for a, b in itertools.pairwise(specs)] == pytest.approx(
        [g * (5 / 6) / 4.0 for g in gaps]
    )
    as_recorded = load_test_config({"endpoint": "http://h", "trace": str(trace)})
    assert as_recorded.rate is None and as_recorded.specs()[-1].arrival_s == pytest.approx(6.0)
    # only the first max_requests rows are replayed: their own mean rate is scaled
    first3 = load_test_config({"endpoint": "http://h", "trace": str(trace), "rate": 1.0, "max_requests": 3})
    assert first3.specs()[-1].arrival_s == pytest.approx(2.0)
    with pytest.raises(InvalidInput, match=r"^rate=4\.0: and time_scale=0\.5 both set the trace's pace"):
        load_test_config({"endpoint": "http://h", "trace": str(trace), "rate": 4.0, "time_scale": 0.5})
