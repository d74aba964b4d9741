"""KFP component ``compare_paths``: a thin adapter over :mod:`gpuplace.steps.compare`.

Reads both orchestration paths' deployment records and load-test outputs, the plan and the fleet;
writes comparison.json, the report as ``Output[Markdown]`` and ``Output[HTML]`` (so the Kubeflow UI
shows it) and the headline numbers as ``Output[Metrics]``; logs everything to MLflow when
``log_to_mlflow`` is set (``MLFLOW_TRACKING_URI`` / KFP's ``MLFLOW_RUN_ID`` are honoured). Only the
standard library and kfp are imported here; gpuplace is imported inside the function.
"""

from kfp import dsl
from kfp.dsl import HTML, Artifact, Dataset, Input, Markdown, Metrics, Output

from gpuplace.components.images import COMPONENTS_IMAGE


@dsl.component(base_image=COMPONENTS_IMAGE, install_kfp_package=False)
def compare_paths(
    native_deployment: Input[list[Artifact]],
    native_loadtest: Input[list[Artifact]],
    kubeflow_deployment: Input[list[Artifact]],
    kubeflow_loadtest: Input[list[Artifact]],
    comparison: Output[Artifact],
    report_md: Output[Markdown],
    report_html: Output[HTML],
    metrics: Output[Metrics],
    plan: Input[Artifact] = None,  # type: ignore[assignment]
    native_records: Input[list[Dataset]] = None,  # type: ignore[assignment]
    kubeflow_records: Input[list[Dataset]] = None,  # type: ignore[assignment]
    inventory: str = "",
    weights: str = "",
    assess: str = "",
    penalty_usd_per_breach: float = 0.0,
    engineering_weeks: float = 0.0,
    rate_usd_per_week: float = 0.0,
    saved_usd_per_quarter: float = -1.0,
    log_to_mlflow: bool = False,
    mlflow_uri: str = "",
    mlflow_experiment: str = "gpuplace",
    mlflow_fallback_local: bool = False,
    kfp_run_id: str = "",
) -> None:
    """Compare the native and the Kubeflow path: metrics, weighted score, sensitivity, ROI, report.

    Each path's inputs are lists with one entry per load-test run of the same workload, in run order
    (dsl.Collected over the pipeline's loop of repeated runs): the runs are pooled, and the bootstrap
    resamples the runs as well as their requests.

    Args:
        native_deployment: deployment.json of each native run (a file or a folder holding it).
        native_loadtest: Each native run's load-test output folder (report.json, records.jsonl).
        kubeflow_deployment: deployment.json of each Kubeflow run.
        kubeflow_loadtest: Each Kubeflow run's load-test output folder.
        plan: The plan (plan.json or its folder), as plan_placement wrote it; optional.
        native_records: Each native load test's per-request records (its records output): every figure
            gets a bootstrap interval from them, and the verdict says whether it is beyond the noise.
        kubeflow_records: Each Kubeflow run's per-request records.
        inventory: The fleet (bundled name, fleet YAML, Alibaba CSV, cluster); "" for none.
        weights: Criterion weights summing to 1, e.g. "tpot_p99=0.7,cost=0.3"; "" = defaults.
        assess: Assessed criteria separated by ";", e.g. "reuse=native:0.4,kubeflow:0.9".
        penalty_usd_per_breach: SLA penalty per request that misses the SLO.
        engineering_weeks: ROI: weeks of engineering to adopt the winning mechanism.
        rate_usd_per_week: ROI: cost of one engineering week.
        saved_usd_per_quarter: ROI: saving per quarter; negative derives it from the breach costs.
        log_to_mlflow: Also log the comparison to MLflow (parent run + one child per path).
        mlflow_uri: Tracking URI; "" = MLFLOW_TRACKING_URI, else a local store.
        mlflow_experiment: MLflow experiment name.
        mlflow_fallback_local: Log to a local store when the server is unreachable, instead of failing.
        kfp_run_id: The KFP run id to tag the MLflow run with (pass dsl.PIPELINE_JOB_ID_PLACEHOLDER).
    """
    params = dict(locals())  # the comparison's parameters, by the names of gpuplace.steps.compare.PARAMS
    import shutil
    import tempfile
    from pathlib import Path

    from gpuplace.report import headline_metrics
    from gpuplace.steps.compare import compare_options, parse_run_inputs
    from gpuplace.steps.track import compare_and_track

    runs = {k: params.pop(k) for k in list(params) if k.startswith(("native_", "kubeflow_"))}
    paths = parse_run_inputs(  # one artifact (python_func called directly) counts as one run
        {k: [a.path for a in (v if isinstance(v, list) else [v])] for k, v in runs.items() if v is not None}
    )
    params["plan"] = plan.path if plan is not None else ""
    result = compare_and_track(compare_options(params, paths), Path(tempfile.mkdtemp(prefix="compare-")))
    shutil.copyfile(result.comparison_json, comparison.path)
    shutil.copyfile(result.report_md, report_md.path)
    shutil.copyfile(result.report_html, report_html.path)  # plots are inlined: one self-contained page
    for name, value in headline_metrics(result.comparison).items():
        metrics.log_metric(name, value)
    comparison.metadata.update(result.artifact_metadata())
