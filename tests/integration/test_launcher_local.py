"""The launcher stand-in's executor input (`gpuplace.manifests.launcher`), read by kfp's own executor.

Each task's container command and args come from the checked-in compiled pipeline YAML, with ``{{$}}``
resolved to the executor input the driver would give, and run here on the host as the launcher would run
them in the task's container (the real-node test runs them in their images: tests/integration/
test_realnode_pods.py). Artifact URIs are local paths, which kfp's executor uses as they are. KFP's
launcher binary itself cannot be had here (no image registry), so nothing is uploaded and no ML Metadata
is written; what is checked is that the executor input is one kfp's executor accepts and reads as the
driver's would be read: a list of artifacts for a loop's collected outputs, and whole numbers as the
driver's protobuf JSON writes them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpuplace.jobs.submit import compiled_path
from gpuplace.k8s.kfp_task import plan_outputs
from gpuplace.manifests.kfp_package import find_task, load_package
from gpuplace.manifests.kfp_pod import kfp_task_pod
from gpuplace.manifests.launcher import executor_input, launched_pod
from gpuplace.plandir import read_plan_dir
from tests.support.sample import write_sample_inputs

pytestmark = pytest.mark.integration


def _run_on_host(
    pipeline: str,
    task: str,
    parameters: dict[str, Any],
    out: Path,
    plan: Path,
    inputs: dict[str, str | list[str]] | None = None,
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """``task``'s command and resolved args (``plan``: the plan directory whose kfp outputs the tasks after
    plan-placement are given), run in a scratch directory with this venv's python first on PATH (the
    component's script calls ``python3``)."""
    package = compiled_path(pipeline)
    spec, _platform = load_package(package)
    task_spec, _chain = find_task(spec, task)
    component = spec["components"][task_spec["componentRef"]["name"]]
    outputs = {"plan-placement": plan_outputs(read_plan_dir(plan))}
    built = kfp_task_pod(package, task, pod_name=f"c-{task}", task_outputs=outputs)
    executor = executor_input(
        component,
        {**built.parameters, **parameters},
        root_uri=str(out / "artifacts"),
        input_artifacts=inputs or {},
        output_dir=str(out / "parameters"),
    )
    (main,) = [c for c in launched_pod(built.pod, executor)["spec"]["containers"] if c["name"] == "main"]
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    scratch = out / "cwd"
    scratch.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [*main["command"], *main["args"]], cwd=scratch, env=env, capture_output=True, text=True, timeout=600
    )
    return done, executor


def test_a_whole_number_reaches_an_int_parameter_as_an_int_and_the_output_parameter_is_written(
    tmp_path: Path,
) -> None:
    """``repeat_runs(repeats: int)``: the pipeline passes 2.0 (every parameter value is a protobuf double);
    the driver writes it as ``2``, and the component's output list lands in the executor output the launcher
    reads back (``outputs.outputFile``, its ``parameterValues``)."""
    plan = write_sample_inputs(tmp_path / "sample", requests=10).plan
    done, executor = _run_on_host("orchestration_comparison", "repeat-runs", {"repeats": 2.0}, tmp_path, plan)
    given = executor["inputs"]["parameterValues"]["repeats"]
    assert given == 2 and isinstance(given, int)
    assert done.returncode == 0, done.stderr[-3000:]
    written = json.loads((tmp_path / "parameters" / "output_metadata.json").read_text())
    assert written["parameterValues"] == {"Output": [1, 2]}


def test_a_loops_collected_outputs_reach_compare_paths_as_lists(tmp_path: Path) -> None:
    """``compare_paths`` takes each path's runs as ``Input[list[Artifact]]`` (``dsl.Collected``): two runs
    per path, given as lists of artifacts, are pooled as two runs each."""
    runs = [write_sample_inputs(tmp_path / f"run{i}", requests=60, seed=i) for i in (0, 1)]
    inputs: dict[str, str | list[str]] = {"plan": str(runs[0].plan)}
    for path in ("native", "kubeflow"):
        inputs[f"{path}_deployment"] = [str(r.deployments[path]) for r in runs]
        inputs[f"{path}_loadtest"] = [str(r.loadtests[path]) for r in runs]
    done, _ = _run_on_host(
        "orchestration_comparison",
        "compare-paths",
        {"inventory": "h100-nvlink"},
        tmp_path / "out",
        runs[0].plan,
        inputs,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    comparison = json.loads((tmp_path / "out" / "artifacts" / "comparison").read_text())
    assert comparison["score"]["runs"] == {"native": 2, "kubeflow": 2}
    assert (tmp_path / "out" / "artifacts" / "report_md").read_text().strip()
