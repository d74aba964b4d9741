"""Both orchestration paths on the real local control plane, measured the same way.

The native path is `deploy_plan` (DRA claims for the planned GPUs, or the device plugin); the Kubeflow path
is the task pod KFP's driver would create from the checked-in compiled pipeline
(:mod:`gpuplace.k8s.kfp_task`). KWOK runs no containers, so the KWOK stand-in serves each pod with the
real local engine (`transformers serve` over the tiny preset on this CPU), as `gpuplace run --target
kubernetes` on the testenv does; a pod's provisioning time therefore includes that server's start.
Placement is read back from the API; nothing is copied from the plan. Faults: misplacement,
unsatisfiable claims, a ResourceSlice removed mid-deploy.
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpuplace.compare import IncomparablePaths, compare_paths
from gpuplace.compare.metrics import PathResult
from gpuplace.components.images import SERVING_IMAGE
from gpuplace.deploy.local import teardown_local
from gpuplace.deploy.standin import LocalStandIn
from gpuplace.deploy.standin import start_local as start_local_engine
from gpuplace.inventory import load_inventory
from gpuplace.jobs.submit import compiled_path
from gpuplace.k8s import Api, DeployFailed, deploy_plan
from gpuplace.k8s.kfp_task import run_task_pod
from gpuplace.k8s.measure import PlacementMismatch
from gpuplace.k8s.retry import Deadline
from gpuplace.plandir import PlanDir
from gpuplace.testenv import ControlPlane
from gpuplace.testenv import dra as testenv_dra
from gpuplace.types import DeploymentRecord, LatencyReport
from tests.support.plans import rendered_plan_dir, sample_plan
from tests.support.reports import latency_report

pytestmark = [pytest.mark.integration, pytest.mark.controlplane]

H100 = load_inventory("h100-nvlink")
MIXED = load_inventory("mixed-a100-h100-l4")


class Engines:
    """The stand-in's own ``start`` (the real local engine), with a list of what it started, so that a
    test can see what served and stop every server it started."""

    def __init__(self) -> None:
        self.servers: list[DeploymentRecord] = []

    def __call__(self, model: str, workdir: Path, name: str, timeout_s: float) -> DeploymentRecord:
        record = start_local_engine(model, workdir, name, timeout_s)
        self.servers.append(record)
        return record

    def stop(self) -> None:
        for record in self.servers:
            teardown_local(record)


@pytest.fixture
def engines() -> Iterator[Engines]:
    started = Engines()
    yield started
    started.stop()


def standin(engines: Engines, tmp_path: Path) -> LocalStandIn:
    return LocalStandIn("tiny", workdir=tmp_path, start=engines, unit="cpu", startup_timeout_s=240)


def _plan(tmp_path: Path, name: str, inventory: Any = H100, **kwargs: Any) -> PlanDir:
    plan = sample_plan(plan_id=f"p-{name}", name=name, **kwargs)
    return rendered_plan_dir(tmp_path / name, plan, inventory, image=SERVING_IMAGE)


def _report() -> LatencyReport:
    return latency_report([0.1, 0.2], [0.1, 0.2], completed=2, duration_s=1.0)


def test_both_paths_serve_one_spec_and_are_read_back_from_the_api(
    kube_api: Api, kube_namespace: str, tmp_path: Path, engines: Engines
) -> None:
    planned = _plan(tmp_path, "both", nodes=("h100-b-0",), gpus=2, first_gpu=4)
    native = deploy_plan(
        planned, api=kube_api, namespace=kube_namespace, timeout_s=60, runtime=standin(engines, tmp_path)
    )
    (pod,) = native.pods
    assert native.gpu_api == "dra" and pod.placement_level == "device"
    # the devices kube-scheduler's DRA allocator picked, read from the claim: the planned ones, by UUID
    assert pod.gpu_ids == pod.planned_gpu_ids == ("h100-b-0/gpu4", "h100-b-0/gpu5")
    # and what the claim's allocation said, kept beside them: the driver's gpu-4 and gpu-5 in pool h100-b-0
    assert [(d.driver, d.pool, d.device, d.gpu_id) for d in pod.dra_devices] == [
        ("gpu.nvidia.com", "h100-b-0", "gpu-4", "h100-b-0/gpu4"),
        ("gpu.nvidia.com", "h100-b-0", "gpu-5", "h100-b-0/gpu5"),
    ]
    assert all(d.claim and d.request for d in pod.dra_devices)
    assert pod.node == pod.planned_node == "h100-b-0" and pod.timing == "watch"
    assert pod.created_at_s < pod.scheduled_at_s <= pod.ready_at_s < pod.serving_at_s
    # created → serving, the local engine's start included (a few seconds to a minute on this machine)
    assert 0 < pod.provisioning_s < 240 and native.served_on == "cpu" and native.mismatches() == ()
    assert native.endpoint == engines.servers[0].endpoint

    kubeflow = run_task_pod(
        planned,
        api=kube_api,
        namespace=kube_namespace,
        package=compiled_path("orchestration_comparison"),
        runtime=standin(engines, tmp_path),
        timeout_s=60,
    )
    (task,) = kubeflow.pods
    # KFP gives a task GPUs only through the device plugin: node level only, no ids made up
    assert kubeflow.gpu_api == "device-plugin" and task.placement_level == "node" and task.gpu_ids == ()
    assert task.dra_devices == ()
    assert (
        task.gpu_count == 2 and task.gpu_resource == "nvidia.com/gpu"
    )  # the plan's count, as a string output
    assert task.node == task.planned_node == "h100-b-0" and 0 < task.provisioning_s < 240
    assert native.serving == kubeflow.serving and native.serving is not None
    assert native.serving.image == SERVING_IMAGE and native.serving.gpus_per_replica == 2

    results = [PathResult("native", native, _report()), PathResult("kubeflow", kubeflow, _report())]
    c = compare_paths(results, fleet=H100, weights={"provisioning": 0.5, "tpot_p99": 0.5})
    assert c.path("native").gpu_ids == ("h100-b-0/gpu4", "h100-b-0/gpu5") and c.path("kubeflow").gpu_ids == ()
    other = replace(kubeflow, serving=replace(kubeflow.serving, tensor_parallel=1))  # type: ignore[arg-type]
    with pytest.raises(IncomparablePaths, match="tensor_parallel: 2 ≠ 1"):
        compare_paths([results[0], PathResult("kubeflow", other, _report())])


def test_a_pod_off_its_planned_node_fails_the_deploy_and_is_cleaned_up(
    kube_api: Api, kube_namespace: str, tmp_path: Path, engines: Engines
) -> None:
    planned = _plan(tmp_path, "off", nodes=("h100-a-1",), gpus=1)
    # The Deployment as rendered pins h100-a-1; make it pin another node, as a stale manifest would.
    dep = next(m for m in planned.manifests if m["kind"] == "Deployment")
    terms = dep["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    terms["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"][0][
        "values"
    ] = ["h100-b-1"]
    with pytest.raises(PlacementMismatch) as failed:
        deploy_plan(
            planned,
            api=kube_api,
            namespace=kube_namespace,
            timeout_s=60,
            gpu_api="device-plugin",
            runtime=standin(engines, tmp_path),
        )
    assert "pod" in str(failed.value) and "on h100-b-1, planned h100-a-1" in str(failed.value)
    assert failed.value.exit_status == 1 and "Tore down" in failed.value.cleanup
    (pod,) = failed.value.record.pods
    assert pod.node == "h100-b-1" and pod.planned_node == "h100-a-1" and not failed.value.record.ready
    assert kube_api.list("apps/v1", "Deployment", kube_namespace) == []
    # opted out: the deployment stays, and the record still says where it is
    record = deploy_plan(
        planned,
        api=kube_api,
        namespace=kube_namespace,
        timeout_s=60,
        gpu_api="device-plugin",
        runtime=standin(engines, tmp_path),
        allow_misplacement=True,
    )
    assert record.mismatches() == ("pod " + record.pods[0].name + " on h100-b-1, planned h100-a-1",)
    assert any("placement mismatch" in n for n in record.notes)


def test_unsatisfiable_claims_report_the_schedulers_reason_and_leave_nothing(
    kube_api: Api, kube_namespace: str, tmp_path: Path, engines: Engines
) -> None:
    # Two L4s "over NVLink": the claim keeps the planned locality, and L4s have no NVLink island at all.
    planned = _plan(tmp_path, "l4", inventory=MIXED, nodes=("l4-a-0",), gpus=2, gpu="L4-24GB", link="nvlink")
    with pytest.raises(DeployFailed) as failed:
        deploy_plan(
            planned, api=kube_api, namespace=kube_namespace, timeout_s=6, runtime=standin(engines, tmp_path)
        )
    text = str(failed.value)
    assert "0 of 1 pods" in text and "cannot allocate all claims" in text  # kube-scheduler's own words
    assert "Tore down what was applied" in failed.value.cleanup
    for api_version, kind in (
        ("apps/v1", "Deployment"),
        ("resource.k8s.io/v1", "ResourceClaim"),
        ("v1", "Service"),
        ("policy/v1", "PodDisruptionBudget"),
    ):
        assert kube_api.list(api_version, kind, kube_namespace) == [], kind
    assert engines.servers == []  # nothing was started for a pod that never ran


def test_a_resource_slice_removed_during_a_deploy(
    kube_api: Api,
    kube_namespace: str,
    controlplane: ControlPlane,
    tmp_path: Path,
    engines: Engines,
) -> None:
    node = H100.node("h100-a-0")
    slice_ = testenv_dra.resource_slice(node)
    assert slice_ is not None
    planned = _plan(tmp_path, "slice", nodes=("h100-a-0",), gpus=2, first_gpu=6)
    result: dict[str, Any] = {}
    controlplane.stop_process("kube-scheduler")  # the claim waits, unallocated, until the slice is gone
    try:

        def run() -> None:
            try:
                result["record"] = deploy_plan(
                    planned,
                    api=kube_api,
                    namespace=kube_namespace,
                    timeout_s=60,
                    runtime=standin(engines, tmp_path),
                )
            except Exception as e:  # reported below
                result["error"] = e

        thread = threading.Thread(target=run)
        thread.start()
        deadline = Deadline(20)
        while (
            not kube_api.list("resource.k8s.io/v1", "ResourceClaim", kube_namespace) and not deadline.expired
        ):
            time.sleep(0.1)
        assert kube_api.delete(slice_)  # the driver withdraws the node's devices mid-deploy
        controlplane.start_process("kube-scheduler")
        time.sleep(3)
        assert thread.is_alive(), "the deploy finished while its devices were not published"
        kube_api.apply(slice_, force=True)  # published again: the scheduler allocates on its own
        thread.join(60)
    finally:
        with contextlib.suppress(Exception):
            if not controlplane.alive().get("kube-scheduler"):
                controlplane.start_process("kube-scheduler")
        kube_api.apply(slice_, force=True)
    assert "error" not in result, result.get("error")
    (pod,) = result["record"].pods
    assert pod.gpu_ids == ("h100-a-0/gpu6", "h100-a-0/gpu7") and not math.isnan(pod.provisioning_s)
