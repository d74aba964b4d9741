"""Reading a pipeline run's task outputs back: a loop's iterations in run order, each path's runs labelled."""

from __future__ import annotations

from pathlib import Path

from gpuplace.jobs.outputs import all_outputs, path_outputs


def _touch(p: Path) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("{}")
    return p


def test_a_loop_s_outputs_come_in_run_order_after_the_top_level_ones(tmp_path: Path) -> None:
    runs = [_touch(tmp_path / f"for-loop-2-iteration-{i}" / "load-test" / "report") for i in (10, 2, 0)]
    top = _touch(tmp_path / "load-test" / "report")
    assert all_outputs(tmp_path, "load-test", "report") == [top, runs[2], runs[1], runs[0]]  # 0, 2, 10


def test_each_path_s_runs_are_labelled_with_their_number(tmp_path: Path) -> None:
    for i in (0, 1):
        _touch(tmp_path / f"for-loop-2-iteration-{i}" / "deploy-inference" / "deployment")
        _touch(tmp_path / f"for-loop-2-iteration-{i}" / "load-test" / "report")
    _touch(tmp_path / "for-loop-2-iteration-0" / "serve-and-load-test" / "report")
    labels = [(label, dep is not None, rep is not None) for label, dep, rep in path_outputs(tmp_path)]
    assert labels == [("native #1", True, True), ("native #2", True, True), ("kubeflow", False, True)]
