"""Pods in real containers on the real testenv node (containerd + runc + kubelet: `realnode_controlplane`).

- Components in their image: `discover_inventory` and `plan_placement` run in the components image that
  `make images` built (no torch in it), each with the container command and args of the checked-in compiled
  pipeline YAML and an executor input, as KFP's launcher would start them, and their outputs are read back
  from the artifact paths (a hostPath stands for the pipeline root's bucket). KFP's launcher binary itself
  cannot be had here (no image registry): `gpuplace.manifests.launcher` does its part (resolving `{{$}}`,
  running the component's command); no upload, no ML Metadata.
- Faults, each through `deploy_plan` as a user would deploy: an image that is not on the node fails the
  deploy at once, naming the image and `make images`; a crashing container is reported as CrashLoopBackOff
  with its last log lines and the deploy is rolled back; a pod that never gets Ready fails at the deadline.
  Each test checks that what the deploy applied is gone. The images are made here (busybox from Debian).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuplace.jobs.submit import compiled_path
from gpuplace.k8s import Api, DeployFailed, connect, deploy_plan
from gpuplace.k8s.podfaults import PodFailed, container_logs
from gpuplace.k8s.provisioning import ProvisioningTimeout
from gpuplace.k8s.runtime import NoServeCheck
from gpuplace.manifests.kfp_package import find_task, load_package
from gpuplace.manifests.kfp_pod import kfp_task_pod
from gpuplace.manifests.launcher import executor_input, launched_pod
from gpuplace.testenv import ControlPlane
from gpuplace.testenv.localimages import busybox_image
from gpuplace.testenv.realnode import RealNode, built_image_archives
from tests.support.plans import sample_plan, write_sample_plan

pytestmark = [pytest.mark.integration, pytest.mark.controlplane, pytest.mark.realnode]

COMPONENTS = "gpuplace-components"


@pytest.fixture(scope="module")
def node_api(realnode_controlplane: ControlPlane) -> Iterator[tuple[Api, RealNode]]:
    node = RealNode.load(realnode_controlplane.state_dir)
    assert node is not None
    api = Api(connect(realnode_controlplane.kubeconfig))
    yield api, node
    api.client.close()


def _components_image() -> str:
    tags = [t for t in built_image_archives() if f"/{COMPONENTS}:" in t]
    if not tags:
        pytest.fail("the components image is not built: run `IMAGES=components make images`", pytrace=False)
    return tags[0]


def _wait_done(api: Api, name: str, timeout_s: float = 300.0) -> dict[str, Any]:
    end = time.monotonic() + timeout_s
    while True:
        pod = api.get("v1", "Pod", name, "default")
        if pod["status"].get("phase") in ("Succeeded", "Failed"):
            return pod
        assert time.monotonic() < end, f"{name}: {pod['status']}"
        time.sleep(0.5)


def _run_component(
    api: Api, node: RealNode, pipeline: str, task: str, parameters: dict[str, Any], root: Path, **inputs: str
) -> dict[str, Any]:
    """Run ``task`` of the compiled ``pipeline`` on the real node in the components image, with its input
    ``parameters`` as the driver would resolve them (the pipeline's defaults otherwise)."""
    package = compiled_path(pipeline)
    spec, _platform = load_package(package)
    task_spec, _chain = find_task(spec, task)
    component = spec["components"][task_spec["componentRef"]["name"]]
    name = f"c-{task}"[:63]
    built = kfp_task_pod(package, task, pod_name=name)
    executor = executor_input(
        component, {**built.parameters, **parameters}, root_uri=f"gs://root/{task}", input_artifacts=inputs
    )
    pod = launched_pod(built.pod, executor, image=_components_image())
    pod["spec"]["nodeName"] = node.name
    # The pipeline root's bucket (/gcs in the pod) is a directory of this machine, so outputs can be read.
    pod["spec"]["volumes"] = [v for v in pod["spec"]["volumes"] if v["name"] != "gcs-scratch"] + [
        {"name": "gcs-scratch", "hostPath": {"path": str(root), "type": "Directory"}}
    ]
    api.create(pod, "default")
    done = _wait_done(api, name)
    logs = container_logs(api, done, "main", previous=False)
    api.delete(pod, "default")
    (status,) = done["status"]["containerStatuses"]
    assert done["status"]["phase"] == "Succeeded", f"{task}: {status['state']}\n{logs}"
    assert status["image"] == _components_image()
    return done


def test_components_run_in_their_image_as_the_launcher_would_start_them(
    node_api: tuple[Api, RealNode], tmp_path: Path
) -> None:
    api, node = node_api
    root = tmp_path / "bucket"
    root.mkdir(mode=0o777)
    root.chmod(0o777)  # the components run as user 10001
    _run_component(api, node, "llm_placement", "discover-inventory", {"source": "h100-nvlink"}, root)
    inventory = json.loads((root / "root" / "discover-inventory" / "inventory").read_text())
    assert inventory["source"] == "h100-nvlink" and len(inventory["nodes"]) == 4
    arguments = {
        "model": "tiny",
        "slo_tpot_ms": 50.0,
        "slo_ttft_ms": 2000.0,
        "rate": 2.0,
        "inventory": "h100-nvlink",
    }
    _run_component(
        api,
        node,
        "llm_placement",
        "plan-placement",
        arguments,
        root,
        inventory_json="gs://root/discover-inventory/inventory",
    )
    plan_dir = root / "root" / "plan-placement" / "plan"
    plan = json.loads((plan_dir / "plan.json").read_text())
    assert plan["model"] == "tiny" and plan["placements"]
    assert {p["node"] for p in plan["placements"]} <= {n["name"] for n in inventory["nodes"]}


def _busybox_plan(tmp_path: Path, node: str, name: str, container: dict[str, Any]) -> Any:
    plan = sample_plan(plan_id=f"p-{name}", name=name, nodes=(node,), gpus=1)
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "nodeSelector": {"kubernetes.io/hostname": node},
                    "containers": [{"name": "server", "imagePullPolicy": "Never", **container}],
                },
            },
        },
    }
    return write_sample_plan(tmp_path / name, plan, {"deployment.yaml": [deployment]})


def _nothing_left(api: Api, name: str) -> None:
    assert api.get_or_none("apps/v1", "Deployment", name, "default") is None
    end = time.monotonic() + 60
    while api.list("v1", "Pod", "default", label_selector=f"app={name}") and time.monotonic() < end:
        time.sleep(0.5)
    assert api.list("v1", "Pod", "default", label_selector=f"app={name}") == []


def _failed_deploy(
    api: Api, planned: Any, *, timeout_s: float = 300, on_failure: str = "teardown"
) -> DeployFailed:
    """Deploy ``planned`` as `gpuplace deploy` would (ready-to-serve not observed); how it failed."""
    with pytest.raises(DeployFailed) as failed:
        deploy_plan(
            planned,
            api=api,
            namespace="default",
            timeout_s=timeout_s,
            runtime=NoServeCheck(),
            gpu_api="device-plugin",
            on_failure=on_failure,
        )
    return failed.value


CRASH = "echo model file missing: /models/x; exit 3"
PROBE = {"httpGet": {"path": "/health", "port": 8080}, "periodSeconds": 1}  # as the serving pods have


@pytest.mark.parametrize(
    ("name", "container", "on_failure", "kind", "said", "cleanup"),
    [
        # an image that is not on the node: named, with the command that builds it; torn down
        (
            "absent",
            {"image": "gpuplace.local/absent:1"},
            "teardown",
            "image",
            ("gpuplace.local/absent:1", "make images"),
            "Tore down",
        ),
        # a crashing container: CrashLoopBackOff with its last log lines; rolled back
        (
            "crash",
            {"command": ["/bin/sh", "-c", CRASH]},
            "rollback",
            "crashloop",
            ("CrashLoopBackOff", "model file missing: /models/x"),
            "Rolled back",
        ),
    ],
)
def test_a_pod_that_will_not_serve_fails_the_deploy_at_once_and_leaves_nothing(
    node_api: tuple[Api, RealNode],
    tmp_path: Path,
    name: str,
    container: dict[str, Any],
    on_failure: str,
    kind: str,
    said: tuple[str, ...],
    cleanup: str,
) -> None:
    api, node = node_api
    planned = _busybox_plan(tmp_path, node.name, name, {"image": busybox_image(), **container})
    t0 = time.monotonic()
    failed = _failed_deploy(api, planned, on_failure=on_failure)
    assert time.monotonic() - t0 < 150  # not the 300 s deadline
    assert isinstance(failed.cause, PodFailed) and failed.cause.kind == kind
    assert all(s in str(failed) for s in said), str(failed)
    assert cleanup in failed.cleanup
    _nothing_left(api, name)


def test_a_pod_that_never_gets_ready_fails_at_the_deadline(
    node_api: tuple[Api, RealNode], tmp_path: Path
) -> None:
    api, node = node_api
    never = {
        "image": busybox_image(),
        "command": ["/bin/sh", "-c", "exec /bin/busybox sleep 3600"],
        "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1},
    }
    planned = _busybox_plan(tmp_path, node.name, "never", never)
    failed = _failed_deploy(api, planned, timeout_s=20)
    assert isinstance(failed.cause, ProvisioningTimeout)
    assert "0 of 1 pods in default ready within 20 s" in str(failed)
    _nothing_left(api, "never")
