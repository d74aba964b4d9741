"""KFP component ``deploy_inference``: a thin adapter over :mod:`gpuplace.steps.deploy`.

Reads a plan directory (``plan.json`` + ``manifests/``), deploys it to the ``kubernetes`` target
(server-side apply, rollout wait, provisioning latency, placement check) or the ``local`` one, and writes
the :class:`~gpuplace.types.DeploymentRecord` as JSON. In a cluster the task's ServiceAccount needs the
Role in docs/deploy.md (``gpuplace.k8s.rbac``). Only the standard library and kfp are imported here.
"""

from kfp import dsl
from kfp.dsl import Artifact, Input, Metrics, Output

from gpuplace.components.images import COMPONENTS_IMAGE


@dsl.component(base_image=COMPONENTS_IMAGE, install_kfp_package=False)
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
    params = dict(locals())  # by the names of the deploy step's table, gpuplace.steps.deploy.PARAMS
    from gpuplace.deploy import deploy_metrics
    from gpuplace.steps.deploy import run_deploy_step

    record = run_deploy_step(
        plan.path, deployment.path, params, in_cluster=True, workdir=deployment.path + ".local", log=print
    )
    for name, value in deploy_metrics(record).items():
        metrics.log_metric(name, value)
    deployment.metadata.update({"target": target, "namespace": namespace, "plan_id": record.plan_id})
    return record.endpoint
