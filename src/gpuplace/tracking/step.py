"""The tracking step of the ``llm_placement`` pipeline: one MLflow run for a single-path run.

The comparison pipeline logs through ``gpuplace compare``; this step logs what ``llm_placement``
produced — profile, plan, manifests, deployment record and load test — as one parent run with a
child per step (docs/tracking.md), from the files KFP hands it.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from gpuplace.compare.step import CompareOptions, CompareOutputs, run_compare_step
from gpuplace.loadtest.io import RECORDS_PARQUET, REPORT_FILE
from gpuplace.plandir import read_plan_dir
from gpuplace.report.plots import close_figures
from gpuplace.tracking import open_tracker
from gpuplace.tracking.config import DEFAULT_WORKDIR
from gpuplace.tracking.pipeline import PathFiles, RunBundle, log_pipeline_run


@dataclass(frozen=True, slots=True)
class TrackResult:
    run_id: str
    where: str  # how to look at it (the `mlflow ui` command for a local store)


def track_run_step(
    *,
    name: str,
    profile: str | Path | None,
    plan_dir: str | Path | None,
    deployment: str | Path | None,
    report: str | Path | None,
    records: str | Path | None = None,
    path: str = "native",
    uri: str | None = None,
    experiment: str = "gpuplace",
    workdir: str | Path | None = None,
    fallback_local: bool = False,
    kfp_run_id: str = "",
) -> TrackResult:
    """Log one pipeline run; fails (TrackingUnavailable) before logging anything if MLflow is down."""
    tracker = open_tracker(
        uri or None, experiment=experiment, workdir=workdir or DEFAULT_WORKDIR, fallback_local=fallback_local
    )
    plan = read_plan_dir(plan_dir) if plan_dir else None
    with tempfile.TemporaryDirectory() as tmp:
        loadtest_dir = None
        if report:
            # KFP gives each output its own file; the tracker reads a load test's output folder
            loadtest_dir = Path(tmp) / "loadtest"
            loadtest_dir.mkdir()
            shutil.copyfile(report, loadtest_dir / REPORT_FILE)
            if records:
                shutil.copyfile(records, loadtest_dir / RECORDS_PARQUET)
        bundle = RunBundle(
            name=name,
            profile=Path(profile) if profile else None,
            plan=plan,
            paths=(PathFiles(path, Path(deployment) if deployment else None, loadtest_dir),),
            kfp_run_id=kfp_run_id,
        )
        run_id = log_pipeline_run(tracker, bundle)
    return TrackResult(run_id=run_id, where=tracker.config.describe())


def compare_and_track(options: CompareOptions, out_dir: str | Path) -> CompareOutputs:
    """The comparison step (:func:`gpuplace.compare.step.run_compare_step`), logged to MLflow as one
    parent run with a child per path when ``options.mlflow.enabled``. The tracker connects before any
    work, so an unreachable server fails fast."""
    m = options.mlflow
    if not m.enabled:
        return run_compare_step(options, out_dir)
    tracker = open_tracker(
        m.uri or None,
        experiment=m.experiment,
        workdir=m.workdir,
        fallback_local=m.fallback_local,
        system_metrics=m.system_metrics,
    )
    result = run_compare_step(options, out_dir, keep_figures=True)
    plan = result.comparison.plan
    bundle = RunBundle(
        name=m.run_name or f"compare {plan.plan_id if plan else ''}".strip(),
        comparison=result.comparison,
        profile=Path(m.profile) if m.profile else None,
        plan=result.plan_dir,
        manifests=Path(m.manifests) if m.manifests else None,
        paths=tuple(PathFiles(p.path, Path(p.deployment), Path(p.loadtest)) for p in options.paths),
        report_dir=result.out_dir,
        figures=result.figures,
        kfp_run_id=m.kfp_run_id,
    )
    try:
        run_id = log_pipeline_run(tracker, bundle)
    finally:
        close_figures(result.figures)
    return replace(result, mlflow_run_id=run_id, mlflow_where=tracker.config.describe(), figures={})
