"""KFP component ``compare_paths``: a thin adapter over :mod:`gpuplace.compare.step`.

Reads both orchestration paths' deployment records and load-test outputs, the plan and the fleet;
writes comparison.json, the report as ``Output[Markdown]`` and ``Output[HTML]`` (so the Kubeflow UI
shows it) and the headline numbers as ``Output[Metrics]``; logs everything to MLflow when
``log_to_mlflow`` is set (``MLFLOW_TRACKING_URI`` / KFP's ``MLFLOW_RUN_ID`` are honoured). Only the
standard library and kfp are imported here; gpuplace is imported inside the function.
"""

from kfp import dsl
from kfp.dsl import HTML, Artifact, Input, Markdown, Metrics, Output

from gpuplace.components.images import CPU_IMAGE


@dsl.component(base_image=CPU_IMAGE, install_kfp_package=False)
def compare_paths(
    native_deployment: Input[Artifact],
    native_loadtest: Input[Artifact],
    kubeflow_deployment: Input[Artifact],
    kubeflow_loadtest: Input[Artifact],
    comparison: Output[Artifact],
    report_md: Output[Markdown],
    report_html: Output[HTML],
    metrics: Output[Metrics],
    plan: Input[Artifact] = None,  # type: ignore[assignment]
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

    Args:
        native_deployment: deployment.json of the native path (a file or a folder holding it).
        native_loadtest: The native path's load-test output folder (report.json, records.jsonl).
        kubeflow_deployment: deployment.json of the Kubeflow path.
        kubeflow_loadtest: The Kubeflow path's load-test output folder.
        plan: The plan (plan.json or its folder), as plan_placement wrote it; optional.
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
    params = dict(locals())  # the comparison's parameters, by the names CompareOptions.from_params reads
    import shutil
    import tempfile
    from pathlib import Path

    from gpuplace.compare.step import CompareOptions, parse_path_inputs
    from gpuplace.report import headline_metrics
    from gpuplace.tracking.step import compare_and_track

    paths = parse_path_inputs(
        native_deployment.path, native_loadtest.path, kubeflow_deployment.path, kubeflow_loadtest.path
    )
    params["plan"] = plan.path if plan is not None else ""
    result = compare_and_track(
        CompareOptions.from_params(params, paths), Path(tempfile.mkdtemp(prefix="compare-"))
    )
    shutil.copyfile(result.comparison_json, comparison.path)
    shutil.copyfile(result.report_md, report_md.path)
    shutil.copyfile(result.report_html, report_html.path)  # plots are inlined: one self-contained page
    for name, value in headline_metrics(result.comparison).items():
        metrics.log_metric(name, value)
    comparison.metadata.update(
        {"winner": result.comparison.score.winner, "mlflow_run_id": result.mlflow_run_id}
    )
