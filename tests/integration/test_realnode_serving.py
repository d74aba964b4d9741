"""A plan for this machine served from real containers on the testenv's real node (containerd + runc +
kubelet: `realnode_controlplane`), on both orchestration paths, and the node's containerd restarted during a
load test.

The plan is the real planner's for this machine, from a stated engine-step line
(`tests.support.plans.local_plan_dir`: measuring the engine takes minutes and is not what is tested here). The
native path's Deployment and the Kubeflow path's task pod (built as KFP's driver builds it, created
directly: no KFP backend runs here) each run `transformers serve` of the tiny random-weight model, built from
its preset inside the container, in the CPU serving image `make images` built (`IMAGES=cpu make images`).
Readiness probes are the kubelet's; first requests and the load test reach the pods by IP.
"""

from __future__ import annotations

import math
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuplace.deploy import deploy, teardown, write_record
from gpuplace.k8s import Api, connect
from gpuplace.loadtest.run import LoadTestResult, run_loadtest_step
from gpuplace.plandir import PlanDir
from gpuplace.steps.loadtest import load_test_config
from gpuplace.steps.serve_and_loadtest import compiled_package, serve_and_load_test
from gpuplace.testenv import ControlPlane
from gpuplace.testenv.realnode import RUNTIME_NAME, RealNode, built_images, node_name
from tests.support.plans import local_plan_dir

pytestmark = [
    pytest.mark.integration,
    pytest.mark.controlplane,
    pytest.mark.realnode,
    pytest.mark.usefixtures("real_node_slot"),
]

START_S = 900.0  # the container builds the model and loads torch: minutes on a busy 2-core machine


@pytest.fixture(scope="module")
def kubeconfig(realnode_controlplane: ControlPlane) -> Iterator[str]:
    if not any("/gpuplace-cpu:" in t for t in built_images()):
        pytest.fail("the CPU serving image is not built: run `IMAGES=cpu make images`", pytrace=False)
    yield str(realnode_controlplane.kubeconfig)


def _local_plan(root: Path) -> PlanDir:
    return local_plan_dir(root, node_name())


def _pods_left(kubeconfig: str) -> list[str]:
    api = Api(connect(kubeconfig))
    try:
        end = time.monotonic() + 60
        while True:
            pods = [p["metadata"]["name"] for p in api.list("v1", "Pod", "default")]
            if not pods or time.monotonic() > end:
                return pods
            time.sleep(0.5)
    finally:
        api.client.close()


def _load(record: Any, plan: PlanDir, out: Path, requests: int) -> LoadTestResult:
    params = {"max_requests": requests, "rate": 1.0}
    config = load_test_config(params, deployment=record, plan=plan.plan)
    return run_loadtest_step(config, out, show_progress=False)


def test_both_paths_serve_the_local_plan_from_real_containers(kubeconfig: str, tmp_path: Path) -> None:
    planned = _local_plan(tmp_path / "plan")
    native = deploy(planned, kubeconfig=kubeconfig, timeout_s=START_S, path="native", workdir=tmp_path / "w")
    try:
        (pod,) = native.pods
        assert native.runtime == pod.runtime == RUNTIME_NAME and pod.node == node_name()
        assert native.endpoint.startswith("http://10.90.0.") and native.served_on == "cpu"
        assert any("local build" in n for n in native.notes), native.notes
        stages = (pod.scheduling_s, pod.image_s, pod.container_start_s, pod.server_start_s)
        assert all(math.isfinite(s) and s >= 0 for s in stages), stages
        assert math.isclose(sum(stages), pod.provisioning_s, abs_tol=1e-6)
        assert pod.server_start_s > pod.container_start_s  # the model is built and loaded in the container
        measured = _load(native, planned, tmp_path / "native-lt", 4)
        assert measured.report.completed == 4, measured.report.errors
    finally:
        said = teardown(planned, kubeconfig=kubeconfig)
    assert "stand-in" not in said and _pods_left(kubeconfig) == []

    kubeflow = serve_and_load_test(
        planned.path,
        {"max_requests": 4, "rate": 1.0},
        workdir=tmp_path / "kf",
        records=tmp_path / "kf-records",
        report=tmp_path / "kf-report",
        summary=tmp_path / "kf-summary",
        startup_timeout_s=START_S,
        backend="testenv",
        kubeconfig=kubeconfig,
        package=compiled_package("orchestration_comparison"),
    )
    record = kubeflow.deployment
    (task,) = record.pods
    assert record.runtime == task.runtime == RUNTIME_NAME and task.node == node_name()
    assert math.isfinite(task.server_start_s) and math.isfinite(task.image_s)
    assert kubeflow.loadtest.report.completed == 4
    assert record.serving == native.serving  # one spec on both paths: the comparison can judge them
    assert _pods_left(kubeconfig) == []


def test_containerd_restarted_during_a_load_test_is_recorded_and_leaves_nothing(
    kubeconfig: str, realnode_controlplane: ControlPlane, tmp_path: Path
) -> None:
    node = RealNode.load(realnode_controlplane.state_dir)
    assert node is not None
    planned = _local_plan(tmp_path / "plan")
    native = deploy(planned, kubeconfig=kubeconfig, timeout_s=START_S, workdir=tmp_path / "w")
    try:
        # containerd restarted, its containers kept by their shims: every request is a record
        done: dict[str, LoadTestResult] = {}
        run = threading.Thread(target=lambda: done.update(r=_load(native, planned, tmp_path / "lt1", 10)))
        run.start()
        time.sleep(3)
        node.restart_containerd(down_s=2)
        run.join(600)
        first = done["r"]
        assert len(first.records) == first.report.completed + first.report.failed == 10
        assert all(r.error for r in first.records if not r.success)
        # containerd restarted and took the containers with it (systemd's KillMode=control-group): the
        # requests that follow fail, each recorded with its error, and a run where none succeeds exits 1
        done.clear()
        run = threading.Thread(target=lambda: done.update(r=_load(native, planned, tmp_path / "lt2", 20)))
        run.start()
        time.sleep(4)
        node.restart_containerd(down_s=2, with_containers=True)
        run.join(600)
        second = done["r"]
        assert second.report.completed >= 1 and second.report.failed >= 1, second.report.errors
        assert len(second.records) == 20 and all(r.error for r in second.records if not r.success)
        write_record(native, tmp_path / "record")
        node.restart_containerd(with_containers=True)
        cli = subprocess.run(
            [sys.executable, "-m", "gpuplace", "loadtest", "--deployment", str(tmp_path / "record"), "--plan",
             str(planned.path), "--max-requests", "3", "--out", str(tmp_path / "lt3")],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert cli.returncode != 0, cli.stdout + cli.stderr
    finally:
        teardown(planned, kubeconfig=kubeconfig)
    assert _pods_left(kubeconfig) == []
