"""The comparison step shared by ``gpuplace compare`` and the ``compare_paths`` component.

Reads each path's deployment record (:mod:`gpuplace.deploy.record`), load-test report and records
(:mod:`gpuplace.loadtest.io`) and the plan (:mod:`gpuplace.plandir`), each error naming its parameter
(``native_deployment``, ``kubeflow_report``...); the comparison itself is
:func:`gpuplace.compare.compare_paths` on those values.

:data:`PARAMS` (a :mod:`gpuplace.params` table) is the step's parameters: ``gpuplace compare`` makes its
flags from it (the per-path files, deployment and load test of each run, are its own arguments, as the
component's are artifacts), the ``compare_paths`` component's signature is checked against it, and
:func:`compare_options` reads either's values by its names into :class:`CompareOptions` (the edges'
spellings — repeated ``--assess`` or a ``;`` list, a negative saving for "derive it" — parsed there).

Parses every parameter first (weights, assessments, money figures, input files) so that bad input
fails before anything is written or logged; then computes the :class:`Comparison`, writes
``comparison.json`` and the report (Markdown, HTML, PNG plots) into one folder, and, when asked,
logs the whole thing to MLflow as a parent run with one child per path (:mod:`.track`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuplace.deploy.record import read_record
from gpuplace.errors import InvalidInput
from gpuplace.loadtest.io import RECORDS_JSONL, RECORDS_PARQUET, read_records, read_report
from gpuplace.params import Param, defaults, parse_as
from gpuplace.plandir import PlanDir, read_plan_dir
from gpuplace.tracking.config import DEFAULT_WORKDIR
from gpuplace.types.compare import PATHS, Comparison
from gpuplace.types.loadtest import LatencyReport, RequestResult

if TYPE_CHECKING:  # the comparison (numpy): imported when the step runs, not when `gpuplace` builds flags
    from gpuplace.compare.metrics import PathResult
    from gpuplace.report import ReportFiles


@dataclass(frozen=True, slots=True)
class PathInput:
    path: str
    deployment: str
    loadtest: str  # the load test's --out folder or its report.json
    sweep: tuple[str, ...] = ()  # more load tests of the same path at other rates (TPOT vs rate)
    records: str = ""  # the records file, when it is not beside the report (KFP hands each output alone)
    repeats: tuple[tuple[str, str], ...] = ()  # (deployment, load test) of more runs with the same workload
    repeat_records: tuple[str, ...] = ()  # their records files, when kept apart ("" = beside the report)


@dataclass(frozen=True, slots=True)
class MlflowOptions:
    enabled: bool = False
    uri: str = ""  # "" = MLFLOW_TRACKING_URI, else the local store
    experiment: str = "gpuplace"
    workdir: str = str(DEFAULT_WORKDIR)
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


# The comparison's parameters, beside the two paths' files (the command's arguments, the component's
# artifacts); the plan is an artifact of the component too.
COMPARISON: tuple[Param, ...] = (
    Param("plan", str, "", "the plan directory `gpuplace plan --out` wrote", component=False),
    Param("inventory", str, "", "the fleet: bundled name, fleet YAML, Alibaba CSV or cluster"),
    Param("gpu_catalog", str, "", "a gpus.csv to use instead of the bundled one", component=False),
    Param("weights", str, "", "e.g. tpot_p99=0.7,cost=0.3 (sum 1; default docs/comparison.md)"),
    Param(
        "assessed",
        list,
        [],
        "an assessed criterion, e.g. reuse=native:0.4,kubeflow:0.9 (repeatable)",
        "--assess",
        component=False,
    ),
    Param("assess", str, "", "assessed criteria separated by ';'", cli=False),
    Param("penalty_usd_per_breach", float, 0.0, "SLA penalty per request missing the SLO", unit="USD"),
    Param("engineering_weeks", float, 0.0, "ROI: weeks to adopt the mechanism"),
    Param("rate_usd_per_week", float, 0.0, "ROI: cost of one engineering week", unit="USD"),
    Param(
        "saved_usd_per_quarter",
        float,
        -1.0,
        "ROI: the saving per quarter; negative: derived from the breach costs",
        unit="USD",
    ),
    Param("adopt", str, "", "ROI: the path being adopted (default: the winner)", component=False),
)
MLFLOW: tuple[Param, ...] = (
    Param("log_to_mlflow", bool, False, "also log to MLflow (docs/tracking.md)", "--mlflow"),
    Param("mlflow_uri", str, "", "tracking URI (default MLFLOW_TRACKING_URI, else a local store)"),
    Param("mlflow_experiment", str, "gpuplace", "MLflow experiment", "--experiment"),
    Param("mlflow_workdir", str, str(DEFAULT_WORKDIR), "where the local store lives", component=False),
    Param("mlflow_fallback_local", bool, False, "log to the local store if the server is unreachable"),
    Param("run_name", str, "", "name of the MLflow parent run (default: compare <plan id>)", component=False),
    Param("kfp_run_id", str, "", "the KFP run id to tag the MLflow run with"),
    Param("profile", str, "", "profile Parquet to log under the same parent run", component=False),
    Param("manifests", str, "", "folder of rendered manifests to log with the plan", component=False),
    Param("system_metrics", bool, False, "log CPU (and GPU via NVML) usage", component=False),
)
PARAMS: tuple[Param, ...] = (*COMPARISON, *MLFLOW)


@dataclass(frozen=True, slots=True)
class CompareValues:
    """:data:`PARAMS`'s values, typed: one field per row, read by :func:`~gpuplace.params.parse_as` (its
    defaults are the table's alone)."""

    plan: str
    inventory: str
    gpu_catalog: str
    weights: str
    assessed: list[str]
    assess: str
    penalty_usd_per_breach: float
    engineering_weeks: float
    rate_usd_per_week: float
    saved_usd_per_quarter: float
    adopt: str
    log_to_mlflow: bool
    mlflow_uri: str
    mlflow_experiment: str
    mlflow_workdir: str
    mlflow_fallback_local: bool
    run_name: str
    kfp_run_id: str
    profile: str
    manifests: str
    system_metrics: bool


# the repeat_runs component's: runs of each path, interleaved; the fewest a verdict names a winner from
REPEAT_RUNS: tuple[Param, ...] = (
    Param(
        "repeats",
        int,
        3,
        "deploy and load-test each path N times, the paths' runs interleaved (kubeflow, native, kubeflow, "
        "...); the verdict's interval comes from the runs, a linear drift of the machine over them removed, "
        "and fewer than 3 cannot name a winner",
        cli=False,
    ),
)
_DEFAULTS = defaults(PARAMS)


def compare_options(params: Mapping[str, Any], paths: tuple[PathInput, ...]) -> CompareOptions:
    """The comparison of ``paths`` that ``params`` describe (:data:`PARAMS` by name, ``gpuplace compare``'s
    flags or the ``compare_paths`` component's parameters; other keys ignored): the assessed criteria of
    repeated ``--assess`` and of a ``;``-separated ``assess``, a negative saving = derive it."""
    p = parse_as(CompareValues, PARAMS, params)
    assess = [*p.assessed, *p.assess.split(";")]
    saved = p.saved_usd_per_quarter
    return CompareOptions(
        paths=paths,
        plan=p.plan,
        inventory=p.inventory,
        gpu_catalog=p.gpu_catalog or None,
        weights=p.weights,
        assess=tuple(a for a in assess if a.strip()),
        penalty_usd_per_breach=p.penalty_usd_per_breach,
        engineering_weeks=p.engineering_weeks,
        rate_usd_per_week=p.rate_usd_per_week,
        saved_usd_per_quarter=None if saved < 0 else saved,
        adopt=p.adopt,
        mlflow=MlflowOptions(
            enabled=p.log_to_mlflow,
            uri=p.mlflow_uri,
            experiment=p.mlflow_experiment or _DEFAULTS["mlflow_experiment"],  # "": the default
            workdir=p.mlflow_workdir or _DEFAULTS["mlflow_workdir"],
            fallback_local=p.mlflow_fallback_local,
            run_name=p.run_name,
            kfp_run_id=p.kfp_run_id,
            profile=p.profile,
            manifests=p.manifests,
            system_metrics=p.system_metrics,
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
    mlflow_url: str = ""  # the parent run's page in MLflow's UI
    figures: Mapping[str, Any] = field(default_factory=dict)  # kept open only when asked (for MLflow)
    plan_dir: PlanDir | None = None
    inputs: tuple[PathResult, ...] = ()  # each path's record, report and requests, as read (for tracking)

    def artifact_metadata(self) -> dict[str, str]:
        """What the ``comparison`` output's metadata says: the winner, the verdict, the MLflow run."""
        from gpuplace.report.render import verdict_line

        return {
            "winner": self.comparison.score.winner,
            "verdict": verdict_line(self.comparison).replace("**", ""),
            "mlflow_run_id": self.mlflow_run_id,
            "mlflow_url": self.mlflow_url,
        }


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


def load_path_result(path: str, deployment: str | Path, report: str | Path) -> PathResult:
    """One path's results; errors name ``<path>_deployment`` / ``<path>_report``."""
    from gpuplace.compare.metrics import PathResult

    if not str(deployment):
        raise InvalidInput(f"{path}_deployment", "", "is missing", "Give the path's deployment.json")
    if not str(report):
        raise InvalidInput(f"{path}_report", "", "is missing", "Give the path's load-test report.json")
    return PathResult(
        path=path,
        deployment=read_record(deployment, f"{path}_deployment"),
        report=read_report(report, f"{path}_report"),
    )


def _records(loadtest: str, records: str) -> tuple[RequestResult, ...]:
    return tuple(read_records(records) if records else loadtest_records(loadtest))


def loadtest_records(loadtest: str) -> list[RequestResult]:
    folder = Path(loadtest)
    folder = folder if folder.is_dir() else folder.parent
    for name in (RECORDS_JSONL, RECORDS_PARQUET):
        if (folder / name).is_file():
            return read_records(folder / name)
    return []


def _padded(records: Sequence[str], n: int) -> list[str]:
    return [*records, *[""] * (n - len(records))][:n]


def run_compare_step(
    options: CompareOptions, out_dir: str | Path, *, keep_figures: bool = False
) -> CompareOutputs:
    """Load, compare, and write comparison.json and the report. Logging to MLflow is the tracking
    step's (:func:`gpuplace.steps.track.compare_and_track`), which calls this."""
    from gpuplace.compare import compare_paths
    from gpuplace.compare.fragmentation import default_fragmentation
    from gpuplace.compare.score import parse_assessed, parse_weights

    names = [p.path for p in options.paths]
    assessed = parse_assessed(options.assess, names)
    weights = parse_weights(options.weights, assessed)
    results: list[PathResult] = [
        replace(load_path_result(p.path, p.deployment, p.loadtest), records=_records(p.loadtest, p.records))
        for p in options.paths
    ]
    repeats = {
        p.path: [
            replace(load_path_result(p.path, dep, lt), records=_records(lt, rec))
            for (dep, lt), rec in zip(p.repeats, _padded(p.repeat_records, len(p.repeats)), strict=True)
        ]
        for p in options.paths
        if p.repeats
    }
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
        repeats=repeats,
    )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cjson = out / COMPARISON_FILE
    cjson.write_text(json.dumps(comparison.to_json_dict(), indent=2, allow_nan=False) + "\n")
    records = {r.path: list(r.records) for r in results}
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
        inputs=tuple(results),
    )


def parse_path_inputs(
    native_deployment: str,
    native_loadtest: str,
    kubeflow_deployment: str,
    kubeflow_loadtest: str,
    native_sweep: Sequence[str] = (),
    kubeflow_sweep: Sequence[str] = (),
    *,
    native_records: str = "",
    kubeflow_records: str = "",
    native_repeat: Sequence[tuple[str, str]] = (),
    kubeflow_repeat: Sequence[tuple[str, str]] = (),
    native_repeat_records: Sequence[str] = (),
    kubeflow_repeat_records: Sequence[str] = (),
) -> tuple[PathInput, ...]:
    """The two paths' inputs; a path given only in part is an error naming the missing file.
    ``*_records`` name a records file kept apart from its report (KFP's outputs); ``*_repeat`` are
    (deployment, load test) pairs of more runs of the same workload, ``*_repeat_records`` their records
    files in the same order (KFP's outputs again)."""
    out = []
    for path, dep, lt, sweep, records, repeats, repeat_records in (
        (
            "native",
            native_deployment,
            native_loadtest,
            native_sweep,
            native_records,
            native_repeat,
            native_repeat_records,
        ),
        (
            "kubeflow",
            kubeflow_deployment,
            kubeflow_loadtest,
            kubeflow_sweep,
            kubeflow_records,
            kubeflow_repeat,
            kubeflow_repeat_records,
        ),
    ):
        if not dep or not lt:
            missing = f"{path}_deployment" if not dep else f"{path}_loadtest"
            raise InvalidInput(
                missing,
                "",
                f"the {path} path's results are missing",
                f"Give --{missing.replace('_', '-')} (docs/comparison.md#inputs)",
            )
        out.append(PathInput(path, dep, lt, tuple(sweep), records, tuple(repeats), tuple(repeat_records)))
    return tuple(out)


def parse_run_inputs(
    runs: Mapping[str, Sequence[str]],
) -> tuple[PathInput, ...]:
    """The two paths' inputs from lists with one entry per load-test run, in run order, as a pipeline's
    ``dsl.Collected`` over its repeated runs hands them (``native_deployment``, ``native_loadtest``,
    ``native_records``, the same for ``kubeflow``; records may be absent): a path's first run is its
    own, the others its repeats. Lists of one path that differ in length are an error naming them."""
    lists = {k: list(v) for k, v in runs.items()}
    for path in ("native", "kubeflow"):
        sizes = {k: len(v) for k, v in lists.items() if k.startswith(f"{path}_") and v}
        if len(set(sizes.values())) > 1:
            raise InvalidInput(
                f"{path}_loadtest",
                sizes,
                f"the {path} path's runs do not line up (each run needs its deployment and load test)",
                "Collect every output from the same loop of repeated runs",
            )

    def first(key: str) -> str:
        return lists.get(key, [""])[0] if lists.get(key) else ""

    def rest(key: str) -> list[str]:
        return lists.get(key, [])[1:]

    return parse_path_inputs(
        first("native_deployment"),
        first("native_loadtest"),
        first("kubeflow_deployment"),
        first("kubeflow_loadtest"),
        native_records=first("native_records"),
        kubeflow_records=first("kubeflow_records"),
        native_repeat=list(zip(rest("native_deployment"), rest("native_loadtest"), strict=False)),
        kubeflow_repeat=list(zip(rest("kubeflow_deployment"), rest("kubeflow_loadtest"), strict=False)),
        native_repeat_records=rest("native_records"),
        kubeflow_repeat_records=rest("kubeflow_records"),
    )


MAX_REPEATS = 20  # each repeat deploys and load-tests both paths once more


def repeat_runs(repeats: int) -> list[int]:
    """The run numbers 1..``repeats`` of a comparison whose paths are each deployed and load-tested
    ``repeats`` times (the items of the pipeline's loop over runs); a count outside 1..20 is refused."""
    if isinstance(repeats, bool) or not isinstance(repeats, int | float) or repeats != int(repeats):
        raise InvalidInput("repeats", repeats, "must be a whole number", "e.g. --repeats 3")
    if not 1 <= repeats <= MAX_REPEATS:
        raise InvalidInput(
            "repeats",
            repeats,
            f"must be between 1 and {MAX_REPEATS}",
            "Each repeat deploys and load-tests both paths once more; 2–5 is usual",
        )
    return list(range(1, int(repeats) + 1))


def run_report_step(
    comparison: str | Path, out: str | Path = "", loadtests: Mapping[str, str] | None = None
) -> tuple[Comparison, ReportFiles]:
    """``gpuplace report``: re-render the report of a ``comparison.json`` into ``out`` (default: its
    folder), with each path's per-request records from its load-test folder in ``loadtests`` when given."""
    from gpuplace.report import write_report

    src = Path(comparison)
    result = read_comparison(src)
    records = {p: loadtest_records(d) for p, d in (loadtests or {}).items() if d}
    files = write_report(result, out or src.parent, records={k: v for k, v in records.items() if v} or None)
    return result, files
