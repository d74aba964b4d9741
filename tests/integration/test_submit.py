"""`gpuplace compile` and `gpuplace submit` through the real kfp.Client 2.17, against the KFP API stand-in
(tests/support/kfp_api.py: the KFP backend cannot run here), with the checked-in compiled pipelines:
upload creates the pipeline or a new version and the run runs that version, existing experiments are
reused, runs are polled from PENDING to SUCCEEDED or FAILED, the server's rejections and 401/403 become
clear errors.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuplace.cli import main
from gpuplace.jobs.submit import (
    KfpRefused,
    KfpRejected,
    RunFailed,
    RunTimeout,
    compiled_path,
    pipeline_names,
    submit,
)
from tests.support.kfp_api import KfpState, kfp_api

pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def quick_polls(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gpuplace.jobs.submit.DEFAULT_POLL_S", 0.01)


@pytest.fixture
def fake_kfp() -> Iterator[tuple[str, KfpState]]:
    with kfp_api() as served:
        yield served


def _posted_runs(state: KfpState) -> list[dict[str, Any]]:
    return [json.loads(r.body) for r in state.calls("POST", "/runs")]


def _checked_in(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(compiled_path(name).read_text())
    return doc


def test_upload_runs_the_uploaded_version_with_typed_arguments(
    fake_kfp: tuple[str, KfpState], capsys: pytest.CaptureFixture[str]
) -> None:
    host, state = fake_kfp
    code = main(
        [
            "submit",
            "llm_placement",
            "--host",
            host,
            "--param",
            "model=mistral-7b",
            "--param",
            "batch_sizes=1,4",
            "--experiment",
            "capacity",
            "--token",
            "s3cret",
            "--wait",
            "30",
            "--upload",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    (pipeline,) = state.pipelines.values()
    (version,) = state.versions.values()
    (run_id,) = state.runs
    assert (
        f"run {run_id}" in out
        and "state: SUCCEEDED" in out
        and f"uploaded pipeline {pipeline['pipeline_id']}" in out
    )
    (run,) = _posted_runs(state)
    # The run names the uploaded version and carries no spec of its own.
    assert "pipeline_spec" not in run or run["pipeline_spec"] is None
    assert run["pipeline_version_reference"] == {
        "pipeline_id": pipeline["pipeline_id"],
        "pipeline_version_id": version["pipeline_version_id"],
    }
    assert run["runtime_config"]["parameters"] == {"model": "mistral-7b", "batch_sizes": "1,4"}
    checked_in = _checked_in("llm_placement")
    assert version["pipeline_spec"]["root"] == checked_in["root"]
    assert version["pipeline_spec"]["pipelineInfo"]["name"] == "llm-placement"
    assert pipeline["display_name"] == "llm_placement"
    (exp,) = state.experiments.values()
    assert exp["display_name"] == "capacity" and run["experiment_id"] == exp["experiment_id"]
    assert all(r.auth == "Bearer s3cret" for r in state.requests)
    # It polled: PENDING -> RUNNING -> ... -> SUCCEEDED.
    states = [h["state"] for h in state.runs[run_id]["state_history"]]
    assert states == ["PENDING", "RUNNING", "SUCCEEDED"]
    assert len(state.calls("GET", f"/runs/{run_id}")) >= 3


def test_second_upload_adds_a_version_and_runs_it(fake_kfp: tuple[str, KfpState], tmp_path: Path) -> None:
    host, state = fake_kfp
    first = submit("orchestration_comparison", host=host, upload=True)
    changed = tmp_path / "pipeline.yaml"
    changed.write_text(compiled_path("orchestration_comparison").read_text() + "# rebuilt\n")
    second = submit("orchestration_comparison", host=host, upload=True, package=changed)
    again = submit("orchestration_comparison", host=host, upload=True, package=changed)
    assert first.pipeline_id == second.pipeline_id == again.pipeline_id and len(state.pipelines) == 1
    assert first.pipeline_version_id != second.pipeline_version_id
    assert again.pipeline_version_id == second.pipeline_version_id  # same package: reused, not re-uploaded
    assert len(state.versions) == 2 and len(state.calls("POST", "/pipelines/upload_version")) == 1
    runs = _posted_runs(state)
    assert [r["pipeline_version_reference"]["pipeline_version_id"] for r in runs] == [
        first.pipeline_version_id,
        second.pipeline_version_id,
        second.pipeline_version_id,
    ]
    assert state.versions[second.pipeline_version_id]["display_name"].startswith("orchestration_comparison-")


def test_an_existing_experiment_is_reused() -> None:
    with kfp_api(experiments=("capacity",)) as (host, state):
        (existing,) = state.experiments
        result = submit("llm_placement", host=host, experiment="capacity", upload=True)
        inline = submit("llm_placement", host=host, experiment="capacity")
    assert result.experiment_id == existing and len(state.experiments) == 1
    assert state.calls("POST", "/experiments") == []
    (by_version, by_package) = _posted_runs(state)
    assert by_version["experiment_id"] == by_package["experiment_id"] == existing
    # Without --upload the run carries the checked-in package inline.
    assert by_package["pipeline_spec"]["root"] == _checked_in("llm_placement")["root"]
    assert inline.pipeline_version_id == "" and not by_package.get("pipeline_version_reference")


def test_a_failed_run_fails_submit(capsys: pytest.CaptureFixture[str]) -> None:
    with kfp_api(outcomes=("FAILED",)) as (host, state):
        with pytest.raises(RunFailed) as failed:
            submit("llm_placement", host=host, upload=True, wait_timeout_s=30)
        assert failed.value.result.state == "FAILED"
        assert "task failed: exit status 1" in str(failed.value)
        state.outcomes.append("FAILED")
        assert main(["submit", "llm_placement", "--host", host, "--wait", "30"]) == 2
    assert "FAILED" in capsys.readouterr().err


def test_a_run_still_running_at_the_deadline_is_a_timeout() -> None:
    with kfp_api(running_polls=10_000) as (host, _), pytest.raises(RunTimeout) as late:
        submit("llm_placement", host=host, wait_timeout_s=0.2, poll_s=0.05)
    assert late.value.result.state == "RUNNING"


def test_the_servers_spec_validation_is_reported(tmp_path: Path) -> None:
    not_a_pipeline = tmp_path / "deployment.yaml"
    not_a_pipeline.write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n")
    strict = _checked_in("llm_placement")
    strict["root"]["inputDefinitions"]["parameters"]["model"].pop("defaultValue")
    strict["root"]["inputDefinitions"]["parameters"]["model"]["isOptional"] = False
    needs_model = tmp_path / "strict.yaml"
    needs_model.write_text(yaml.safe_dump(strict))
    with kfp_api() as (host, state):
        with pytest.raises(KfpRejected) as upload:
            submit("llm_placement", host=host, upload=True, package=not_a_pipeline)
        with pytest.raises(KfpRejected) as run:
            submit("llm_placement", host=host, package=needs_model)
    assert "could not upload pipeline llm_placement (HTTP 400" in str(upload.value)
    assert "not a pipeline spec" in str(upload.value)
    assert "HTTP 400" in str(run.value) and "missing required input parameter(s): model" in str(run.value)
    assert state.runs == {}


def test_401_and_403_are_clear_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with kfp_api(token="s3cret") as (host, _):
        assert main(["submit", "llm_placement", "--host", host]) == 2
        assert "refused the credentials (HTTP 401)" in capsys.readouterr().err
    with kfp_api(forbid=(("POST", "/pipelines/upload"),)) as (host, state):
        with pytest.raises(KfpRefused) as refused:
            submit("llm_placement", host=host, upload=True, namespace="team-a")
        assert state.pipelines == {} and state.runs == {}
    message = str(refused.value)
    assert "refused to upload pipeline llm_placement (HTTP 403" in message
    assert "--token" in message and "namespace team-a" in message


def test_unknown_param_lists_the_valid_ones(
    fake_kfp: tuple[str, KfpState], capsys: pytest.CaptureFixture[str]
) -> None:
    host, state = fake_kfp
    assert main(["submit", "llm_placement", "--host", host, "--param", "modle=tiny"]) == 2
    err = capsys.readouterr().err
    assert "param='modle': is not a parameter of pipeline 'llm_placement'" in err and "model" in err
    assert state.requests == []  # nothing was sent


def test_unknown_pipeline_suggests(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["submit", "llm_placment", "--host", "http://127.0.0.1:1"]) == 2
    assert "Did you mean 'llm_placement'" in capsys.readouterr().err


def test_host_that_does_not_answer_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main(["submit", "llm_placement", "--host", f"http://127.0.0.1:{port}"]) == 2
    assert f"host='http://127.0.0.1:{port}': does not answer" in capsys.readouterr().err


def test_checked_in_pipelines_are_not_stale(tmp_path: Path) -> None:
    """Compiled the way `make compile` does it, in a fresh interpreter: other tests in this session
    initialise kfp.local and import components, which must not decide what "fresh" means."""
    import difflib
    import subprocess
    import sys

    assert pipeline_names()
    for name in pipeline_names():
        fresh = tmp_path / f"{name}.yaml"
        subprocess.run(
            [sys.executable, "-m", "gpuplace", "compile", name, "--out", str(fresh)],
            check=True,
            capture_output=True,
        )
        checked_in = compiled_path(name).read_text()
        if list(yaml.safe_load_all(fresh.read_text())) != list(yaml.safe_load_all(checked_in)):
            diff = "".join(
                difflib.unified_diff(checked_in.splitlines(True), fresh.read_text().splitlines(True))
            )
            pytest.fail(
                f"pipelines/{name}/pipeline.yaml is stale: run `make compile` and commit it\n{diff[:4000]}"
            )
