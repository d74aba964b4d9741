"""A plan for this machine served on the testenv's real node, without a cluster: the objects the plan
writes for the node (strictly valid, pinned to it, in the CPU serving image, the model built in the
container), the Kubeflow path's task pod serving the same container, the serving spec read back from
either pod equal to the plan's (so the comparison does not refuse them), the images pointed at their local
builds, the provisioning split of a pod record, and the runtime that sends a real-node pod's first request
to its pod IP (a real HTTP server on this machine stands in for the pod's server: no container runs here).
"""

from __future__ import annotations

import json
import math
import threading
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import kubernetes_validate

from gpuplace.components.images import CPU_IMAGE
from gpuplace.deploy.standin import STANDIN, LocalStandIn
from gpuplace.deploy.testenv_runtime import TestenvRuntime, local_build_of, with_local_images
from gpuplace.inventory import load_inventory
from gpuplace.k8s.kfp_task import spec_of_task_pod
from gpuplace.k8s.measure import spec_of_pods
from gpuplace.manifests.kfp_pod import kfp_task_pod
from gpuplace.manifests.local import (
    MODEL_DIR,
    local_kfp_fragments,
    local_serving_spec,
    node_manifests,
    serving_task_pod,
)
from gpuplace.plandir import read_plan_dir, write_plan_dir
from gpuplace.planner.engine import transformers_engine_params
from gpuplace.planner.local import LocalTarget, plan_local
from gpuplace.types import PodRecord
from gpuplace.types.plan import PlacementPlan
from tests.unit.test_plan_local import _capacity, _profile, _request

NODE = "vm"
LOCAL_CPU = "gpuplace.local/gpuplace-cpu:0.1.0-debian-bookworm"


def _plan() -> PlacementPlan:
    from gpuplace.catalog import model_arch_from_config, resolve_model

    arch = model_arch_from_config("tiny", resolve_model("tiny").config)
    engine = transformers_engine_params(arch, memory_gib=0.0, num_blocks=512)
    target = LocalTarget(node=NODE, unit="cpu", steps=_profile(), engine=engine)
    plan = plan_local(arch, target, _request(0.3 * _capacity(target)))
    return replace(plan, serving=local_serving_spec(plan, CPU_IMAGE))


def _pod_of(deployment: dict[str, Any], name: str = "p-0") -> dict[str, Any]:
    template = deployment["spec"]["template"]
    return {
        "metadata": {"name": name, **template["metadata"]},
        "spec": {**template["spec"], "nodeName": NODE},
    }


def _task_pod(plan: PlacementPlan) -> dict[str, Any]:
    from gpuplace.k8s.kfp_task import plan_outputs
    from gpuplace.plandir import PlanDir
    from gpuplace.steps.serve_and_loadtest import compiled_package

    planned = PlanDir(Path("."), plan, (), local_kfp_fragments(plan))
    built = kfp_task_pod(
        compiled_package("orchestration_comparison"),
        "serve-and-load-test",
        task_outputs={"plan-placement": plan_outputs(planned), "repeat-runs": {"Output": [0]}},
        pod_name="t-0",
    )
    assert plan.serving is not None
    pod: dict[str, Any] = serving_task_pod(built.pod, plan.serving)
    return pod


def test_a_local_plan_writes_a_deployment_for_the_node_named_like_this_machine(tmp_path: Path) -> None:
    plan = _plan()
    files = node_manifests(plan)
    (deployment,), (service,) = files["10-deployment.yaml"], files["20-service.yaml"]
    for doc in (deployment, service):
        kubernetes_validate.validate(doc, "1.34.0", strict=True)
    pod = deployment["spec"]["template"]["spec"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == [NODE]
    (container,) = pod["containers"]
    assert container["image"] == CPU_IMAGE and container["readinessProbe"]["httpGet"]["path"] == "/health"
    script = container["command"][2]
    # the model is built in the container, by the image's gpuplace
    assert "build_model_dir(sys.argv[1], Path(sys.argv[2]))' tiny /cache/model &&" in script
    assert "exec transformers serve /cache/model" in script
    assert plan.serving is not None and container["args"] == list(plan.serving.args)
    # the plan directory keeps them, and the KFP placement pins the task to the same node
    write_plan_dir(
        tmp_path, plan, manifests=files, alternatives={}, kfp=local_kfp_fragments(plan), candidates_md=""
    )
    back = read_plan_dir(tmp_path)
    assert [m["kind"] for m in back.manifests] == ["Deployment", "Service"]
    assert back.kfp["node_affinity"] == pod["affinity"]["nodeAffinity"]


def test_both_paths_pods_read_back_the_plans_spec() -> None:
    plan = _plan()
    assert plan.serving is not None
    (deployment,) = node_manifests(plan)["10-deployment.yaml"]
    native = spec_of_pods(plan.serving, [_pod_of(deployment)], {})
    task = _task_pod(plan)
    kubeflow = spec_of_task_pod(plan.serving, [task], {})
    assert native == kubeflow == plan.serving
    main = next(c for c in task["spec"]["containers"] if c["name"] == "main")
    assert "initContainers" not in task["spec"] and main["image"] == CPU_IMAGE
    assert any(e["name"] == "NODE_NAME" for e in main["env"])  # the driver's downward-API env is kept
    assert {v["name"] for v in task["spec"]["volumes"]} >= {"cache", "tmp"}


def test_the_plans_images_run_as_their_local_builds(tmp_path: Path) -> None:
    built = {
        LOCAL_CPU: tmp_path / "cpu.tar",
        "gpuplace.local/gpuplace-components:0.1.0-x": tmp_path / "c.tar",
    }
    assert local_build_of(CPU_IMAGE, built) == LOCAL_CPU
    assert local_build_of("ghcr.io/gpuplace/gpuplace-vllm:0.1.0", built) == ""
    assert local_build_of("vllm/vllm-openai:v0.34.0", built) == ""
    plan = _plan()
    files = node_manifests(plan)
    planned = write_plan_dir(tmp_path / "p", plan, manifests=files, alternatives={}, kfp={}, candidates_md="")
    mapped, notes = with_local_images(planned, built)
    (container,) = mapped.manifests[0]["spec"]["template"]["spec"]["containers"]
    assert container["image"] == LOCAL_CPU and container["imagePullPolicy"] == "Never"
    assert mapped.serving.image == LOCAL_CPU and notes and CPU_IMAGE in notes[0]
    assert with_local_images(planned, {}) == (planned, ())  # nothing built: left as it is


def test_a_pod_records_provisioning_split_into_its_stages() -> None:
    pod = PodRecord(
        "p",
        created_at_s=100.0,
        scheduled_at_s=100.5,
        image_at_s=101.0,
        running_at_s=103.0,
        serving_at_s=140.0,
    )
    assert (pod.scheduling_s, pod.image_s, pod.container_start_s, pod.server_start_s) == (0.5, 0.5, 2.0, 37.0)
    assert pod.scheduling_s + pod.image_s + pod.container_start_s + pod.server_start_s == pod.provisioning_s
    early = replace(pod, image_at_s=100.0)  # the event's 1 s stamp rounds below the scheduling
    assert early.image_s == 0.0 and early.container_start_s == 2.5
    kwok = replace(pod, image_at_s=math.nan)  # no kubelet: no image stage
    assert math.isnan(kwok.image_s) and kwok.container_start_s == 2.5
    from gpuplace.types import DeploymentRecord

    record = DeploymentRecord("kubernetes", "d", "ns", "", "tiny", True, pods=(replace(pod, runtime="x"),))
    back = DeploymentRecord.from_json_dict(json.loads(json.dumps(record.to_json_dict())))
    assert back.pods[0] == replace(pod, runtime="x")
    from gpuplace.deploy import format_record, provisioning_split

    pods = (replace(pod, runtime="containerd/runc"), replace(kwok, name="k", runtime="s"))
    real = replace(record, pods=pods)
    (line,) = provisioning_split(real)  # the KWOK pod ran no container: no split
    assert line == (
        "p (containerd/runc): scheduling 0.50 s, image 0 s (1 s events), container start 2.00 s, "
        "server start 37.00 s"
    )
    assert line in format_record(real)


class _Completions(BaseHTTPRequestHandler):
    asked: ClassVar[list[str]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Completions.asked.append(body["model"])
        data = json.dumps({"choices": [{"text": "x"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        return None


def test_a_real_node_pod_is_served_by_its_container_and_others_by_the_standin(tmp_path: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Completions)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    started: list[str] = []

    def start(*args: Any) -> Any:  # the stand-in must not be asked for the real node's pod
        started.append(str(args))
        raise AssertionError("the stand-in started a server")

    runtime = TestenvRuntime(LocalStandIn("tiny", workdir=tmp_path, start=start), NODE)
    (deployment,) = node_manifests(_plan())["10-deployment.yaml"]
    pod = _pod_of(deployment)
    pod["metadata"]["uid"] = "u1"
    pod["spec"]["containers"][0]["ports"][0]["containerPort"] = server.server_address[1]
    pod["status"] = {"podIP": "127.0.0.1"}
    kwok = {"metadata": {"name": "k", "uid": "u2"}, "spec": {"nodeName": "h100-a-0"}, "status": {}}
    try:
        served: bool | float = False
        for _ in range(200):
            served = runtime.serve_check(pod)
            if served:
                break
            threading.Event().wait(0.05)
        assert served and _Completions.asked == [MODEL_DIR] and not started
        assert runtime.endpoint_of(pod) == f"http://127.0.0.1:{server.server_address[1]}"
        assert runtime.runtime_of(pod) == "containerd/runc" and runtime.served_on() == ""
        assert runtime.runtime_of(kwok) == STANDIN and runtime.name == f"containerd/runc + {STANDIN}"
        assert runtime.model_of(kwok) == "" and runtime.endpoint_of(kwok) == ""
    finally:
        runtime.close()
        server.shutdown()


def test_the_kubernetes_run_plans_the_local_shape_on_the_node_named_like_this_machine() -> None:
    from gpuplace.testenv.realnode import node_name

    assert load_inventory("local").nodes[0].name == node_name()
