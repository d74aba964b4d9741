"""`gpuplace compile` and `gpuplace submit` through the real kfp.Client.

KFP's API server cannot run here (it needs a cluster, MySQL and Argo), so a small HTTP server in
this test stands in for the KFP backend: it implements the REST endpoints kfp.Client 2.17 calls
(healthz, experiments, runs, pipeline upload), records every request, and the tests assert on the
pipeline spec and arguments that were really uploaded.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from gpuplace.cli import main
from gpuplace.jobs.submit import compiled_path, pipeline_names

pytestmark = pytest.mark.integration


class FakeKfp(BaseHTTPRequestHandler):
    requests: ClassVar[list[dict[str, Any]]] = []

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, body: dict[str, Any], code: int = 200) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _record(self, body: bytes = b"") -> None:
        FakeKfp.requests.append(
            {
                "method": self.command,
                "path": self.path,
                "body": body,
                "auth": self.headers.get("Authorization"),
            }
        )

    def do_GET(self) -> None:
        self._record()
        if self.path.startswith("/apis/v2beta1/healthz"):
            self._send({"multi_user": False})
        elif self.path.startswith("/apis/v2beta1/experiments"):
            self._send({"experiments": [], "total_size": 0})  # none yet: the client creates it
        elif self.path.startswith("/apis/v2beta1/runs/"):
            run_id = self.path.rsplit("/", 1)[-1]
            self._send({"run_id": run_id, "experiment_id": "exp-1", "state": "SUCCEEDED"})
        else:
            self._send({"error": "not found"}, 404)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._record(body)
        if self.path.startswith("/apis/v2beta1/experiments"):
            self._send({"experiment_id": "exp-1", "display_name": json.loads(body)["display_name"]})
        elif self.path.startswith("/apis/v2beta1/runs"):
            run = json.loads(body)
            self._send(
                {**run, "run_id": "run-1", "experiment_id": run.get("experiment_id"), "state": "PENDING"}
            )
        elif self.path.startswith("/apis/v2beta1/pipelines/upload"):
            self._send({"pipeline_id": "pipe-1", "display_name": "llm_placement"})
        else:
            self._send({"error": "not found"}, 404)


@pytest.fixture
def fake_kfp() -> Iterator[str]:
    FakeKfp.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeKfp)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _posted_run() -> dict[str, Any]:
    runs = [
        r for r in FakeKfp.requests if r["method"] == "POST" and r["path"].startswith("/apis/v2beta1/runs")
    ]
    assert len(runs) == 1
    return json.loads(runs[0]["body"])


def test_submit_uploads_the_compiled_spec_with_typed_arguments(
    fake_kfp: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "submit",
            "llm_placement",
            "--host",
            fake_kfp,
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
    assert "run run-1" in out and "state: SUCCEEDED" in out and "uploaded pipeline pipe-1" in out
    run = _posted_run()
    assert run["runtime_config"]["parameters"] == {"model": "mistral-7b", "batch_sizes": "1,4"}
    checked_in = yaml.safe_load(compiled_path("llm_placement").read_text())
    assert (
        run["pipeline_spec"]["pipelineInfo"]["name"] == checked_in["pipelineInfo"]["name"] == "llm-placement"
    )
    assert run["pipeline_spec"]["root"] == checked_in["root"]
    experiments = [r for r in FakeKfp.requests if r["path"].startswith("/apis/v2beta1/experiments")]
    assert json.loads(experiments[-1]["body"])["display_name"] == "capacity"
    assert all(r["auth"] == "Bearer s3cret" for r in FakeKfp.requests)


def test_unknown_param_lists_the_valid_ones(fake_kfp: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["submit", "llm_placement", "--host", fake_kfp, "--param", "modle=tiny"]) == 2
    err = capsys.readouterr().err
    assert "param='modle': is not a parameter of pipeline 'llm_placement'" in err and "model" in err
    assert FakeKfp.requests == []  # nothing was sent


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
