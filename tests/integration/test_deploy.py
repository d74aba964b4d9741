"""The deploy step against the real local control plane (kube-apiserver, kube-scheduler,
kube-controller-manager, etcd; KWOK plays the kubelets of the simulated GPU nodes).

Plans here are hand-made (a real plan.json from tests.support.plans, with a Deployment pinned by
required node affinity, ``nvidia.com/gpu`` limits, the fleet's toleration) because what is tested is
the deploy step, not the planner. The deploy runs as the least-privilege ServiceAccount of
:mod:`gpuplace.k8s.rbac`, not as cluster-admin.
"""

from __future__ import annotations

import json
import math
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpuplace.cli import main
from gpuplace.k8s import (
    Api,
    DeployFailed,
    Forbidden,
    Invalid,
    Unreachable,
    connect,
    deploy_plan,
)
from gpuplace.k8s.rbac import deployer_rbac, service_account_kubeconfig
from gpuplace.k8s.runtime import NoServeCheck
from gpuplace.plandir import read_plan_dir
from gpuplace.testenv import ControlPlane
from gpuplace.types import DeploymentRecord
from tests.support.plans import sample_plan, write_sample_plan

pytestmark = [pytest.mark.integration, pytest.mark.controlplane]

H100_NODES = ("h100-a-0", "h100-a-1", "h100-b-0", "h100-b-1")  # bundled fleet h100-nvlink: 8 GPUs each


def write_plan(
    root: Path,
    *,
    plan_id: str,
    nodes: tuple[str, ...],
    gpus: int = 8,
    name: str = "llm",
    extra_docs: tuple[dict[str, Any], ...] = (),
    image: str = "vllm/vllm-openai:v0.34.0",
) -> Path:
    """A plan directory like the planner's: plan.json + manifests/ with a Deployment and a Service."""
    root.mkdir(parents=True, exist_ok=True)
    labels = {
        "app.kubernetes.io/name": name,
        "app.kubernetes.io/managed-by": "gpuplace",
        "gpuplace.io/plan-id": plan_id,
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": len(nodes),
            "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {
                                                "key": "kubernetes.io/hostname",
                                                "operator": "In",
                                                "values": list(nodes),
                                            }
                                        ]
                                    }
                                ]
                            }
                        },
                        "podAntiAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "labelSelector": {"matchLabels": {"app.kubernetes.io/name": name}},
                                    "topologyKey": "kubernetes.io/hostname",
                                }
                            ]
                        },
                    },
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [
                        {
                            "name": "server",
                            "image": image,
                            "ports": [{"containerPort": 8000}],
                            "resources": {
                                "limits": {"nvidia.com/gpu": str(gpus), "cpu": "8", "memory": "64Gi"},
                                "requests": {"nvidia.com/gpu": str(gpus), "cpu": "8", "memory": "64Gi"},
                            },
                        }
                    ],
                },
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": labels},
        "spec": {"selector": {"app.kubernetes.io/name": name}, "ports": [{"port": 8000, "targetPort": 8000}]},
    }
    plan = sample_plan(plan_id=plan_id, name=name, nodes=nodes, gpus=gpus)
    manifests = {"10-service.yaml": [service], "20-deployment.yaml": [deployment, *extra_docs]}
    write_sample_plan(root, plan, manifests)
    return root


@pytest.fixture
def deployer_kubeconfig(kube_api: Api, kube_namespace: str, tmp_path: Path) -> Path:
    """A kubeconfig for the deploy step's ServiceAccount (Role of gpuplace.k8s.rbac) in the test namespace."""
    for obj in deployer_rbac(kube_namespace):
        kube_api.apply(obj, kube_namespace)
    return service_account_kubeconfig(kube_api, kube_namespace, tmp_path / "deployer.kubeconfig")


def _deployment(api: Api, ns: str, name: str = "llm") -> dict[str, Any] | None:
    return api.get_or_none("apps/v1", "Deployment", name, ns)


def test_deploy_binds_pods_to_planned_nodes_as_least_privilege_sa(
    kube_api: Api,
    kube_namespace: str,
    deployer_kubeconfig: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    plan = write_plan(tmp_path / "plan", plan_id="p-ok", nodes=H100_NODES[:2])
    out = tmp_path / "out"
    kc = str(deployer_kubeconfig)
    ns = kube_namespace
    args = [
        "deploy",
        str(plan),
        "--target",
        "kubernetes",
        "--kubeconfig",
        kc,
        "--namespace",
        ns,
        "--out",
        str(out),
        "--gpu-api",
        "device-plugin",
        "--runtime",
        "none",  # KWOK runs no server here: the stand-in's own test serves
    ]
    assert main([*args, "--run-id", "run-1", "--timeout", "60"]) == 0
    record = DeploymentRecord.from_json_dict(json.loads((out / "deployment.json").read_text()))
    assert record.ready and record.target == "kubernetes" and record.plan_id == "p-ok"
    assert len(record.pods) == 2
    assert sorted(p.node for p in record.pods) == list(H100_NODES[:2])
    for pod in record.pods:
        assert pod.node == pod.planned_node  # kube-scheduler bound it where the plan said
        assert pod.phase == "Running"  # KWOK runs it
        assert pod.created_at_s <= pod.scheduled_at_s <= pod.ready_at_s
        assert pod.timing == "watch"
        # the device plugin does not say which GPUs: none are recorded as measured, the plan's are labelled
        assert pod.gpu_ids == () and pod.placement_level == "node" and pod.gpu_count == 8
        assert pod.planned_gpu_ids == tuple(f"{pod.node}/gpu{g}" for g in range(8))
        assert math.isnan(pod.provisioning_s)  # ready-to-serve not observed (--runtime none)
    assert record.mismatches() == ()
    assert record.gpu_api == "device-plugin" and record.serving is not None
    assert record.serving.replicas == 2 and record.serving.gpus_per_replica == 8
    assert record.endpoint == f"http://llm.{ns}.svc.cluster.local:8000"
    assert "provisioning: unknown (ready-to-serve was not observed)" in capsys.readouterr().out

    dep = _deployment(kube_api, ns)
    assert dep is not None
    assert dep["metadata"]["labels"]["gpuplace.io/run-id"] == "run-1"
    assert {m["manager"] for m in dep["metadata"]["managedFields"] if m["operation"] == "Apply"} == {
        "gpuplace"
    }

    # Re-applying the unchanged plan changes nothing on the server.
    version = dep["metadata"]["resourceVersion"], dep["metadata"]["generation"]
    assert main([*args, "--run-id", "run-1", "--timeout", "60"]) == 0
    dep = _deployment(kube_api, ns)
    assert dep is not None and (dep["metadata"]["resourceVersion"], dep["metadata"]["generation"]) == version

    # The identity is least-privilege: it may not even list nodes.
    sa_api = Api(connect(deployer_kubeconfig), timeout_s=5)
    with pytest.raises(Forbidden):
        sa_api.list("v1", "Node")

    # A pipeline's exit handler knows only the run id: as the deployer, it finds and deletes the run's objects
    # (the Role lets it list them; a refused list would fail the teardown, not read as "nothing left").
    assert main(["teardown", "--run-id", "run-1", "--kubeconfig", kc, "--namespace", ns]) == 0
    assert "deleted 2 objects" in capsys.readouterr().out
    assert _deployment(kube_api, ns) is None
    assert kube_api.get_or_none("v1", "Service", "llm", ns) is None
    assert kube_api.list("v1", "Pod", ns, label_selector="gpuplace.io/plan-id=p-ok") == []
    # Tearing down again is fine: 404 is success.
    assert main(["teardown", str(plan), "--kubeconfig", kc, "--namespace", ns]) == 0


def test_more_gpus_than_the_fleet_has_times_out_with_the_scheduler_reason_and_tears_down(
    kube_api: Api, kube_namespace: str, deployer_kubeconfig: Path, tmp_path: Path
) -> None:
    plan = read_plan_dir(write_plan(tmp_path / "plan", plan_id="p-big", nodes=H100_NODES[:1], gpus=9))
    api = Api(connect(deployer_kubeconfig))
    t0 = time.monotonic()
    with pytest.raises(DeployFailed) as info:
        deploy_plan(
            plan,
            api=api,
            namespace=kube_namespace,
            timeout_s=8,
            on_failure="teardown",
            runtime=NoServeCheck(),
        )
    assert time.monotonic() - t0 < 30
    message = str(info.value)
    assert "0 of 1 pods" in message and "ready within 8 s" in message
    assert "Insufficient nvidia.com/gpu" in message  # kube-scheduler's own words
    assert "Tore down what was applied" in info.value.cleanup
    assert _deployment(kube_api, kube_namespace) is None
    assert kube_api.get_or_none("v1", "Service", "llm", kube_namespace) is None


def test_failed_update_rolls_back_to_the_running_version(
    kube_api: Api, kube_namespace: str, deployer_kubeconfig: Path, tmp_path: Path
) -> None:
    api = Api(connect(deployer_kubeconfig))
    good = read_plan_dir(write_plan(tmp_path / "good", plan_id="p-v1", nodes=H100_NODES[2:3], gpus=4))
    none = NoServeCheck()
    deploy_plan(good, api=api, namespace=kube_namespace, timeout_s=60, gpu_api="device-plugin", runtime=none)
    bad = read_plan_dir(write_plan(tmp_path / "bad", plan_id="p-v2", nodes=H100_NODES[2:3], gpus=16))
    with pytest.raises(DeployFailed) as info:
        deploy_plan(bad, api=api, namespace=kube_namespace, timeout_s=6, on_failure="rollback", runtime=none)
    assert "Rolled back: restored Deployment/llm" in info.value.cleanup
    dep = _deployment(kube_api, kube_namespace)
    assert dep is not None
    limits = dep["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == "4"
    assert dep["metadata"]["labels"]["gpuplace.io/plan-id"] == "p-v1"
    # and it is whole again
    record = deploy_plan(
        good, api=api, namespace=kube_namespace, timeout_s=60, gpu_api="device-plugin", runtime=none
    )
    assert [p.node for p in record.pods] == [H100_NODES[2]]
    from gpuplace.k8s import teardown_plan

    teardown_plan(good, api=api, namespace=kube_namespace)


def test_invalid_manifest_is_rejected_and_nothing_is_applied(
    kube_api: Api,
    kube_namespace: str,
    deployer_kubeconfig: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    broken = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "broken"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "broken"}},
            "template": {
                "metadata": {"labels": {"app": "other"}},
                "spec": {"containers": [{"name": "Bad_Name"}]},
            },
        },
    }
    plan = write_plan(tmp_path / "plan", plan_id="p-bad", nodes=H100_NODES[:1], extra_docs=(broken,))
    code = main(
        [
            "deploy",
            str(plan),
            "--kubeconfig",
            str(deployer_kubeconfig),
            "--namespace",
            kube_namespace,
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "Deployment/broken" in err and "Invalid" in err
    # The Service and the good Deployment come before it in apply order, and neither was applied.
    assert kube_api.get_or_none("v1", "Service", "llm", kube_namespace) is None
    assert _deployment(kube_api, kube_namespace) is None
    api = Api(connect(deployer_kubeconfig))
    with pytest.raises(Invalid) as info:
        deploy_plan(read_plan_dir(plan), api=api, namespace=kube_namespace, timeout_s=20)
    assert any("spec.template.spec.containers[0].name" in c for c in info.value.causes)


def test_missing_namespace_is_bad_input(kube_api: Api, tmp_path: Path, controlplane: ControlPlane) -> None:
    plan = write_plan(tmp_path / "plan", plan_id="p-ns", nodes=H100_NODES[:1])
    from gpuplace.errors import InvalidInput

    with pytest.raises(InvalidInput, match=r"namespace='does-not-exist': does not exist.*--create-namespace"):
        deploy_plan(read_plan_dir(plan), api=kube_api, namespace="does-not-exist", timeout_s=20)
    assert kube_api.get_or_none("v1", "Namespace", "does-not-exist") is None  # not created unasked
    ns = f"created-{time.monotonic_ns() % 100000}"
    try:
        record = deploy_plan(
            read_plan_dir(plan),
            api=kube_api,
            namespace=ns,
            timeout_s=60,
            create_namespace=True,
            runtime=NoServeCheck(),
        )
        assert record.pods and kube_api.get_or_none("v1", "Namespace", ns) is not None
    finally:
        kube_api.delete({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})


def test_wrong_kubeconfig_and_unreachable_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = write_plan(tmp_path / "plan", plan_id="p-x", nodes=H100_NODES[:1])
    assert main(["deploy", str(plan), "--kubeconfig", str(tmp_path / "nope"), "--out", str(tmp_path)]) == 2
    assert "kubeconfig=" in capsys.readouterr().err
    from gpuplace.testenv.controlplane import free_port

    dead = tmp_path / "dead.kubeconfig"
    dead.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "c",
                "clusters": [{"name": "k", "cluster": {"server": f"https://127.0.0.1:{free_port()}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
            }
        )
    )
    t0 = time.monotonic()
    with pytest.raises(Unreachable, match="API server unreachable"):
        deploy_plan(read_plan_dir(plan), api=Api(connect(dead)), namespace="default", timeout_s=3)
    assert time.monotonic() - t0 < 6
    assert (
        main(["deploy", str(plan), "--kubeconfig", str(dead), "--timeout", "2", "--out", str(tmp_path)]) == 2
    )
    assert "unreachable" in capsys.readouterr().err


def test_wait_survives_an_apiserver_restart(
    controlplane: ControlPlane, kube_api: Api, kube_namespace: str, tmp_path: Path
) -> None:
    node = H100_NODES[3]
    blocker = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "blocker"},
        "spec": {
            "nodeName": node,
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "8"}}}],
        },
    }
    kube_api.create(blocker, kube_namespace)
    plan = read_plan_dir(write_plan(tmp_path / "plan", plan_id="p-restart", nodes=(node,)))
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["record"] = deploy_plan(
                plan,
                api=Api(connect(controlplane.kubeconfig)),
                namespace=kube_namespace,
                timeout_s=90,
                gpu_api="device-plugin",
                runtime=NoServeCheck(),
            )
        except Exception as e:  # reported below
            result["error"] = e

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 20
    while _deployment(kube_api, kube_namespace) is None and time.monotonic() < deadline:
        time.sleep(0.1)
    down_s = controlplane.restart("kube-apiserver")
    assert down_s > 0
    assert thread.is_alive(), "the deploy finished while its GPUs were still taken"
    kube_api.delete(blocker, kube_namespace)  # frees the GPUs: now the rollout can complete
    thread.join(100)
    assert "error" not in result, result.get("error")
    record = result["record"]
    assert [p.node for p in record.pods] == [node]
    from gpuplace.k8s import teardown_plan

    teardown_plan(plan, api=kube_api, namespace=kube_namespace)
