"""load_test: the function's wiring called directly, and the real component under kfp.local.

The direct calls drive gpuplace's fault-injecting streaming server (a real HTTP server on loopback) because
they inject faults (a failed warm-up, a run where nothing is served); the local-runner test drives a real
`transformers serve`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from gpuplace.components.benchmarking.load_test import load_test
from gpuplace.types import DeploymentRecord, Slo
from tests.support.kfp_artifacts import FakeArtifact as _Art
from tests.support.plans import predicted, sample_plan, write_sample_plan
from tests.support.testserver import FaultServer, ServerOptions

SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "llm"}}


@pytest.fixture
def server() -> Iterator[FaultServer]:
    with FaultServer(ServerOptions(token_delay_s=0.001)) as s:
        yield s


def test_python_func_reads_the_deployment_artifact_and_writes_all_outputs(
    server: FaultServer, tmp_path: Path
) -> None:
    record = DeploymentRecord(
        target="local",
        name="d",
        namespace="",
        endpoint=server.url,
        model="m",
        ready=True,
        served_model_name="test-model",
        served_on="H100-SXM5-80GB",  # the planned unit: the prediction is compared
    )
    deployment = _Art(tmp_path / "deployment.json")
    Path(deployment.path).write_text(json.dumps(record.to_json_dict()))
    plan = _Art(tmp_path / "plan")
    prediction = predicted(
        (0.001, 0.002), (0.001, 0.002), concurrency=1.0, max_batch=1, memory_per_gpu_gib=1.0
    )
    plan_value = replace(sample_plan(prediction=prediction), slo=Slo(tpot_p99_s=0.1))
    write_sample_plan(Path(plan.path), plan_value, {"s.yaml": [SERVICE]})
    server.inject("http_500")
    outs = {n: _Art(tmp_path / "out" / n) for n in ("records", "report", "metrics", "summary")}
    load_test.python_func(
        **outs, deployment=deployment, plan=plan, prompt_tokens="16", output_tokens="4", max_requests=6,
        concurrency=2,
    )  # fmt: skip
    frame = pd.read_parquet(outs["records"].path)
    assert len(frame) == 6
    report = json.loads(Path(outs["report"].path).read_text())
    assert report["completed"] == 6  # the injected 500 hit the warm-up request, not the measured ones
    assert "warm-up request failed" in " ".join(report["notes"])
    assert "tpot_p99_s" in report["predicted_vs_measured"]
    assert report["slo"]["tpot_p99_s"] == 0.1  # the plan's SLO judged the run
    logged = outs["metrics"].logged
    assert logged["completed"] == 6.0 and logged["tpot_p99_ms"] > 0 and "tpot_p99_prediction_error" in logged
    assert Path(outs["summary"].path).read_text().startswith("# Load test")
    assert server.stats.bodies[-1]["model"] == "test-model"


def test_python_func_rejects_bad_input_before_sending(server: FaultServer, tmp_path: Path) -> None:
    outs = {n: _Art(tmp_path / n) for n in ("records", "report", "metrics", "summary")}
    with pytest.raises(ValueError, match=r"^rate=-1\.0"):
        load_test.python_func(**outs, endpoint=server.url, rate=-1.0)
    assert server.stats.requests == 0
    assert not any(Path(o.path).exists() for o in outs.values())


def test_a_load_test_with_no_successful_request_fails_after_writing_its_outputs(
    server: FaultServer, tmp_path: Path
) -> None:
    from gpuplace.loadtest.run import NothingServed

    outs = {n: _Art(tmp_path / n) for n in ("records", "report", "metrics", "summary")}
    server.inject("http_500", count=10)
    with pytest.raises(NothingServed, match="no request succeeded of 3 sent") as failed:
        load_test.python_func(
            **outs, endpoint=server.url, prompt_tokens="8", output_tokens="4", max_requests=3
        )
    assert failed.value.exit_status == 1
    report = json.loads(Path(outs["report"].path).read_text())  # kept: the failure is data too
    assert report["completed"] == 0 and report["failed"] == 3
    assert len(pd.read_parquet(outs["records"].path)) == 3


def test_component_spec_compiles_with_its_interface() -> None:
    spec = load_test.component_spec
    assert set(spec.outputs or {}) == {"records", "report", "metrics", "summary"}
    assert spec.inputs["deployment"].optional and spec.inputs["endpoint"].default == ""
    assert spec.implementation.container.image.startswith("ghcr.io/gpuplace/gpuplace-components:")


@pytest.mark.integration
def test_runs_under_the_local_runner(kfp_local: Path, tiny_server: DeploymentRecord) -> None:
    """The real component under kfp.local against a real `transformers serve` (tiny, CPU)."""
    task = load_test(
        endpoint=tiny_server.endpoint, prompt_tokens="8", output_tokens="4", rate=50.0, max_requests=10
    )
    frame = pd.read_parquet(task.outputs["records"].path)
    assert len(frame) == 10 and frame["success"].all()
    assert set(frame["server_prompt_tokens"]) == {8} and set(frame["output_tokens"]) == {4}
    assert task.outputs["metrics"].metadata["completed"] == 10.0
    assert json.loads(Path(task.outputs["report"].path).read_text())["workload"]["rate_rps"] == 50.0
