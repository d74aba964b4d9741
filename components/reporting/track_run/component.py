"""KFP component ``track_run``: logs a ``llm_placement`` run to MLflow, over
:func:`gpuplace.steps.track.track_run_step`. Only the standard library and kfp are imported here.

Under Kubeflow Pipelines 2.17+ with MLflow enabled, the backend injects ``MLFLOW_RUN_ID`` and the
step attaches to that run; otherwise it creates one parent run tagged with the KFP run id.
"""

from kfp import dsl
from kfp.dsl import Artifact, Dataset, Input

from gpuplace.components.images import COMPONENTS_IMAGE


@dsl.component(base_image=COMPONENTS_IMAGE, install_kfp_package=False)
def track_run(
    profile: Input[Dataset],
    plan: Input[Artifact],
    deployment: Input[Artifact],
    report: Input[Artifact],
    records: Input[Dataset],
    run_name: str = "llm-placement",
    mlflow_uri: str = "",
    mlflow_experiment: str = "gpuplace",
    mlflow_workdir: str = "",
    fallback_local: bool = False,
    kfp_run_id: str = "",
) -> str:
    """Log profile, plan, manifests, deployment and load test as one MLflow run; returns how to view it.

    Args:
        run_name: Name of the parent MLflow run.
        mlflow_uri: Tracking URI; empty = $MLFLOW_TRACKING_URI, else a local SQLite store.
        mlflow_experiment: Experiment name.
        mlflow_workdir: Folder of the local store when no URI is set; empty = .gpuplace/mlflow.
        fallback_local: Log to the local store when the server does not answer (and say so).
        kfp_run_id: The KFP run id to tag the run with (pass dsl.PIPELINE_JOB_ID_PLACEHOLDER).
    """
    params = dict(locals())  # by the names of the tracking step's table, gpuplace.steps.track.PARAMS
    from gpuplace.steps.track import track_run_step

    result = track_run_step(
        params,
        profile=profile.path,
        plan_dir=plan.path,
        deployment=deployment.path,
        report=report.path,
        records=records.path,
    )
    print(f"MLflow run {result.run_id}: {result.where}")
    return result.where
