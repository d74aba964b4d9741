"""The cluster paths do not strand the user, on the real local control plane (real kube-scheduler, KWOK
nodes): a pod that can never be scheduled fails the deploy fast with kube-scheduler's own reason, on the
native path and on the Kubeflow path alike, and what was created is cleaned up; `run --target kubernetes`
plans on the cluster's own nodes when no --fleet is given.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from gpuplace.components.images import SERVING_IMAGE
from gpuplace.inventory import load_inventory
from gpuplace.jobs.cluster import cluster_inventory_file
from gpuplace.jobs.submit import compiled_path
from gpuplace.k8s import Api, DeployFailed, deploy_plan
from gpuplace.k8s.kfp_task import run_task_pod
from gpuplace.k8s.podfaults import PodFailed
from gpuplace.k8s.runtime import NoServeCheck
from gpuplace.testenv import ControlPlane
from tests.support.plans import rendered_plan_dir, sample_plan

pytestmark = [pytest.mark.integration, pytest.mark.controlplane]

H100 = load_inventory("h100-nvlink")


def test_an_unschedulable_pod_fails_fast_with_the_schedulers_reason_on_both_paths(
    kube_api: Api, kube_namespace: str, tmp_path: Path
) -> None:
    # 9 GPUs on one 8-GPU node: kube-scheduler says so, and the deploy must not wait out its 300 s.
    plan = sample_plan(plan_id="p-nine", name="nine", nodes=("h100-a-0",), gpus=9)
    planned = rendered_plan_dir(tmp_path / "nine", plan, H100, image=SERVING_IMAGE)
    for path in ("native", "kubeflow"):
        t0 = time.monotonic()
        with pytest.raises(DeployFailed) as failed:
            if path == "native":
                deploy_plan(
                    planned, api=kube_api, namespace=kube_namespace, timeout_s=300, runtime=NoServeCheck()
                )
            else:
                run_task_pod(
                    planned,
                    api=kube_api,
                    namespace=kube_namespace,
                    package=compiled_path("orchestration_comparison"),
                    runtime=NoServeCheck(),
                    timeout_s=300,
                )
        elapsed = time.monotonic() - t0
        assert elapsed < 60, f"{path}: took {elapsed:.0f} s"
        assert isinstance(failed.value.cause, PodFailed) and failed.value.cause.kind == "unschedulable"
        message = str(failed.value)
        assert (
            "cannot be scheduled (kube-scheduler: 0/" in message and "Insufficient nvidia.com/gpu" in message
        )
        assert kube_api.list("v1", "Pod", kube_namespace) == [] or all(
            p["metadata"].get("deletionTimestamp") for p in kube_api.list("v1", "Pod", kube_namespace)
        )


def test_a_kubernetes_run_plans_on_the_clusters_own_nodes(controlplane: ControlPlane, tmp_path: Path) -> None:
    spec = cluster_inventory_file(str(controlplane.kubeconfig), "", tmp_path / "inv.json")
    written = load_inventory(spec)
    names = {n.name for n in written.nodes}
    assert {n.name for n in H100.nodes} <= names and "l4-shared-0" in names  # the session's two fleets
    assert json.loads(Path(spec).read_text())["nodes"]
    # a fleet that matches is planned on as given
    assert (
        cluster_inventory_file(str(controlplane.kubeconfig), "h100-nvlink", tmp_path / "x.json")
        == "h100-nvlink"
    )
