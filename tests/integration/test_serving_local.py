"""The local target for real: `transformers serve` over the tiny preset, offline, then the load tester.

Few and small on purpose (the server runs one generation at a time on 2 CPUs).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from gpuplace.cli import main
from gpuplace.deploy.local import deploy_local, teardown_local
from gpuplace.types import DeploymentRecord

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[DeploymentRecord, Path]]:
    workdir = tmp_path_factory.mktemp("local")
    record = deploy_local("tiny", workdir=workdir, device="cpu", startup_timeout_s=240)
    path = workdir / "deployment.json"
    path.write_text(json.dumps(record.to_json_dict()))
    try:
        yield record, path
    finally:
        teardown_local(record)


def test_deploy_local_records_a_ready_endpoint_and_provisioning(
    deployment: tuple[DeploymentRecord, Path],
) -> None:
    record, _ = deployment
    assert record.target == "local" and record.ready and record.pid
    assert record.endpoint.startswith("http://127.0.0.1:")
    assert Path(record.served_model_name, "tokenizer.json").is_file()
    (pod,) = record.pods
    assert 0 < pod.ready_s < 240  # deploy_local alone: created → /health; the first request is serve_local's


def test_serve_local_times_the_first_request_and_reads_its_spec_from_the_process(tmp_path: Path) -> None:
    from gpuplace.deploy.served import serve_local

    record = serve_local("tiny", workdir=tmp_path, name="first", startup_timeout_s=240)
    try:
        (pod,) = record.pods
        assert pod.created_at_s < pod.ready_at_s < pod.serving_at_s and 0 < pod.provisioning_s < 240
        spec = record.serving
        assert spec is not None and spec.engine == "transformers" and spec.args[0] == "serve"
        assert "--port" not in spec.args and "--host" not in spec.args  # per-server, not what is served
        from gpuplace.profiling.device import local_unit

        assert spec.model_source == record.served_model_name and record.served_on == local_unit()
    finally:
        teardown_local(record)


def test_loadtest_from_the_deployment_record_forces_lengths(
    deployment: tuple[DeploymentRecord, Path], tmp_path: Path
) -> None:
    _, path = deployment
    code = main(["loadtest", "--deployment", str(path), "--prompt-tokens", "48", "--output-tokens", "8",
                 "--concurrency", "2", "--max-requests", "4", "--out", str(tmp_path), "--quiet"])  # fmt: skip
    assert code == 0
    frame = pd.read_parquet(tmp_path / "records.parquet")
    assert frame["success"].all()
    # the prompt is exactly as long as asked in the server's own count, and ignore_eos's
    # replacement (generation_config min_new_tokens) forced every output to its length
    assert list(frame["server_prompt_tokens"]) == [48] * 4
    assert list(frame["output_tokens"]) == [8] * 4 and set(frame["output_tokens_source"]) == {"usage"}
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["tpot"]["count"] == 4 and report["ttft"]["p99"] > 0
    assert any("generation_config" in n for n in report["notes"])  # learnt from the 422


def test_chat_api_against_the_local_server(deployment: tuple[DeploymentRecord, Path], tmp_path: Path) -> None:
    record, _ = deployment
    code = main(["loadtest", "--endpoint", record.endpoint, "--api", "chat", "--prompt-tokens", "32",
                 "--output-tokens", "4", "--rate", "2", "--max-requests", "3", "--out", str(tmp_path),
                 "--quiet"])  # fmt: skip
    assert code == 0
    frame = pd.read_parquet(tmp_path / "records.parquet")
    assert frame["success"].all() and list(frame["server_prompt_tokens"]) == [32] * 3


def test_teardown_stops_the_server_and_is_idempotent(tmp_path: Path) -> None:
    record = deploy_local("tiny", workdir=tmp_path, device="cpu", startup_timeout_s=240, name="short-lived")
    assert record.pid is not None
    teardown_local(record)
    with pytest.raises(ProcessLookupError):
        os.kill(record.pid, 0)
    teardown_local(record)
    assert (tmp_path / "short-lived.log").is_file()
