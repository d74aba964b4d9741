"""Logging one whole gpuplace pipeline run to MLflow: a parent run with nested step, path, sweep-point runs.

The layout (docs/tracking.md#layout): the parent run holds the comparison (headline metrics, weights
as params, the score table, comparison.json, the report and its plots); a ``profile`` step run holds
the profile Parquet as a dataset and one nested run per sweep point; a ``plan`` step run holds
plan.json and the manifests; one ``path`` run per orchestration path holds that path's metrics
(identical keys, so MLflow's compare view lines them up), its deployment record and load-test
records. Every input is optional, so a partial run (e.g. profile only) logs what exists.

It logs values: the tracking step (:mod:`gpuplace.steps.track`) reads the files once and hands over the
profile, the plan, each path's record, report and requests, with the files they came from, which are
kept as artifacts (uploaded, never parsed here).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuplace.plandir import PlanDir
from gpuplace.report.render import verdict_line
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
    MLFLOW_NOTE,
    PLACEMENT_MODEL_TYPE,
    TAG_PATH,
    TAG_PLAN,
    TAG_STEP,
    TAG_TARGET,
    TAG_VERDICT,
    candidate_row,
    comparison_metric_dict,
    comparison_params,
    git_commit,
    interval_metric_dict,
    path_metric_dict,
    path_params,
    placement_model_name,
    plan_metric_dict,
    plan_params,
    point_metric_dict,
    point_params,
    profile_params,
)
from gpuplace.tracking.review import PathRecords, Span, description, loadtest_params, pipeline_params, spans
from gpuplace.types import DeploymentRecord, LatencyProfile
from gpuplace.types.compare import Comparison, PathMetrics
from gpuplace.types.loadtest import LatencyReport, RequestResult
from gpuplace.types.plan import PlacementPlan


@dataclass(frozen=True, slots=True)
class PathFiles:
    """One orchestration path as its step read it: the deployment record, the load-test report and its
    per-request records (values), and the files they came from, kept as the path run's artifacts."""

    path: str
    record: DeploymentRecord | None = None
    report: LatencyReport | None = None
    requests: tuple[RequestResult, ...] = ()  # logged as the path's dataset
    deployment_file: Path | None = None
    loadtest_files: tuple[Path, ...] = ()  # report.json, records.jsonl, summary.md
    requests_source: str = ""  # where the requests came from (the dataset's source)


@dataclass(frozen=True, slots=True)
class RunBundle:
    """What one pipeline run produced, as values (the files they came from kept as artifacts)."""

    name: str
    comparison: Comparison | None = None
    profile: LatencyProfile | None = None
    profile_file: Path | None = None  # its Parquet
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
    """Log ``bundle`` as one parent run with nested runs; returns the parent run id.

    The parent carries the pipeline's inputs as params and a Markdown description; every run spans its
    step's recorded times (:mod:`gpuplace.tracking.review`)."""
    plan = _plan_of(bundle)
    commit = git_commit()
    tags = {**bundle.extra_tags}
    if plan is not None:
        tags.update(
            {"gpuplace.model": plan.model, "gpuplace.shape": plan.chosen.label, TAG_PLAN: plan.plan_id}
        )
    if commit:
        tags.update({"gpuplace.git_commit": commit, "mlflow.source.git.commit": commit})
    profile = bundle.profile
    records = [PathRecords(f.path, f.record, f.report) for f in bundle.paths]
    span = spans(profile, records)
    workload = next((r.report.workload for r in records if r.report is not None), {})
    with tracker.run(
        bundle.name, "pipeline", tags=tags, kfp_run_id=bundle.kfp_run_id, span=span.get("pipeline")
    ) as parent:
        comparison_slo = bundle.comparison.slo if bundle.comparison is not None else None
        tracker.log(parent, params=pipeline_params(plan, bundle.kfp_run_id, workload, comparison_slo))
        if bundle.profile_file is not None and profile is not None:
            _log_profile(tracker, parent, bundle.profile_file, profile, bundle.sweep_point_runs, tags, span)
        if plan is not None:
            _log_plan(tracker, parent, plan, bundle, tags, span.get("plan"))
            # the placement as the run's model output: MLflow's GenAI view then lists the run under
            # "Training runs" (docs/tracking.md#what-a-reviewer-finds-where)
            placement = {k: v for k, v in plan_params(plan).items() if k != "placements"}
            tracker.log_model_output(
                parent, placement_model_name(plan), placement, model_type=PLACEMENT_MODEL_TYPE
            )
        metrics_by_path = {m.path: m for m in bundle.comparison.paths} if bundle.comparison else {}
        for files in bundle.paths:  # a run without a comparison: its path's figures from its own files
            if files.path not in metrics_by_path and (measured := measured_path(files, plan)) is not None:
                metrics_by_path[files.path] = measured
        names = [p.path for p in bundle.paths] + [
            n for n in metrics_by_path if n not in {p.path for p in bundle.paths}
        ]
        files_by_path = {p.path: p for p in bundle.paths}
        reports = {r.path: r.report for r in records}
        for name in names:
            intervals = interval_metric_dict(bundle.comparison, name) if bundle.comparison else {}
            _log_path(
                tracker,
                parent,
                PathLog(
                    name, files_by_path.get(name), metrics_by_path.get(name), reports.get(name), intervals
                ),
                tags,
                span.get(f"path: {name}"),
            )
        verdict = ""
        if bundle.comparison is not None:
            verdict = verdict_line(bundle.comparison)
            _log_comparison(tracker, parent, bundle.comparison, bundle.report_dir, bundle.figures)
        else:  # the parent carries the measured figures too, so MLflow's run table can sort by them
            tracker.log(
                parent,
                {f"{n}.{k}": v for n, m in metrics_by_path.items() for k, v in path_metric_dict(m).items()},
            )
        note = description(plan, list(metrics_by_path.values()), bundle.comparison, verdict)
        tracker.log(parent, tags={MLFLOW_NOTE: note})
        return parent.run_id


def measured_path(files: PathFiles, plan: PlacementPlan | None) -> PathMetrics | None:
    """A path's figures from its deployment record and load-test report (no fleet: cost and fragmentation
    stay unknown); None when either is missing."""
    from gpuplace.compare.metrics import PathResult, path_metrics

    if files.record is None or files.report is None:
        return None
    result = PathResult(files.path, files.record, files.report)
    return path_metrics(
        result, plan=plan, fleet=None, catalog=None, fragmentation=None, penalty_usd_per_breach=0.0
    )


def _log_profile(
    tracker: Tracker,
    parent: RunHandle,
    parquet: Path,
    profile: LatencyProfile,
    sweep_runs: bool,
    tags: dict[str, str],
    span: Mapping[str, Span],
) -> None:
    from gpuplace.profiling import profile_to_frame
    from gpuplace.profiling.summary import point_key, profile_metrics

    gpu = profile.device.catalog_gpu or profile.device.name
    step_tags = {**tags, TAG_STEP: "profile", "gpuplace.model": profile.model.name, "gpuplace.gpu_model": gpu}
    step_span = span.get("profile")
    with tracker.run("profile", "step", parent=parent, tags=step_tags, span=step_span) as run:
        tracker.log(run, profile_metrics(profile), profile_params(profile))
        tracker.log_dataset(
            run, profile_to_frame(profile), name="profile", source=str(parquet), context="profile"
        )
        tracker.log_artifact(run, parquet, ART_PROFILE)
        if sweep_runs:
            for r in profile.results:
                # a sweep point records no times of its own: it spans its profile step
                with tracker.run(
                    point_key(r), "sweep_point", parent=run, tags=step_tags, span=step_span
                ) as p:
                    tracker.log(p, point_metric_dict(r), point_params(r))


def _log_plan(
    tracker: Tracker,
    parent: RunHandle,
    plan: PlacementPlan,
    bundle: RunBundle,
    tags: dict[str, str],
    span: Span | None,
) -> None:
    with tracker.run("plan", "step", parent=parent, tags={**tags, TAG_STEP: "plan"}, span=span) as run:
        tracker.log(run, plan_metric_dict(plan), plan_params(plan))
        manifests = bundle.manifests
        if bundle.plan is not None:
            tracker.log_artifact(run, bundle.plan.plan_file, ART_PLAN)
            manifests = manifests or bundle.plan.manifests_dir
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


@dataclass(frozen=True, slots=True)
class PathLog:
    """What one path run logs: its files, its figures, its load test and its figures' interval bounds."""

    name: str
    files: PathFiles | None
    metrics: PathMetrics | None
    report: LatencyReport | None
    intervals: Mapping[str, float]


def _log_path(
    tracker: Tracker, parent: RunHandle, p: PathLog, tags: dict[str, str], span: Span | None
) -> None:
    name, files, metrics = p.name, p.files, p.metrics
    path_tags = {**tags, TAG_PATH: name}
    if metrics is not None:
        path_tags[TAG_TARGET] = metrics.serving_target
    with tracker.run(f"path: {name}", "path", parent=parent, tags=path_tags, span=span) as run:
        params = loadtest_params(p.report) if p.report is not None else {}
        if metrics is not None:
            tracker.log(run, {**path_metric_dict(metrics), **p.intervals}, {**path_params(metrics), **params})
        elif params:
            tracker.log(run, params=params)
        if files is None:
            return
        if files.deployment_file is not None:
            tracker.log_artifact(run, files.deployment_file, ART_DEPLOY)
        for f in files.loadtest_files:
            tracker.log_artifact(run, f, ART_LOADTEST)
        if files.requests:
            import pandas as pd

            rows = [r.to_json_dict() for r in files.requests]
            frame = pd.DataFrame(rows).drop(columns=["chunk_times_s"], errors="ignore")
            if not frame.empty:
                tracker.log_dataset(
                    run, frame, name=f"loadtest-{name}", source=files.requests_source, context="loadtest"
                )


def _log_comparison(
    tracker: Tracker, parent: RunHandle, c: Comparison, report_dir: Path | None, figures: Mapping[str, Any]
) -> None:
    tracker.log(
        parent,
        comparison_metric_dict(c),
        comparison_params(c),
        {"gpuplace.winner": c.score.winner or "none", TAG_VERDICT: verdict_line(c).replace("**", "")[:5000]},
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
