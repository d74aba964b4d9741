"""deploy_inference and teardown_inference: the functions' wiring called directly against the real local
control plane, the component specs, and both components chained under kfp's local runner.

No ``from __future__ import annotations`` here: kfp reads the pipeline's return annotation at runtime.
"""

import json
from pathlib import Path

import pytest

from gpuplace.components.serving.deploy_inference import deploy_inference
from gpuplace.components.serving.teardown_inference import teardown_inference
from gpuplace.k8s import Api
from gpuplace.testenv import ControlPlane
from tests.integration.test_deploy import H100_NODES, write_plan
from tests.support.kfp_artifacts import FakeArtifact as _Art


def test_component_specs() -> None:
    spec = deploy_inference.component_spec
    assert set(spec.inputs or {}) >= {"plan", "target", "namespace", "kubeconfig", "timeout_s", "on_failure"}
    assert set(spec.outputs or {}) == {"deployment", "metrics", "Output"}
    assert spec.inputs["target"].default == "kubernetes"
    assert set(teardown_inference.component_spec.inputs or {}) >= {"plan", "deployment", "namespace"}


@pytest.mark.integration
@pytest.mark.controlplane
def test_python_funcs_deploy_and_tear_down(
    controlplane: ControlPlane, kube_api: Api, kube_namespace: str, tmp_path: Path
) -> None:
    plan = _Art(write_plan(tmp_path / "plan", plan_id="p-comp", nodes=H100_NODES[:1], gpus=2))
    deployment, metrics = _Art(tmp_path / "deployment.json"), _Art(tmp_path / "metrics")
    endpoint = deploy_inference.python_func(
        plan=plan,
        deployment=deployment,
        metrics=metrics,
        namespace=kube_namespace,
        kubeconfig=str(controlplane.kubeconfig),
        run_id="run-c",
        timeout_s=60.0,
        gpu_api="device-plugin",
        runtime="none",  # the wiring only: nothing serves the pod (the local-runner test below serves it)
    )
    assert endpoint == f"http://llm.{kube_namespace}.svc.cluster.local:8000"
    record = json.loads(Path(deployment.path).read_text())
    assert [p["node"] for p in record["pods"]] == [H100_NODES[0]]
    assert metrics.logged["pods"] == 1.0 and metrics.logged["misplaced_pods"] == 0.0
    assert "provisioning_max_s" not in metrics.logged  # ready-to-serve not observed: unknown, not logged
    summary = teardown_inference.python_func(
        plan=plan, deployment=deployment, namespace=kube_namespace, kubeconfig=str(controlplane.kubeconfig)
    )
    assert summary.startswith("deleted 2 objects")
    assert kube_api.get_or_none("apps/v1", "Deployment", "llm", kube_namespace) is None


@pytest.mark.integration
@pytest.mark.controlplane
def test_runs_under_the_local_runner(
    kfp_local: Path, controlplane: ControlPlane, kube_api: Api, kube_namespace: str, tmp_path: Path
) -> None:
    from kfp import dsl
    from kfp.dsl import Artifact

    plan_dir = write_plan(tmp_path / "plan", plan_id="p-kfp", nodes=H100_NODES[1:2], gpus=2)
    kubeconfig = str(controlplane.kubeconfig)

    @dsl.pipeline
    def deploy_then_teardown(namespace: str) -> str:
        plan = dsl.importer(artifact_uri=str(plan_dir), artifact_class=Artifact, reimport=True)
        deployed = deploy_inference(
            plan=plan.output, namespace=namespace, kubeconfig=kubeconfig, timeout_s=60.0
        )
        removed = teardown_inference(
            plan=plan.output,
            deployment=deployed.outputs["deployment"],
            namespace=namespace,
            kubeconfig=kubeconfig,
        )
        return removed.output

    result = deploy_then_teardown(namespace=kube_namespace)
    # on the testenv: DRA claims for the planned GPUs, served by the KWOK stand-in, all of it taken down
    assert result.output.startswith("deleted 3 objects, 1 already gone")
    assert result.output.endswith("stopped 1 KWOK stand-in server(s)")
    assert kube_api.get_or_none("apps/v1", "Deployment", "llm", kube_namespace) is None
