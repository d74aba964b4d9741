"""Reading a pipeline run's task outputs back (gpuplace.jobs.outputs): each task found through the compiled
pipeline's DAG (a loop's iterations in run order, an exit handler's tasks in place), each path's runs
labelled, each file read once into typed values.

The folders are laid out as kfp's local runner lays them out (checked against a real local run by
tests/integration/test_profile_static_and_mainjob.py); the files in them are the real writers' output."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

from gpuplace.deploy import save_record
from gpuplace.jobs.outputs import read_run, task_folders
from gpuplace.loadtest.io import REPORT_FILE, write_outputs
from gpuplace.types import DeploymentRecord
from gpuplace.types.loadtest import LatencyReport
from tests.support.reports import latency_report
from tests.unit.test_architecture import SRC


def _spec():  # type: ignore[no-untyped-def]
    from gpuplace.pipelines.orchestration_comparison.pipeline import pipeline

    return pipeline.pipeline_spec


def _loop(spec) -> str:  # type: ignore[no-untyped-def]
    """The repeated runs' loop task, by its name in the compiled pipeline (``for-loop-2``)."""
    exit_handler = next(t for n, t in spec.root.dag.tasks.items() if n.startswith("exit-handler"))
    inner = spec.components[exit_handler.component_ref.name].dag.tasks
    return next(n for n, t in inner.items() if t.HasField("parameter_iterator"))


def _folder(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p


def test_a_loop_s_task_folders_come_in_run_order_after_the_top_level_ones(tmp_path: Path) -> None:
    spec = _spec()
    loop = _loop(spec)
    runs = [_folder(tmp_path / f"{loop}-iteration-{i}" / "load-test") for i in range(11)]
    _folder(tmp_path / "plan-placement")
    _folder(tmp_path / "for-loop-99-iteration-0" / "load-test")  # a loop the pipeline does not have
    found = task_folders(spec, tmp_path)
    assert found["load-test"] == runs  # 0, 1, ..., 10: by number, not by name (10 after 9)
    assert found["plan-placement"] == [tmp_path / "plan-placement"]
    assert "deploy-inference" not in found or found["deploy-inference"] == []


def test_each_path_s_runs_are_read_once_and_labelled_with_their_number(tmp_path: Path) -> None:
    spec = _spec()
    loop = _loop(spec)
    reports = [latency_report([0.1 * (i + 1)] * 3, [0.01] * 3) for i in range(3)]

    def report_file(report: LatencyReport, at: Path) -> None:
        """report.json where the component's ``report`` output is: one file (run_loadtest_to_paths)."""
        write_outputs(tmp_path / "written", [], report, None)
        _folder(at.parent)
        shutil.copy(tmp_path / "written" / REPORT_FILE, at)

    for i in (0, 1):
        it = tmp_path / f"{loop}-iteration-{i}"
        record = DeploymentRecord("local", f"d{i}", "", "http://127.0.0.1:1", "tiny", True, served_on="cpu")
        save_record(record, _folder(it / "deploy-inference") / "deployment")  # the component's output file
        report_file(reports[i], it / "load-test" / "report")
    report_file(reports[2], tmp_path / f"{loop}-iteration-0" / "serve-and-load-test" / "report")
    run = read_run(spec, tmp_path)
    labels = [(r.label, r.record is not None, r.report is not None) for r in run.runs]
    assert labels == [("native #1", True, True), ("native #2", True, True), ("kubeflow", False, True)]
    assert [r.report.ttft.p50 for r in run.runs if r.report] == [0.1, 0.2, 0.30000000000000004]
    assert [r.record.name for r in run.runs if r.record] == ["d0", "d1"]
    assert run.measured is not None and run.measured.ttft.p50 == 0.1  # the native path's first run
    assert run.served_on() == ["cpu", "cpu"]
    assert run.plan is None and run.comparison is None and run.report is None and run.mlflow_url == ""


def test_the_main_job_finds_outputs_without_globbing_folder_names() -> None:
    """No ``glob``/``rglob``/``iterdir`` over task names in the job's reader or the main job, beyond the
    local runner's one run folder it names itself."""
    calls = {
        f"{name}: {ast.unparse(node)}"
        for name in ("outputs.py", "main.py")
        for node in ast.walk(ast.parse((SRC / "jobs" / name).read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("glob", "rglob")
    }
    assert not calls, calls
