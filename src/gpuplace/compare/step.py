"""The comparison step shared by ``gpuplace compare`` and the ``compare_paths`` component.

Parses every parameter first (weights, assessments, money figures, input files) so that bad input
fails before anything is written or logged; then computes the :class:`Comparison`, writes
``comparison.json`` and the report (Markdown, HTML, PNG plots) into one folder, and, when asked,
logs the whole thing to MLflow as a parent run with one child per path.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuplace.compare import compare_paths
from gpuplace.compare.inputs import default_fragmentation, load_path_result
from gpuplace.compare.metrics import PathResult
from gpuplace.compare.score import parse_assessed, parse_weights
from gpuplace.errors import InvalidInput
from gpuplace.loadtest.io import RECORDS_JSONL, RECORDS_PARQUET, read_records, read_report
from gpuplace.plandir import PlanDir, read_plan_dir
from gpuplace.types.compare import PATHS, Comparison
from gpuplace.types.loadtest import LatencyReport, RequestResult


@dataclass(frozen=True, slots=True)
class PathInput:
    path: str
    deployment: str
    loadtest: str  # the load test's --out folder or its report.json
    sweep: tuple[str, ...] = ()  # more load tests of the same path at other rates (TPOT vs rate)


@dataclass(frozen=True, slots=True)
class MlflowOptions:
    enabled: bool = False
    uri: str = ""  # "" = MLFLOW_TRACKING_URI, else the local store
    experiment: str = "gpuplace"
    workdir: str = ".gpuplace/mlflow"
    fallback_local: bool = False
    run_name: str = ""
    kfp_run_id: str = ""
    profile: str = ""  # profile Parquet to log under the same parent run
    manifests: str = ""  # folder of rendered manifests
    system_metrics: bool = False


@dataclass(frozen=True, slots=True)
class CompareOptions:
    paths: tuple[PathInput, ...]
    plan: str = ""
    inventory: str = ""
    gpu_catalog: str | None = None
    weights: str = ""
    assess: tuple[str, ...] = ()
    penalty_usd_per_breach: float = 0.0
    engineering_weeks: float = 0.0
    rate_usd_per_week: float = 0.0
    saved_usd_per_quarter: float | None = None
    adopt: str = ""
    mlflow: MlflowOptions = field(default_factory=MlflowOptions)

    @classmethod
    def from_params(cls, params: Mapping[str, Any], paths: tuple[PathInput, ...]) -> CompareOptions:
        """From the edges' names (``gpuplace compare`` flags and the ``compare_paths`` parameters):
        ``assess`` as a list or a ";"-separated string, a negative or missing saving = derive it."""
        assess = params.get("assess") or ()
        saved = params.get("saved_usd_per_quarter")
        return cls(
            paths=paths,
            plan=str(params.get("plan") or ""),
            inventory=str(params.get("inventory") or ""),
            gpu_catalog=params.get("gpu_catalog"),
            weights=str(params.get("weights") or ""),
            assess=tuple(a for a in (assess.split(";") if isinstance(assess, str) else assess) if a.strip()),
            penalty_usd_per_breach=float(params.get("penalty_usd_per_breach") or 0.0),
            engineering_weeks=float(params.get("engineering_weeks") or 0.0),
            rate_usd_per_week=float(params.get("rate_usd_per_week") or 0.0),
            saved_usd_per_quarter=None if saved is None or saved < 0 else float(saved),
            adopt=str(params.get("adopt") or ""),
            mlflow=MlflowOptions(
                enabled=bool(params.get("log_to_mlflow")),
                uri=str(params.get("mlflow_uri") or ""),
                experiment=str(params.get("mlflow_experiment") or "gpuplace"),
                workdir=str(params.get("mlflow_workdir") or ".gpuplace/mlflow"),
                fallback_local=bool(params.get("mlflow_fallback_local")),
                run_name=str(params.get("run_name") or ""),
                kfp_run_id=str(params.get("kfp_run_id") or ""),
                profile=str(params.get("profile") or ""),
                manifests=str(params.get("manifests") or ""),
                system_metrics=bool(params.get("system_metrics")),
            ),
        )


@dataclass(frozen=True, slots=True)
class CompareOutputs:
    comparison: Comparison
    out_dir: Path
    comparison_json: Path
    report_md: Path
    report_html: Path
    plots: dict[str, Path]
    mlflow_run_id: str = ""
    mlflow_where: str = ""
    figures: Mapping[str, Any] = field(default_factory=dict)  # kept open only when asked (for MLflow)
    plan_dir: PlanDir | None = None


COMPARISON_FILE = "comparison.json"


def read_comparison(path: str | Path) -> Comparison:
    """A ``comparison.json`` (or the folder holding one) as :func:`run_compare_step` wrote it."""
    p = Path(path)
    if p.is_dir():
        p = p / COMPARISON_FILE
    try:
        return Comparison.from_json_dict(json.loads(p.read_text()))
    except (FileNotFoundError, IsADirectoryError):
        raise InvalidInput(
            "comparison", str(p), "no such file", "Give gpuplace compare's comparison.json"
        ) from None
    except json.JSONDecodeError as e:
        raise InvalidInput("comparison", str(p), f"is not JSON ({e.msg} at line {e.lineno})", "") from None
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise InvalidInput("comparison", str(p), f"is not a comparison ({e})", "") from None


def loadtest_records(loadtest: str) -> list[RequestResult]:
    folder = Path(loadtest)
    folder = folder if folder.is_dir() else folder.parent
    for name in (RECORDS_JSONL, RECORDS_PARQUET):
        if (folder / name).is_file():
            return read_records(folder / name)
    return []


def run_compare_step(
    options: CompareOptions, out_dir: str | Path, *, keep_figures: bool = False
) -> CompareOutputs:
    """Load, compare, and write comparison.json and the report. Logging to MLflow is the tracking
    room's (:func:`gpuplace.tracking.step.compare_and_track`), which calls this."""
    names = [p.path for p in options.paths]
    assessed = parse_assessed(options.assess, names)
    weights = parse_weights(options.weights, assessed)
    results: list[PathResult] = [load_path_result(p.path, p.deployment, p.loadtest) for p in options.paths]
    sweeps: dict[str, list[LatencyReport]] = {
        p.path: [r.report] + [read_report(s, f"{p.path}_sweep") for s in p.sweep]
        for p, r in zip(options.paths, results, strict=True)
    }
    planned = read_plan_dir(options.plan) if options.plan else None
    plan = planned.plan if planned is not None else None
    fleet = catalog = None
    if options.inventory:
        from gpuplace.catalog import load_gpu_catalog
        from gpuplace.inventory import load_inventory

        catalog = load_gpu_catalog(options.gpu_catalog)
        fleet = load_inventory(options.inventory, catalog=catalog)
    comparison = compare_paths(
        results,
        plan=plan,
        fleet=fleet,
        catalog=catalog,
        fragmentation=default_fragmentation(),
        weights=weights,
        assessed=assessed,
        penalty_usd_per_breach=options.penalty_usd_per_breach,
        engineering_weeks=options.engineering_weeks,
        rate_usd_per_week=options.rate_usd_per_week,
        saved_usd_per_quarter=options.saved_usd_per_quarter,
        adopt=options.adopt,
        required_paths=PATHS,
    )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cjson = out / COMPARISON_FILE
    cjson.write_text(json.dumps(comparison.to_json_dict(), indent=2, allow_nan=False) + "\n")
    records = {p.path: loadtest_records(p.loadtest) for p in options.paths}
    from gpuplace.report import write_report

    files = write_report(
        comparison,
        out,
        records={k: v for k, v in records.items() if v} or None,
        sweeps=sweeps,
        keep_figures=keep_figures,
    )
    return CompareOutputs(
        comparison,
        out,
        cjson,
        files.markdown,
        files.html,
        dict(files.plots),
        figures=files.figures,
        plan_dir=planned,
    )


def parse_path_inputs(
    native_deployment: str,
    native_loadtest: str,
    kubeflow_deployment: str,
    kubeflow_loadtest: str,
    native_sweep: Sequence[str] = (),
    kubeflow_sweep: Sequence[str] = (),
) -> tuple[PathInput, ...]:
    """The two paths' inputs; a path given only in part is an error naming the missing file."""
    out = []
    for path, dep, lt, sweep in (
        ("native", native_deployment, native_loadtest, native_sweep),
        ("kubeflow", kubeflow_deployment, kubeflow_loadtest, kubeflow_sweep),
    ):
        if not dep or not lt:
            missing = f"{path}_deployment" if not dep else f"{path}_loadtest"
            raise InvalidInput(
                missing,
                "",
                f"the {path} path's results are missing",
                f"Give --{missing.replace('_', '-')} (docs/comparison.md#inputs)",
            )
        out.append(PathInput(path, dep, lt, tuple(sweep)))
    return tuple(out)
