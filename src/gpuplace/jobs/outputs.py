"""A pipeline run's task outputs, read back once into typed values for the main job.

kfp's local runner writes a task's output ``name`` to ``<task>/<name>``, and a task inside a loop
(``orchestration_comparison``'s repeated runs) to ``<loop>-iteration-<i>/<task>/<name>``. Where each task
sits is read from the compiled pipeline (its DAG's task names and the loops they run in), not guessed
from folder names: :func:`task_folders`. :func:`read_run` reads what the main job reports, once each: the
plan, every path's deployment records and load-test reports, the comparison, the report a person reads
first, and where MLflow shows the run (:class:`RunOutputs`). Components are named by their component
objects, so a renamed component cannot leave a stale name here.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuplace.errors import InvalidInput
from gpuplace.plandir import PlanDir, read_plan_dir
from gpuplace.types import DeploymentRecord
from gpuplace.types.compare import Comparison
from gpuplace.types.latency import PredictedVsMeasured
from gpuplace.types.loadtest import LatencyReport
from gpuplace.units import ms


def leaf_tasks(pipeline_spec: Any) -> Iterator[tuple[tuple[tuple[str, Any], ...], str, Any]]:
    """Every component task of a compiled ``pipeline_spec`` (a ``PipelineSpec``), in run order, as
    (the DAG tasks around it, outermost first, as (name, task); its name; the task): a level's own tasks
    before the DAGs inside it (a loop, an exit handler), each group by name."""
    components = pipeline_spec.components

    def inner(task: Any) -> Any:
        component = components[task.component_ref.name]
        return component.dag if component.HasField("dag") else None

    def walk(dag: Any, around: tuple[tuple[str, Any], ...]) -> Iterator[Any]:
        for name in sorted(dag.tasks, key=lambda n: (inner(dag.tasks[n]) is not None, n)):
            task = dag.tasks[name]
            sub = inner(task)
            if sub is None:
                yield around, name, task
            else:
                yield from walk(sub, (*around, (name, task)))

    yield from walk(pipeline_spec.root.dag, ())


def task_folders(pipeline_spec: Any, outputs: Path) -> dict[str, list[Path]]:
    """Component name (``load-test``) → the folders its tasks wrote, one per run, in run order: the
    top-level tasks first, then a loop's iterations by number. From the compiled ``pipeline_spec``
    (:func:`leaf_tasks`): an exit handler's tasks sit beside the others, a loop's under its iterations."""
    found: dict[str, list[Path]] = defaultdict(list)
    for around, name, task in leaf_tasks(pipeline_spec):
        bases = [outputs]
        for dag_name, dag_task in around:
            if dag_task.HasField("parameter_iterator"):  # a loop runs under its iterations, by number
                bases = [b / f"{dag_name}-iteration-{i}" for b in bases for i in _iterations(b, dag_name)]
        key = task.component_ref.name.removeprefix("comp-")
        found[key] += [b / name for b in bases if (b / name).is_dir()]
    return dict(found)


def _iterations(base: Path, loop: str) -> list[int]:
    i, out = 0, []
    while (base / f"{loop}-iteration-{i}").is_dir():
        out.append(i)
        i += 1
    return out


@dataclass(frozen=True, slots=True)
class PathRun:
    """One run of one orchestration path: its deployment record and its load test (None: not written)."""

    label: str  # "native", "kubeflow", or with repeated runs "native #2"
    record: DeploymentRecord | None
    report: LatencyReport | None


@dataclass(frozen=True, slots=True)
class RunOutputs:
    """What a pipeline run wrote, read once; None/empty for what a failed run did not write."""

    folder: Path
    plan: PlanDir | None
    profile: Path | None  # the profile task's output folder (the fleet is planned with it)
    runs: tuple[PathRun, ...]
    prediction: PredictedVsMeasured | None  # beside the native path's first load test
    comparison: Comparison | None
    report: Path | None  # the Markdown report a person reads first
    mlflow_url: str

    @property
    def measured(self) -> LatencyReport | None:
        """The native path's (first) load test."""
        return next((r.report for r in self.runs if r.label.startswith("native") and r.report), None)

    def served_on(self) -> list[str]:
        return [r.record.served_on for r in self.runs if r.record is not None]


def read_run(pipeline_spec: Any, outputs: Path) -> RunOutputs:
    """The run's outputs under ``outputs`` as typed values, each file read once."""
    from gpuplace.components.benchmarking.load_test import load_test
    from gpuplace.components.benchmarking.serve_and_load_test import serve_and_load_test
    from gpuplace.components.placement.plan_placement import plan_placement
    from gpuplace.components.profiling.profile_latency import profile_latency
    from gpuplace.components.reporting.compare_paths import compare_paths
    from gpuplace.components.serving.deploy_inference import deploy_inference
    from gpuplace.deploy import read_record
    from gpuplace.loadtest.io import read_report_and_prediction
    from gpuplace.steps.compare import read_comparison

    folders = task_folders(pipeline_spec, outputs)

    def output(component: Any, name: str) -> list[Path]:
        return [f / name for f in folders.get(component.name, []) if (f / name).exists()]

    runs: list[PathRun] = []
    prediction = None
    for path, deployer, tester in (
        ("native", deploy_inference, load_test),
        ("kubeflow", serve_and_load_test, serve_and_load_test),
    ):
        deps = [read_record(p) for p in output(deployer, "deployment") if p.is_file()]
        reps = [p for p in output(tester, "report") if p.is_file()]
        read = [read_report_and_prediction(p) for p in reps]
        if path == "native" and read:
            prediction = read[0][1]
        n = max(len(deps), len(reps))
        for i in range(n):
            runs.append(
                PathRun(
                    f"{path} #{i + 1}" if n > 1 else path,
                    deps[i] if i < len(deps) else None,
                    read[i][0] if i < len(read) else None,
                )
            )
    plans = output(plan_placement, "plan")
    comparisons = output(compare_paths, "comparison")
    report = output(compare_paths, "report_md") if comparisons else output(load_test, "summary")
    profiles = output(profile_latency, "profile")
    return RunOutputs(
        folder=outputs,
        plan=read_plan_dir(plans[0]) if plans else None,
        profile=profiles[0] if profiles else None,
        runs=tuple(runs),
        prediction=prediction,
        comparison=read_comparison(comparisons[0]) if comparisons else None,
        report=report[0] if report else None,
        mlflow_url=_mlflow_url([f for fs in folders.values() for f in fs]),
    )


def require(value: Any, what: str, outputs: Path) -> Any:
    """``value``, or a clear error naming the output the run did not write."""
    if value is None:
        raise InvalidInput("outputs", str(outputs), f"holds no {what}", "See the run's runner.log")
    return value


def _mlflow_url(task_dirs: list[Path]) -> str:
    """The MLflow parent run's page, from what the tracking task recorded: ``compare_paths``'s comparison
    metadata, or ``track_run``'s return value ("...; the run: URL"); "" when neither did."""
    for f in sorted(d / "executor_output.json" for d in task_dirs):
        if not f.is_file():
            continue
        data = json.loads(f.read_text())
        for art in ((data.get("artifacts") or {}).get("comparison") or {}).get("artifacts") or []:
            if url := (art.get("metadata") or {}).get("mlflow_url"):
                return str(url)
        found = re.search(r"the run: (\S+)", str((data.get("parameterValues") or {}).get("Output", "")))
        if found:
            return found.group(1)
    return ""


def format_paths(run: RunOutputs) -> list[str]:
    """One line per path that ran: measured nodes and GPU devices, provisioning, and the load test."""
    from gpuplace.deploy import provisioning_split

    lines = [
        f"{'path':11} {'nodes (measured)':18} {'GPUs (measured)':30} {'provisioning s':>14} "
        f"{'p99 TTFT ms':>11} {'p99 TPOT ms':>11} {'ok/failed':>9}"
    ]
    for r in run.runs:
        dep, rep = r.record, r.report
        nodes = ",".join(sorted({p.node for p in dep.pods if p.node})) if dep else "-"
        gpus = "-"
        if dep is not None:
            ids = [g for p in dep.pods for g in p.gpu_ids]
            held = sum(p.gpu_count for p in dep.pods)
            gpus = (
                ",".join(ids)
                if ids
                else (f"{held}× {dep.pods[0].gpu_resource} (node level)" if held else "none")
            )
        prov = dep.provisioning() if dep else None
        provisioning = f"{prov.max:.2f}" if prov is not None and prov.count else "unknown"
        ttft = ms(rep.ttft.p99, 2) if rep else "-"
        tpot = ms(rep.tpot.p99, 2) if rep else "-"
        done = f"{rep.completed}/{rep.failed}" if rep else "-"
        lines.append(
            f"{r.label:11} {nodes or '-':18} {gpus:30} {provisioning:>14} {ttft:>11} {tpot:>11} {done:>9}"
        )
        if dep is not None and dep.mismatches():
            lines += [f"{'':11} placement mismatch: {m}" for m in dep.mismatches()]
        if dep is not None:
            lines += [f"{'':11} {line}" for line in provisioning_split(dep)]
    return lines


def format_partial(pipeline_spec: Any, outputs: Path) -> str:
    """What the tasks that finished measured, for a run that failed ("" when nothing was)."""
    try:
        lines = format_paths(read_run(pipeline_spec, outputs))
    except InvalidInput as e:  # a half-written output: say so rather than hide the task's own failure
        return f"(the finished tasks' outputs could not be read: {e})"
    return "\n".join(lines) if len(lines) > 1 else ""
