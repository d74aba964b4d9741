"""The tracking step of the ``llm_placement`` pipeline: one MLflow run for a single-path run.

The comparison pipeline logs through ``gpuplace compare`` (:func:`compare_and_track`); this step logs what
``llm_placement`` produced — profile, plan, manifests, deployment record and load test — as one parent run
with a child per step (docs/tracking.md). It reads the files KFP hands it once, through the modules that
own them, and hands :mod:`gpuplace.tracking.pipeline` values (and the files, kept as artifacts).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gpuplace.compare.metrics import PathResult
from gpuplace.deploy.record import RECORD_FILE, read_record
from gpuplace.loadtest.io import (
    RECORDS_JSONL,
    RECORDS_PARQUET,
    REPORT_FILE,
    SUMMARY_FILE,
    read_records,
    read_report,
)
from gpuplace.params import Param, parse_as
from gpuplace.plandir import read_plan_dir
from gpuplace.profiling.io import load_profile
from gpuplace.report.plots import close_figures
from gpuplace.steps.compare import CompareOptions, CompareOutputs, PathInput, run_compare_step
from gpuplace.tracking import open_tracker
from gpuplace.tracking.config import DEFAULT_WORKDIR
from gpuplace.tracking.pipeline import PathFiles, RunBundle, log_pipeline_run


@dataclass(frozen=True, slots=True)
class TrackResult:
    run_id: str
    where: str  # how to look at it (the `mlflow ui` command for a local store), and the run's page
    url: str = ""  # the run's page in MLflow's UI (Model training view)


def _artifacts(
    deployment: Path | None, loadtest: Path | None
) -> tuple[Path | None, tuple[Path, ...], Path | None]:
    """The files a path run keeps: its ``deployment.json``, its load test's outputs, and its JSONL records
    (each when it is there)."""
    dep_file = deployment / RECORD_FILE if deployment is not None and deployment.is_dir() else deployment
    if loadtest is None:
        return dep_file, (), None
    folder = loadtest if loadtest.is_dir() else loadtest.parent
    files = tuple(folder / f for f in (REPORT_FILE, RECORDS_JSONL, SUMMARY_FILE) if (folder / f).is_file())
    jsonl = folder / RECORDS_JSONL
    return dep_file, files, jsonl if jsonl.is_file() else None


def read_path(path: str, deployment: Path | None, loadtest: Path | None) -> PathFiles:
    """One path's deployment record (a ``deployment.json`` or its folder) and load test (its output folder or
    its ``report.json``), read once; a file that is not there is left out."""
    record = read_record(deployment) if deployment is not None and deployment.exists() else None
    dep_file, files, jsonl = _artifacts(deployment, loadtest)
    report_file = None if loadtest is None else loadtest / REPORT_FILE if loadtest.is_dir() else loadtest
    return PathFiles(
        path,
        record,
        read_report(report_file) if report_file is not None and report_file.is_file() else None,
        tuple(read_records(jsonl)) if jsonl is not None else (),
        deployment_file=dep_file,
        loadtest_files=files,
        requests_source=str(jsonl or ""),
    )


def _compared_path(result: PathResult, given: PathInput) -> PathFiles:
    """A compared path as the comparison step read it (not read again), with its files as artifacts."""
    dep_file, files, jsonl = _artifacts(Path(given.deployment), Path(given.loadtest))
    return PathFiles(
        result.path,
        result.deployment,
        result.report,
        result.records if jsonl is not None else (),  # the dataset is the JSONL records', as before
        deployment_file=dep_file,
        loadtest_files=files,
        requests_source=str(jsonl or ""),
    )


PARAMS: tuple[Param, ...] = (
    Param("run_name", str, "llm-placement", "name of the parent MLflow run"),
    Param("mlflow_uri", str, "", "tracking URI; empty = $MLFLOW_TRACKING_URI, else a local SQLite store"),
    Param("mlflow_experiment", str, "gpuplace", "experiment name"),
    Param(
        "mlflow_workdir", str, "", "folder of the local store when no URI is set; empty = .gpuplace/mlflow"
    ),
    Param("fallback_local", bool, False, "log to the local store when the server does not answer"),
    Param("kfp_run_id", str, "", "the KFP run id to tag the run with"),
)


@dataclass(frozen=True, slots=True)
class TrackValues:
    """:data:`PARAMS`'s values, typed: one field per row, read by :func:`~gpuplace.params.parse_as` (its
    defaults are the table's alone)."""

    run_name: str
    mlflow_uri: str
    mlflow_experiment: str
    mlflow_workdir: str
    fallback_local: bool
    kfp_run_id: str


def track_run_step(
    params: Mapping[str, Any],
    *,
    profile: str | Path | None,
    plan_dir: str | Path | None,
    deployment: str | Path | None,
    report: str | Path | None,
    records: str | Path | None = None,
    path: str = "native",
) -> TrackResult:
    """Log one pipeline run (``params``: :data:`PARAMS` by name, the ``track_run`` component's); fails
    (TrackingUnavailable) before logging anything if MLflow is down."""
    p = parse_as(TrackValues, PARAMS, params)
    tracker = open_tracker(
        p.mlflow_uri or None,
        experiment=p.mlflow_experiment,
        workdir=p.mlflow_workdir or DEFAULT_WORKDIR,
        fallback_local=p.fallback_local,
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
            name=p.run_name,
            profile=load_profile(profile) if profile else None,
            profile_file=Path(profile) if profile else None,
            plan=plan,
            paths=(read_path(path, Path(deployment) if deployment else None, loadtest_dir),),
            kfp_run_id=p.kfp_run_id,
        )
        run_id = log_pipeline_run(tracker, bundle)
    return TrackResult(run_id=run_id, where=tracker.describe(run_id), url=tracker.ui_url(run_id))


def compare_and_track(options: CompareOptions, out_dir: str | Path) -> CompareOutputs:
    """The comparison step (:func:`gpuplace.steps.compare.run_compare_step`), logged to MLflow as one
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
        profile=load_profile(m.profile) if m.profile else None,
        profile_file=Path(m.profile) if m.profile else None,
        plan=result.plan_dir,
        manifests=Path(m.manifests) if m.manifests else None,
        paths=tuple(_compared_path(r, p) for r, p in zip(result.inputs, options.paths, strict=True)),
        report_dir=result.out_dir,
        figures=result.figures,
        kfp_run_id=m.kfp_run_id,
    )
    try:
        run_id = log_pipeline_run(tracker, bundle)
    finally:
        close_figures(result.figures)
    return replace(
        result,
        mlflow_run_id=run_id,
        mlflow_where=tracker.describe(run_id),
        mlflow_url=tracker.ui_url(run_id),
        figures={},
    )
