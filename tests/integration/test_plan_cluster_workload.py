"""A plan against the live local control plane measures fragmentation against the pods running in it.

GPU pods are created and run (kube-scheduler binds them, KWOK runs them); ``gpuplace plan --inventory
cluster`` then reads the cluster's nodes and pods, and plan.json names "cluster pods" as the workload
with those pods' shapes (GPUs, CPU, GPU type) among its classes (issue 13)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from gpuplace import labels as L
from gpuplace.cli import main
from gpuplace.k8s import Api
from gpuplace.testenv.controlplane import ControlPlane

pytestmark = [pytest.mark.integration, pytest.mark.controlplane]


def workload_pod(name: str, gpus: int, cpu: str, product: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "tolerations": [{"operator": "Exists"}],
        "containers": [
            {
                "name": "c",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {
                    "requests": {"cpu": cpu, "nvidia.com/gpu": str(gpus)},
                    "limits": {"nvidia.com/gpu": str(gpus)},
                },
            }
        ],
    }
    if product:
        spec["nodeSelector"] = {L.PRODUCT: product}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def wait_running(api: Api, namespace: str, names: list[str], timeout_s: float = 90) -> None:
    end = time.monotonic() + timeout_s
    while True:
        pods = {p["metadata"]["name"]: p for p in api.list("v1", "Pod", namespace)}
        phases = {n: (pods.get(n) or {}).get("status", {}).get("phase") for n in names}
        if all(phase == "Running" for phase in phases.values()):
            return
        assert time.monotonic() < end, f"pods not running: {phases}"
        time.sleep(0.25)


def test_plan_on_a_live_cluster_uses_its_running_pods_as_the_workload(
    controlplane: ControlPlane,
    kube_api: Api,
    kube_namespace: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gpu_nodes = [n for n in kube_api.list("v1", "Node") if L.PRODUCT in n["metadata"].get("labels", {})]
    product = gpu_nodes[0]["metadata"]["labels"][L.PRODUCT]
    pods = [workload_pod(f"one-{i}", 1, "3300m") for i in range(4)]
    pods += [workload_pod(f"two-{i}", 2, "5700m", product) for i in range(2)]
    for pod in pods:
        kube_api.apply(pod, kube_namespace)
    wait_running(kube_api, kube_namespace, [p["metadata"]["name"] for p in pods])

    monkeypatch.setenv("KUBECONFIG", str(controlplane.kubeconfig))
    plan_dir = tmp_path / "plan"
    args = ["plan", "--model", "tiny", "--inventory", "cluster"]  # GPU-class defaults: no profile needed
    args += ["--slo-tpot-ms", "50", "--slo-ttft-ms", "500", "--rate", "20", "--out", str(plan_dir)]
    assert main(args) == 0

    workload = json.loads((plan_dir / "plan.json").read_text())["fragmentation_workload"]
    assert workload["source"] == "cluster pods"
    assert workload["tasks"] >= len(pods)
    classes = {
        (c["num_gpu"], c["gpu_milli"], c["cpu_milli"], tuple(c["gpu_types"])) for c in workload["classes"]
    }
    assert (1, 1000, 3300, ()) in classes
    assert (2, 1000, 5700, (product,)) in classes
    effect = workload["effect"]
    assert effect["with_fragmentation"] and effect["usable_gpus_after_with"] is not None
