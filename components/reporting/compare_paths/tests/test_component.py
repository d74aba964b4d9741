"""compare_paths: the function's wiring called directly, and the real component under kfp.local.

No ``from __future__ import annotations`` here: kfp reads the test's own component annotations.
"""

import json
from pathlib import Path

import pytest

from gpuplace.components.reporting.compare_paths import compare_paths
from tests.support.kfp_artifacts import FakeArtifact as _Art
from tests.support.sample import write_sample_inputs


def test_python_func_writes_all_outputs(tmp_path: Path) -> None:
    s = write_sample_inputs(tmp_path / "in", requests=40)
    outs = {n: _Art(tmp_path / n) for n in ("comparison", "report_md", "report_html", "metrics")}
    compare_paths.python_func(
        native_deployment=_Art(s.deployments["native"]),
        native_loadtest=_Art(s.loadtests["native"]),
        kubeflow_deployment=_Art(s.deployments["kubeflow"]),
        kubeflow_loadtest=_Art(s.loadtests["kubeflow"]),
        plan=_Art(s.plan),
        inventory="h100-nvlink",
        weights="tpot_p99=0.5,provisioning=0.5",
        assess="reuse=native:0.2,kubeflow:0.9",
        penalty_usd_per_breach=0.05,
        engineering_weeks=3,
        rate_usd_per_week=5000,
        saved_usd_per_quarter=120000,
        **outs,
    )
    data = json.loads(Path(outs["comparison"].path).read_text())
    assert data["roi"]["multiple"] == pytest.approx(8.0)
    assert data["assessed"] == {"reuse": {"native": 0.2, "kubeflow": 0.9}}
    assert "data:image/png;base64," in Path(outs["report_html"].path).read_text()
    assert Path(outs["report_md"].path).read_text().startswith("# gpuplace comparison")
    assert outs["metrics"].logged["roi_multiple"] == pytest.approx(8.0)
    assert outs["comparison"].metadata["winner"] == data["score"]["winner"]


def test_python_func_rejects_bad_weights_before_writing(tmp_path: Path) -> None:
    s = write_sample_inputs(tmp_path / "in", requests=10)
    outs = {n: _Art(tmp_path / n) for n in ("comparison", "report_md", "report_html", "metrics")}
    with pytest.raises(ValueError, match=r"weights='tpot_p99=0.5': weights sum to 0.5"):
        compare_paths.python_func(
            native_deployment=_Art(s.deployments["native"]),
            native_loadtest=_Art(s.loadtests["native"]),
            kubeflow_deployment=_Art(s.deployments["kubeflow"]),
            kubeflow_loadtest=_Art(s.loadtests["kubeflow"]),
            weights="tpot_p99=0.5",
            **outs,
        )
    assert not any(Path(o.path).exists() for o in outs.values())


def test_python_func_fails_the_task_when_the_paths_ran_different_specs(tmp_path: Path) -> None:
    from dataclasses import replace

    from gpuplace.compare import IncomparablePaths
    from gpuplace.deploy import read_record, write_record

    s = write_sample_inputs(tmp_path / "in", requests=10)
    kubeflow = read_record(s.deployments["kubeflow"])
    assert kubeflow.serving is not None
    write_record(replace(kubeflow, serving=replace(kubeflow.serving, engine="transformers")), tmp_path / "kf")
    outs = {n: _Art(tmp_path / n) for n in ("comparison", "report_md", "report_html", "metrics")}
    with pytest.raises(IncomparablePaths, match="engine: 'vllm' ≠ 'transformers'"):
        compare_paths.python_func(
            native_deployment=_Art(s.deployments["native"]),
            native_loadtest=_Art(s.loadtests["native"]),
            kubeflow_deployment=_Art(tmp_path / "kf" / "deployment.json"),
            kubeflow_loadtest=_Art(s.loadtests["kubeflow"]),
            **outs,
        )
    assert not Path(outs["comparison"].path).exists()  # no verdict written


def test_component_spec_has_its_interface() -> None:
    spec = compare_paths.component_spec
    assert set(spec.outputs or {}) == {"comparison", "report_md", "report_html", "metrics"}
    assert spec.outputs["report_html"].type == "system.HTML@0.0.1"
    assert spec.implementation.container.image.startswith("ghcr.io/gpuplace/gpuplace-components:")


@pytest.mark.integration
def test_runs_under_the_local_runner(kfp_local: Path) -> None:
    from kfp import dsl
    from kfp.dsl import Artifact, Output

    @dsl.component(base_image="python:3.11")
    def sample_inputs(
        native_deployment: Output[Artifact],
        native_loadtest: Output[Artifact],
        kubeflow_deployment: Output[Artifact],
        kubeflow_loadtest: Output[Artifact],
        plan: Output[Artifact],
    ) -> None:
        """The upstream steps' outputs, from the sample builder (no cluster here to deploy to)."""
        import shutil
        import tempfile
        from pathlib import Path

        from tests.support.sample import write_sample_inputs

        s = write_sample_inputs(tempfile.mkdtemp(), requests=30)
        shutil.copyfile(s.deployments["native"], native_deployment.path)
        shutil.copyfile(s.deployments["kubeflow"], kubeflow_deployment.path)
        shutil.copytree(s.loadtests["native"], native_loadtest.path)
        shutil.copytree(s.loadtests["kubeflow"], kubeflow_loadtest.path)
        copy = shutil.copytree if Path(s.plan).is_dir() else shutil.copyfile
        copy(s.plan, plan.path)

    @dsl.pipeline
    def p() -> None:
        planned = sample_inputs()
        with dsl.ParallelFor(
            [1, 2], parallelism=1
        ):  # two runs of each path, as orchestration_comparison's loop
            up = sample_inputs()
        compare_paths(
            native_deployment=dsl.Collected(up.outputs["native_deployment"]),
            native_loadtest=dsl.Collected(up.outputs["native_loadtest"]),
            kubeflow_deployment=dsl.Collected(up.outputs["kubeflow_deployment"]),
            kubeflow_loadtest=dsl.Collected(up.outputs["kubeflow_loadtest"]),
            plan=planned.outputs["plan"],
            inventory="h100-nvlink",
            penalty_usd_per_breach=0.05,
        )

    p()
    html = [f for f in kfp_local.rglob("report_html") if f.is_file()]
    assert html and "data:image/png;base64," in html[0].read_text()
    comparison = [f for f in kfp_local.rglob("comparison") if f.is_file()]
    assert json.loads(comparison[0].read_text())["paths"][0]["path"] == "native"
    assert json.loads(comparison[0].read_text())["score"]["runs"] == {"native": 2, "kubeflow": 2}


def test_python_func_pools_the_runs_it_is_given_as_lists(tmp_path: Path) -> None:
    """What dsl.Collected hands over from the pipeline's loop of repeated runs: a list per input, one
    entry per run; the comparison pools both runs of each path."""
    a = write_sample_inputs(tmp_path / "a", requests=20)
    b = write_sample_inputs(tmp_path / "b", requests=20, seed=7)
    outs = {n: _Art(tmp_path / n) for n in ("comparison", "report_md", "report_html", "metrics")}
    compare_paths.python_func(
        native_deployment=[_Art(s.deployments["native"]) for s in (a, b)],
        native_loadtest=[_Art(s.loadtests["native"]) for s in (a, b)],
        kubeflow_deployment=[_Art(s.deployments["kubeflow"]) for s in (a, b)],
        kubeflow_loadtest=[_Art(s.loadtests["kubeflow"]) for s in (a, b)],
        **outs,
    )
    data = json.loads(Path(outs["comparison"].path).read_text())
    assert data["score"]["runs"] == {"native": 2, "kubeflow": 2}
    assert outs["metrics"].logged["native_load_test_runs"] == 2
    assert "over 2 runs per path" in outs["comparison"].metadata["verdict"]


def test_python_func_refuses_runs_that_do_not_line_up(tmp_path: Path) -> None:
    s = write_sample_inputs(tmp_path / "in", requests=10)
    outs = {n: _Art(tmp_path / n) for n in ("comparison", "report_md", "report_html", "metrics")}
    with pytest.raises(ValueError, match=r"native_loadtest=.*the native path's runs do not line up"):
        compare_paths.python_func(
            native_deployment=[_Art(s.deployments["native"])] * 2,
            native_loadtest=[_Art(s.loadtests["native"])],
            kubeflow_deployment=_Art(s.deployments["kubeflow"]),
            kubeflow_loadtest=_Art(s.loadtests["kubeflow"]),
            **outs,
        )
    assert not Path(outs["comparison"].path).exists()
