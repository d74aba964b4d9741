"""KFP component ``deploy_inference``: a thin adapter over :func:`gpuplace.deploy.deploy`.

Reads a plan directory (``plan.json`` + ``manifests/``), deploys it to the ``kubernetes`` target
(server-side apply, rollout wait, provisioning latency, placement check) or the ``local`` one, and writes
the :class:`~gpuplace.types.DeploymentRecord` as JSON. In a cluster the task's ServiceAccount needs the
Role in docs/deploy.md (``gpuplace.k8s.rbac``). Only the standard library and kfp are imported here.
"""

from kfp import dsl
from kfp.dsl import Artifact, Input, Metrics, Output

from gpuplace.components.images import CPU_IMAGE


@dsl.component(base_image=CPU_IMAGE, install_kfp_package=False)
def deploy_inference(
    plan: Input[Artifact],
    deployment: Output[Artifact],
    metrics: Output[Metrics],
    target: str = "kubernetes",
    namespace: str = "default",
    kubeconfig: str = "",
    run_id: str = "",
    timeout_s: float = 300.0,
    on_failure: str = "teardown",
) -> str:
    """Deploy a placement plan and wait until it serves; returns the endpoint URL.

    Args:
        plan: Plan directory written by the planner (plan.json and manifests/*.yaml).
        target: kubernetes (apply to a cluster) or local (an inference server on this machine).
        namespace: Namespace to deploy into (must exist).
        kubeconfig: Path of a kubeconfig; empty = the task pod's service account (in-cluster).
        run_id: Pipeline run id to label the objects with (pass dsl.PIPELINE_JOB_ID_PLACEHOLDER).
        timeout_s: Deadline for applying and rolling out.
        on_failure: teardown | rollback | keep — what to do with applied objects when the rollout fails.
    """
    import json

    from gpuplace.deploy import deploy

    record = deploy(
        plan.path,
        target=target,
        kubeconfig=kubeconfig or ("in-cluster" if target == "kubernetes" else None),
        namespace=namespace,
        run_id=run_id,
        timeout_s=timeout_s,
        on_failure=on_failure,
        workdir=deployment.path + ".local",
        log=print,
    )
    with open(deployment.path, "w") as f:
        json.dump(record.to_json_dict(), f, indent=2)
    dist = record.provisioning()
    metrics.log_metric("pods", float(len(record.pods)))
    metrics.log_metric("misplaced_pods", float(len(record.mismatches())))
    if dist.count:
        metrics.log_metric("provisioning_p50_s", dist.median)
        metrics.log_metric("provisioning_max_s", dist.max)
    deployment.metadata.update({"target": target, "namespace": namespace, "plan_id": record.plan_id})
    return record.endpoint
