"""KFP component ``teardown_inference``: a thin adapter over :mod:`gpuplace.steps.teardown`.

Deletes what ``deploy_inference`` created from the same plan directory (a 404 counts as done) and
waits for its pods to go; for the ``local`` target it stops the server named in the deployment record,
or, without one (as in a pipeline's exit handler, which cannot read the guarded tasks' outputs), the
server registered for the plan.
Only the standard library and kfp are imported here.
"""

from kfp import dsl
from kfp.dsl import Artifact, Input

from gpuplace.components.images import COMPONENTS_IMAGE


@dsl.component(base_image=COMPONENTS_IMAGE, install_kfp_package=False)
def teardown_inference(
    plan: Input[Artifact] = None,  # type: ignore[assignment]
    deployment: Input[Artifact] = None,  # type: ignore[assignment]
    run_id: str = "",
    target: str = "kubernetes",
    namespace: str = "default",
    kubeconfig: str = "",
    timeout_s: float = 120.0,
) -> str:
    """Remove a deployment made by deploy_inference; returns a one-line summary.

    Args:
        plan: The plan directory that was deployed (optional when run_id is given).
        deployment: The deployment record deploy_inference wrote (optional: found by the plan).
        run_id: Tear down what deploy_inference labelled with this run id; this is how a pipeline's
            exit handler names it (dsl.PIPELINE_JOB_ID_PLACEHOLDER), since it cannot read task outputs.
        target: kubernetes or local (as deployed).
        namespace: Namespace it was deployed into.
        kubeconfig: Path of a kubeconfig; empty = in-cluster.
        timeout_s: Deadline for deleting and waiting for the pods to go.
    """
    params = dict(locals())  # by the names of the teardown step's table, gpuplace.steps.teardown.PARAMS
    from gpuplace.steps.teardown import run_teardown_step

    summary = run_teardown_step(
        plan.path if plan is not None else None,
        params,
        record=deployment.path if deployment is not None else None,
        record_field="deployment",
        in_cluster=True,
    )
    print(summary)
    return summary
