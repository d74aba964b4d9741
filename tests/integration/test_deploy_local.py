"""`gpuplace deploy --target local` and `gpuplace teardown --target local`: the same plan directory, served
by a real OpenAI-compatible server process on this machine (gpuplace.deploy.local), then stopped."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from gpuplace.cli import main
from gpuplace.testenv.controlplane import process_start_ticks
from gpuplace.types import DeploymentRecord
from tests.integration.test_deploy import write_plan

pytestmark = pytest.mark.integration


def test_local_target_serves_and_tears_down(tmp_path: Path) -> None:
    plan = write_plan(tmp_path / "plan", plan_id="p-local", nodes=("h100-a-0",))
    out = tmp_path / "out"
    assert main(["deploy", str(plan), "--target", "local", "--out", str(out), "--timeout", "240"]) == 0
    record_file = out / "deployment.json"
    record = DeploymentRecord.from_json_dict(json.loads(record_file.read_text()))
    try:
        assert record.target == "local" and record.ready and record.pid
        assert record.plan_id == "p-local"  # the plan it serves: teardown by plan id, the tracking tags
        with urllib.request.urlopen(f"{record.endpoint}/v1/models", timeout=30) as resp:
            models = json.loads(resp.read())
        assert record.served_model_name in {m["id"] for m in models["data"]}
    finally:
        assert main(["teardown", "--target", "local", "--record", str(record_file)]) == 0
    assert record.pid is not None
    # Gone, or a zombie waiting for this process (its parent) to reap it: either way not serving.
    assert process_start_ticks(record.pid) is None
