"""Pods in real containers on the real testenv node (containerd + runc + kubelet: `realnode_controlplane`).

- Every component in its image: each of the ten components of the two compiled pipelines (profile, inventory,
  plan, repeat runs, load test, compare, track, deploy, teardown, serve-and-load-test) runs on the real node
  in the image its compiled pipeline YAML names, as `make images` built it, with the YAML's container command
  and args and an executor input, as KFP's launcher would start it; its outputs are read back from the
  artifact paths (a hostPath stands for the pipeline root's bucket) and checked. Two images stand in: the
  CPU image for the CUDA one (profiling; no GPU here) and for the vLLM one (serve-and-load-test; the vLLM
  image cannot be built on this disk, images/README.md). KFP's launcher binary itself cannot be had here (no
  image registry): `gpuplace.manifests.launcher` does its part (resolving `{{$}}`, running the component's
  command); no upload, no ML Metadata. The load test, compare and track tasks read the synthetic sample
  (tests.support.sample) and load-test the fault-injecting test server on the node's gateway (what is
  tested is the component in its image; real servers are load-tested in test_realnode_serving.py). Deploy
  and teardown run as the least-privilege deployer ServiceAccount (`gpuplace rbac`), in-cluster.
- Faults, each through `deploy_plan` as a user would deploy: an image that is not on the node fails the
  deploy at once, naming the image and `make images`; a crashing container is reported as CrashLoopBackOff
  with its last log lines and the deploy is rolled back; a pod that never gets Ready fails at the deadline.
  Each test checks that what the deploy applied is gone. The images are made here (busybox from Debian).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from gpuplace.deploy.testenv_runtime import local_build_of
from gpuplace.jobs.submit import compiled_path
from gpuplace.k8s import Api, DeployFailed, connect, deploy_plan, teardown_plan
from gpuplace.k8s.kfp_task import plan_outputs
from gpuplace.k8s.podfaults import PodFailed, container_logs
from gpuplace.k8s.provisioning import ProvisioningTimeout
from gpuplace.k8s.rbac import SERVICE_ACCOUNT, deployer_rbac
from gpuplace.k8s.runtime import NoServeCheck
from gpuplace.manifests.kfp_package import find_task, load_package
from gpuplace.manifests.kfp_pod import kfp_task_pod
from gpuplace.manifests.launcher import executor_input, launched_pod
from gpuplace.plandir import read_plan_dir
from gpuplace.testenv import ControlPlane, nodeclean
from gpuplace.testenv.localimages import busybox_image
from gpuplace.testenv.realnode import GATEWAY, KUBERNETES_SERVICE_IP, RealNode, built_images
from tests.support.plans import local_plan_dir, sample_plan, write_sample_plan
from tests.support.sample import write_sample_inputs
from tests.support.testserver import FaultServer, ServerOptions

pytestmark = [
    pytest.mark.integration,
    pytest.mark.controlplane,
    pytest.mark.realnode,
    pytest.mark.usefixtures("real_node_slot"),
]

# The image the compiled YAML names → the one that runs here in its place (no GPU; no vLLM image).
STANDS_IN = {"gpuplace-cuda": "gpuplace-cpu", "gpuplace-vllm": "gpuplace-cpu"}


@pytest.fixture(scope="module")
def node_api(realnode_controlplane: ControlPlane) -> Iterator[tuple[Api, RealNode]]:
    node = RealNode.load(realnode_controlplane.state_dir)
    assert node is not None
    api = Api(connect(realnode_controlplane.kubeconfig))
    yield api, node
    api.client.close()


@pytest.fixture
def bucket(tmp_path: Path) -> Path:
    """The pipeline root's bucket: ``gs://root/...`` is ``/gcs/root/...`` in the pod, ``<bucket>/root/...``
    here. The components run as user 10001."""
    root = _open_dir(tmp_path / "bucket")
    _open_dir(root / "root")
    return root


def local_image(compiled: str) -> str:
    """The image `make images` built for ``compiled`` (the YAML's ``ghcr.io/gpuplace/<name>:<version>``),
    or for the one that stands in for it here."""
    repo, _, version = compiled.rpartition(":")
    name = repo.rsplit("/", 1)[-1]
    wanted = f"{repo.rsplit('/', 1)[0]}/{STANDS_IN.get(name, name)}:{version}"
    found = local_build_of(wanted, built_images())
    if not found:
        pytest.fail(f"no local build of {wanted}: run `make test-images`", pytrace=False)
    return found


def _open_dir(path: Path) -> Path:
    """A folder the components (user 10001) may write into."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o777)
    return path


def _wait_done(api: Api, name: str, timeout_s: float) -> dict[str, Any]:
    end = time.monotonic() + timeout_s
    while True:
        pod = api.get("v1", "Pod", name, "default")
        if pod["status"].get("phase") in ("Succeeded", "Failed"):
            return pod
        assert time.monotonic() < end, f"{name}: {pod['status']}"
        time.sleep(0.5)


def _run_component(
    api: Api,
    node: RealNode,
    pipeline: str,
    task: str,
    parameters: dict[str, Any],
    bucket: Path,
    *,
    planned: Path | None = None,
    service_account: str = "",
    timeout_s: float = 300.0,
    artifacts: dict[str, str | list[str]] | None = None,
) -> tuple[Path, str]:
    """Run ``task`` of the compiled ``pipeline`` on the real node in its image, with its input
    ``parameters`` as the driver would resolve them (the pipeline's defaults otherwise) and the input
    ``artifacts`` (``gs://root/...`` URIs; a list for a loop's collected outputs); ``planned`` (a plan
    directory here) gives what plan-placement output to the tasks after it. Its outputs folder in the
    bucket, and its log."""
    package = compiled_path(pipeline)
    spec, _platform = load_package(package)
    task_spec, _chain = find_task(spec, task)
    component = spec["components"][task_spec["componentRef"]["name"]]
    name = f"c-{task}"[:63]
    outputs = None
    if planned is not None:  # and the loop over runs, in its first iteration
        outputs = {"plan-placement": plan_outputs(read_plan_dir(planned)), "repeat-runs": {"Output": [1]}}
    built = kfp_task_pod(package, task, pod_name=name, task_outputs=outputs, service_account=service_account)
    executor = executor_input(
        component,
        {**built.parameters, **parameters},
        root_uri=f"gs://root/{task}",
        input_artifacts=artifacts or {},
        output_dir=f"/gcs/root/{task}/parameters",
    )
    (main,) = [c for c in built.pod["spec"]["containers"] if c["name"] == "main"]
    image = local_image(main["image"])
    pod = launched_pod(built.pod, executor, image=image)
    pod["spec"]["nodeName"] = node.name
    # The pipeline root's bucket (/gcs in the pod) is a directory of this machine, so outputs can be read.
    pod["spec"]["volumes"] = [v for v in pod["spec"]["volumes"] if v["name"] != "gcs-scratch"] + [
        {"name": "gcs-scratch", "hostPath": {"path": str(bucket), "type": "Directory"}}
    ]
    out = _open_dir(bucket / "root" / task)
    api.create(pod, "default")
    done = _wait_done(api, name, timeout_s)
    logs = container_logs(api, done, "main", previous=False)
    api.delete(pod, "default")
    (status,) = done["status"]["containerStatuses"]
    routes = "\n".join(nodeclean.service_routes(f"{KUBERNETES_SERVICE_IP}:443"))
    assert done["status"]["phase"] == "Succeeded", (
        f"{task}: {status['state']}\n{logs}\nthe kubernetes Service's routes, first matched first:\n{routes}"
    )
    assert status["image"] == image
    return out, logs


def _in_bucket(bucket: Path, source: Path, name: str) -> str:
    """Copy ``source`` (a file or folder made here) into the bucket; its ``gs://`` URI."""
    target = bucket / "root" / "inputs" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    (shutil.copytree if source.is_dir() else shutil.copyfile)(source, target)
    return f"gs://root/inputs/{name}"


def test_the_node_holds_its_images_unpacked_without_archives_or_layer_blobs(
    node_api: tuple[Api, RealNode],
) -> None:
    """The images came from buildah's storage as a stream: no archive in the images cache, and none of their
    layer blobs left in containerd's content store (a CI run filled its disk with both, 13 GB for the CPU
    image); the tests below start containers from them."""
    from gpuplace.testenv.nodeimages import images_cache, layer_digests

    _api, node = node_api
    assert not list(images_cache().glob("*.tar")), sorted(images_cache().glob("*.tar"))
    kept = {line.split()[0] for line in node.ctr("content", "ls", "-q").splitlines() if line.strip()}
    rows = {r.split()[0]: r.split()[2] for r in node.ctr("images", "ls").splitlines()[1:] if r.strip()}
    for tag in built_images():
        if "/gpuplace-cuda:" in tag or "/gpuplace-vllm:" in tag:
            continue
        assert tag in rows, f"{tag} not in the node's containerd: {sorted(rows)}"
        layers = layer_digests(node.ctr("content", "get", rows[tag]))
        assert layers and not kept & set(layers), f"{tag}: layer blobs kept {sorted(kept & set(layers))}"


def test_profile_runs_in_its_image(node_api: tuple[Api, RealNode], bucket: Path) -> None:
    """profile_latency (the CUDA image in the YAML; the CPU image here) measures the tiny model on the
    container's CPU."""
    api, node = node_api
    params: dict[str, Any] = {"model": "tiny", "device": "cpu", "batch_sizes": "1", "prompt_tokens": "16"}
    params |= {"output_tokens": "4", "repeats": 1, "warmup": 1, "dtypes": "float32"}
    out, _ = _run_component(api, node, "llm_placement", "profile-latency", params, bucket, timeout_s=600)
    info = json.loads((out / "device_info").read_text())
    assert info["kind"] == "cpu" and info["torch_version"], info
    profile = pd.read_parquet(out / "profile")
    assert len(profile) >= 1 and "| 1 | 16 |" in (out / "summary").read_text()


def test_inventory_and_plan_run_in_their_image(node_api: tuple[Api, RealNode], bucket: Path) -> None:
    api, node = node_api
    out, _ = _run_component(
        api, node, "llm_placement", "discover-inventory", {"source": "h100-nvlink"}, bucket
    )
    inventory = json.loads((out / "inventory").read_text())
    assert inventory["source"] == "h100-nvlink" and len(inventory["nodes"]) == 4
    arguments = {"model": "tiny", "slo_tpot_ms": 50.0, "slo_ttft_ms": 2000.0, "rate": 2.0}
    out, _ = _run_component(
        api,
        node,
        "llm_placement",
        "plan-placement",
        {**arguments, "inventory": "h100-nvlink"},
        bucket,
        artifacts={"inventory_json": "gs://root/discover-inventory/inventory"},
    )
    plan = json.loads((out / "plan" / "plan.json").read_text())
    assert plan["model"] == "tiny" and plan["placements"]
    assert {p["node"] for p in plan["placements"]} <= {n["name"] for n in inventory["nodes"]}


def test_repeat_runs_load_test_compare_and_track_run_in_their_image(
    node_api: tuple[Api, RealNode], bucket: Path, tmp_path: Path
) -> None:
    """The comparison's loop count, a load test of a server on the node's gateway, the comparison of two
    runs per path (lists of artifacts, as dsl.Collected gives them) and the MLflow logging of a run into a
    store in the bucket, read back here."""
    api, node = node_api
    sample = write_sample_inputs(tmp_path / "sample", requests=60, with_profile=True)
    assert sample.profile is not None
    plan = _in_bucket(bucket, sample.plan, "plan")
    out, _ = _run_component(
        api, node, "orchestration_comparison", "repeat-runs", {"repeats": 2}, bucket, planned=sample.plan
    )
    assert json.loads((out / "parameters" / "output_metadata.json").read_text())["parameterValues"] == {
        "Output": [1, 2]
    }

    server = FaultServer(ServerOptions(token_delay_s=0.005))
    server.start(host=GATEWAY)
    try:
        params = {"endpoint": f"http://{GATEWAY}:{server.port}", "max_requests": 6, "rate": 4.0}
        out, _ = _run_component(
            api, node, "llm_placement", "load-test", params, bucket, artifacts={"plan": plan}
        )
    finally:
        server.stop()
    report = json.loads((out / "report").read_text())
    assert report["completed"] == 6 and report["errors"] == {}, report
    assert server.stats.requests >= 6

    runs: dict[str, str | list[str]] = {"plan": plan}
    for path in ("native", "kubeflow"):
        runs[f"{path}_deployment"] = [
            _in_bucket(bucket, sample.deployments[path], f"{path}-dep-{i}") for i in (0, 1)
        ]
        runs[f"{path}_loadtest"] = [
            _in_bucket(bucket, sample.loadtests[path], f"{path}-lt-{i}") for i in (0, 1)
        ]
    params = {"inventory": "h100-nvlink", "log_to_mlflow": False}
    out, _ = _run_component(
        api,
        node,
        "orchestration_comparison",
        "compare-paths",
        params,
        bucket,
        planned=sample.plan,
        artifacts=runs,
    )
    comparison = json.loads((out / "comparison").read_text())
    assert comparison["score"]["runs"] == {"native": 2, "kubeflow": 2}
    assert comparison["score"]["winner"] in ("native", "kubeflow", "")
    assert "synthetic" in (out / "report_md").read_text()

    store = _open_dir(bucket / "root" / "mlflow")
    params = {"mlflow_workdir": "/gcs/root/mlflow", "mlflow_uri": "", "run_name": "in-its-image"}
    _run_component(
        api,
        node,
        "llm_placement",
        "track-run",
        params,
        bucket,
        artifacts={
            "plan": plan,
            "deployment": _in_bucket(bucket, sample.deployments["native"], "deployment.json"),
            "report": "gs://root/load-test/report",
            "records": "gs://root/load-test/records",
            "profile": _in_bucket(bucket, sample.profile, "profile.parquet"),
        },
    )
    with sqlite3.connect(store / "mlflow.db") as db:
        names = {row[0] for row in db.execute("select name from runs")}
        metrics = {row[0] for row in db.execute("select key from metrics")}
    assert "in-its-image" in names, names
    assert any("ttft" in m for m in metrics), metrics


def test_deploy_and_teardown_run_in_their_image_as_the_deployer(
    node_api: tuple[Api, RealNode], bucket: Path, tmp_path: Path
) -> None:
    """deploy_inference applies a plan (busybox's httpd on the real node) from inside its pod, in-cluster as
    the deployer ServiceAccount, and records where its pod runs; teardown_inference takes it down the same
    way, from the record and the plan."""
    api, node = node_api
    for obj in deployer_rbac("default"):
        api.apply(obj, "default")
    httpd = {
        "image": busybox_image(),
        "command": ["/bin/busybox", "httpd", "-f", "-p", "8080"],
        "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 1},
    }
    plan = _in_bucket(bucket, _busybox_plan(tmp_path, node.name, "httpd", httpd).path, "httpd-plan")
    params = {"target": "kubernetes", "runtime": "none", "gpu_api": "device-plugin", "timeout_s": 120.0}
    as_deployer = SERVICE_ACCOUNT
    out, logs = _run_component(
        api,
        node,
        "llm_placement",
        "deploy-inference",
        params,
        bucket,
        artifacts={"plan": plan},
        service_account=as_deployer,
    )
    record = json.loads((out / "deployment").read_text())
    assert record["ready"] and [p["node"] for p in record["pods"]] == [node.name], logs
    assert api.get_or_none("apps/v1", "Deployment", "httpd", "default") is not None
    params = {"target": "kubernetes", "timeout_s": 120.0}
    _, logs = _run_component(
        api,
        node,
        "llm_placement",
        "teardown-inference",
        params,
        bucket,
        artifacts={"plan": plan, "deployment": "gs://root/deploy-inference/deployment"},
        service_account=as_deployer,
    )
    assert "deleted 1 objects" in logs, logs
    _nothing_left(api, "httpd")


def test_serve_and_load_test_runs_in_its_image(
    node_api: tuple[Api, RealNode], bucket: Path, tmp_path: Path
) -> None:
    """The Kubeflow path's task (the vLLM image in the YAML; the CPU image here) serves the plan for this
    machine inside its container (its local backend: the tiny model built from its preset and served by
    `transformers serve`) and load-tests it there."""
    api, node = node_api
    planned = local_plan_dir(tmp_path / "plan", node.name)
    plan = _in_bucket(bucket, planned.path, "local-plan")  # the task reads it; its kfp outputs place the pod
    # The compiled default, backend kfp, runs the plan's vLLM spec with `vllm serve` in the vLLM image: no GPU
    # and no vLLM image here, so the task serves with its local backend (the plan's transformers engine)
    params = {"max_requests": 3, "rate": 1.0, "startup_timeout_s": 600.0, "backend": "local"}
    out, logs = _run_component(
        api,
        node,
        "orchestration_comparison",
        "serve-and-load-test",
        params,
        bucket,
        planned=planned.path,
        artifacts={"plan": plan},
        timeout_s=900,
    )
    report = json.loads((out / "report").read_text())
    assert report["completed"] == 3, (report, logs[-2000:])
    record = json.loads((out / "deployment").read_text())
    assert record["target"] == "local" and record["path"] == "kubeflow", record


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
    """Deploy ``planned`` as `gpuplace deploy` would (ready-to-serve not observed); how it failed. A deploy
    that does not fail is torn down before the test fails, so the later real-node tests, which check that
    nothing is left, do not see its pods."""
    try:
        deploy_plan(
            planned,
            api=api,
            namespace="default",
            timeout_s=timeout_s,
            runtime=NoServeCheck(),
            gpu_api="device-plugin",
            on_failure=on_failure,
        )
    except DeployFailed as failed:
        return failed
    teardown_plan(planned, api=api, namespace="default")
    pytest.fail("the deploy did not fail")


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
        # a crashing container: CrashLoopBackOff with its last log lines; rolled back. It has the readiness
        # probe the serving pods have: without one the kubelet marks the pod Ready the moment the container
        # starts, and a deploy that sees that before the exit has a ready pod (a fresh-clone run, 2026-12-02)
        (
            "crash",
            {"command": ["/bin/sh", "-c", CRASH], "readinessProbe": PROBE},
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
