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
    gpu_api: str = "auto",
    runtime: str = "auto",
    allow_misplacement: bool = False,
    create_namespace: bool = False,
    path: str = "",
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
        gpu_api: auto | dra (claim each replica's planned GPUs; placement measured per GPU) | device-plugin.
        runtime: auto | kubelet | standin (a gpuplace testenv: a local engine per KWOK pod) | none.
        allow_misplacement: Keep a deployment whose pods are not where the plan put them (default: fail).
        create_namespace: Create the namespace when it does not exist.
        path: The orchestration path this deploy is ("native" in orchestration_comparison).
    """
    import json

    from gpuplace.deploy import deploy
    from gpuplace.k8s.deploy import PlacementMismatch

    try:
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
            gpu_api=gpu_api,
            runtime=runtime,
            allow_misplacement=allow_misplacement,
            create_namespace=create_namespace,
            path=path,
        )
    except PlacementMismatch as e:  # the task fails, and its output shows where the pods are
        with open(deployment.path, "w") as f:
            json.dump(e.record.to_json_dict(), f, indent=2)
        raise
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
