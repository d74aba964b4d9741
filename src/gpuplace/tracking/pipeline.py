"""Logging one whole gpuplace pipeline run to MLflow: a parent run with nested step, path, sweep-point runs.

The layout (docs/tracking.md#layout): the parent run holds the comparison (headline metrics, weights
as params, the score table, comparison.json, the report and its plots); a ``profile`` step run holds
the profile Parquet as a dataset and one nested run per sweep point; a ``plan`` step run holds
plan.json and the manifests; one ``path`` run per orchestration path holds that path's metrics
(identical keys, so MLflow's compare view lines them up), its deployment record and load-test
records. Every input is optional, so a partial run (e.g. profile only) logs what exists.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuplace.deploy import RECORD_FILE
from gpuplace.loadtest.io import RECORDS_JSONL, REPORT_FILE, SUMMARY_FILE, read_records
from gpuplace.plandir import MANIFESTS_DIR, PLAN_FILE, PlanDir
from gpuplace.tracking.client import RunHandle, Tracker
from gpuplace.tracking.naming import (
    ART_DEPLOY,
    ART_LOADTEST,
    ART_MANIFESTS,
    ART_PLAN,
    ART_PLOTS,
    ART_PROFILE,
    ART_REPORT,
    ART_TABLES,
    TAG_PATH,
    TAG_PLAN,
    TAG_STEP,
    TAG_TARGET,
    candidate_row,
    comparison_metric_dict,
    comparison_params,
    git_commit,
    path_metric_dict,
    path_params,
    plan_metric_dict,
    plan_params,
    point_metric_dict,
    point_params,
    profile_params,
)
from gpuplace.types.compare import Comparison, PathMetrics
from gpuplace.types.plan import PlacementPlan


@dataclass(frozen=True, slots=True)
class PathFiles:
    """One orchestration path's files: ``deployment.json`` and the load test's output folder."""

    path: str
    deployment: Path | None = None
    loadtest_dir: Path | None = None


@dataclass(frozen=True, slots=True)
class RunBundle:
    """What one pipeline run produced, as files on disk plus the computed comparison."""

    name: str
    comparison: Comparison | None = None
    profile: Path | None = None  # Parquet
    plan: PlanDir | None = None
    manifests: Path | None = None  # folder of rendered manifests (default: the plan directory's)
    paths: tuple[PathFiles, ...] = ()
    report_dir: Path | None = None  # report.md, report.html, plots/
    figures: Mapping[str, Any] = field(
        default_factory=dict
    )  # open matplotlib figures, logged with log_figure
    kfp_run_id: str = ""
    sweep_point_runs: bool = True
    extra_tags: dict[str, str] = field(default_factory=dict)


def _plan_of(bundle: RunBundle) -> PlacementPlan | None:
    if bundle.plan is not None:
        return bundle.plan.plan
    return bundle.comparison.plan if bundle.comparison is not None else None


def log_pipeline_run(tracker: Tracker, bundle: RunBundle) -> str:
    """Log ``bundle`` as one parent run with nested runs; returns the parent run id."""
    plan = _plan_of(bundle)
    commit = git_commit()
    tags = {**bundle.extra_tags}
    if plan is not None:
        tags.update(
            {"gpuplace.model": plan.model, "gpuplace.shape": plan.chosen.label, TAG_PLAN: plan.plan_id}
        )
    if commit:
        tags.update({"gpuplace.git_commit": commit, "mlflow.source.git.commit": commit})
    with tracker.run(bundle.name, "pipeline", tags=tags, kfp_run_id=bundle.kfp_run_id) as parent:
        if bundle.profile is not None:
            _log_profile(tracker, parent, bundle.profile, bundle.sweep_point_runs, tags)
        if plan is not None:
            _log_plan(tracker, parent, plan, bundle, tags)
        metrics_by_path = {m.path: m for m in bundle.comparison.paths} if bundle.comparison else {}
        for files in bundle.paths:  # a run without a comparison: its path's figures from its own files
            if files.path not in metrics_by_path and (measured := measured_path(files, plan)) is not None:
                metrics_by_path[files.path] = measured
        names = [p.path for p in bundle.paths] + [
            n for n in metrics_by_path if n not in {p.path for p in bundle.paths}
        ]
        files_by_path = {p.path: p for p in bundle.paths}
        for name in names:
            _log_path(tracker, parent, name, files_by_path.get(name), metrics_by_path.get(name), tags)
        if bundle.comparison is not None:
            _log_comparison(tracker, parent, bundle.comparison, bundle.report_dir, bundle.figures)
        else:  # the parent carries the measured figures too, so MLflow's run table can sort by them
            tracker.log(
                parent,
                {f"{n}.{k}": v for n, m in metrics_by_path.items() for k, v in path_metric_dict(m).items()},
            )
        return parent.run_id


def measured_path(files: PathFiles, plan: PlacementPlan | None) -> PathMetrics | None:
    """A path's figures from its deployment record and load-test report (no fleet: cost and fragmentation
    stay unknown); None when either file is missing."""
    from gpuplace.compare.metrics import PathResult, path_metrics
    from gpuplace.deploy import read_record
    from gpuplace.loadtest.io import read_report

    if files.deployment is None or files.loadtest_dir is None:
        return None
    report = files.loadtest_dir / REPORT_FILE if files.loadtest_dir.is_dir() else files.loadtest_dir
    if not report.is_file():
        return None
    result = PathResult(files.path, read_record(files.deployment), read_report(report))
    return path_metrics(
        result, plan=plan, fleet=None, catalog=None, fragmentation=None, penalty_usd_per_breach=0.0
    )


def _log_profile(
    tracker: Tracker, parent: RunHandle, parquet: Path, sweep_runs: bool, tags: dict[str, str]
) -> None:
    from gpuplace.profiling import load_profile, profile_to_frame
    from gpuplace.profiling.step import point_key, profile_metrics

    profile = load_profile(parquet)
    gpu = profile.device.catalog_gpu or profile.device.name
    step_tags = {**tags, TAG_STEP: "profile", "gpuplace.model": profile.model.name, "gpuplace.gpu_model": gpu}
    with tracker.run("profile", "step", parent=parent, tags=step_tags) as run:
        tracker.log(run, profile_metrics(profile), profile_params(profile))
        tracker.log_dataset(
            run, profile_to_frame(profile), name="profile", source=str(parquet), context="profile"
        )
        tracker.log_artifact(run, parquet, ART_PROFILE)
        if sweep_runs:
            for r in profile.results:
                with tracker.run(point_key(r), "sweep_point", parent=run, tags=step_tags) as point:
                    tracker.log(point, point_metric_dict(r), point_params(r))


def _log_plan(
    tracker: Tracker, parent: RunHandle, plan: PlacementPlan, bundle: RunBundle, tags: dict[str, str]
) -> None:
    with tracker.run("plan", "step", parent=parent, tags={**tags, TAG_STEP: "plan"}) as run:
        tracker.log(run, plan_metric_dict(plan), plan_params(plan))
        manifests = bundle.manifests
        if bundle.plan is not None:
            tracker.log_artifact(run, bundle.plan.path / PLAN_FILE, ART_PLAN)
            manifests = manifests or bundle.plan.path / MANIFESTS_DIR
        if manifests is not None and manifests.is_dir():
            for f in sorted(manifests.iterdir()):
                tracker.log_artifact(run, f, ART_MANIFESTS)
        if plan.candidates:
            rows = [
                {k: v for k, v in c.items() if isinstance(v, str | int | float | bool)}
                for c in (candidate_row(c) for c in plan.candidates)
            ]
            tracker.log_table(run, _columns(rows), f"{ART_TABLES}/candidates.json")


def _columns(rows: Sequence[Mapping[str, object]]) -> dict[str, list[object]]:
    keys = sorted({k for r in rows for k in r})
    return {k: [r.get(k) for r in rows] for k in keys}


def _log_path(
    tracker: Tracker,
    parent: RunHandle,
    name: str,
    files: PathFiles | None,
    metrics: PathMetrics | None,
    tags: dict[str, str],
) -> None:
    path_tags = {**tags, TAG_PATH: name}
    if metrics is not None:
        path_tags[TAG_TARGET] = metrics.serving_target
    with tracker.run(f"path: {name}", "path", parent=parent, tags=path_tags) as run:
        if metrics is not None:
            tracker.log(run, path_metric_dict(metrics), path_params(metrics))
        if files is None:
            return
        if files.deployment is not None:
            dep = files.deployment / RECORD_FILE if files.deployment.is_dir() else files.deployment
            tracker.log_artifact(run, dep, ART_DEPLOY)
        if files.loadtest_dir is not None:
            lt = files.loadtest_dir if files.loadtest_dir.is_dir() else files.loadtest_dir.parent
            for fname in (REPORT_FILE, RECORDS_JSONL, SUMMARY_FILE):
                if (lt / fname).is_file():
                    tracker.log_artifact(run, lt / fname, ART_LOADTEST)
            records = lt / RECORDS_JSONL
            if records.is_file():
                import pandas as pd

                rows = [r.to_json_dict() for r in read_records(records)]
                frame = pd.DataFrame(rows).drop(columns=["chunk_times_s"], errors="ignore")
                if not frame.empty:
                    tracker.log_dataset(
                        run, frame, name=f"loadtest-{name}", source=str(records), context="loadtest"
                    )


def _log_comparison(
    tracker: Tracker, parent: RunHandle, c: Comparison, report_dir: Path | None, figures: Mapping[str, Any]
) -> None:
    tracker.log(
        parent, comparison_metric_dict(c), comparison_params(c), {"gpuplace.winner": c.score.winner or "tie"}
    )
    tracker.log_text(parent, json.dumps(c.to_json_dict(), indent=2), "comparison/comparison.json")
    rows = []
    for crit, by_path in c.score.normalised.items():
        row: dict[str, object] = {"criterion": crit, "weight": c.score.weights.get(crit, 0.0)}
        for path, value in by_path.items():
            raw = c.score.raw[crit][path]
            row[f"{path}_raw"] = raw if math.isfinite(raw) else None
            row[f"{path}_score"] = value
        rows.append(row)
    tracker.log_table(parent, _columns(rows), f"{ART_TABLES}/comparison.json")
    if report_dir is not None:
        for fname in ("report.md", "report.html"):
            if (report_dir / fname).is_file():
                tracker.log_artifact(parent, report_dir / fname, ART_REPORT)
    for name, fig in figures.items():
        tracker.log_figure(parent, fig, f"{ART_PLOTS}/{name}.png")
    if not figures and report_dir is not None and (report_dir / "plots").is_dir():
        for png in sorted((report_dir / "plots").glob("*.png")):
            tracker.log_artifact(parent, png, ART_PLOTS)
