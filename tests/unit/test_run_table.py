"""Issue 34 item 1: the run table (``gpuplace.steps.run_params.RUN``) holds ``gpuplace run``, both pipelines
and every component they call together.

- each pipeline's signature is its rows: the same names, types and defaults;
- each parameter reaches, in the compiled pipeline (what KFP runs), the task inputs of the step rows the
  table points at, and every task input it reaches is a step row of its type, of its name (or that name
  with a step prefix), and of its default, unless the row says why not;
- ``gpuplace run``'s flags and ``MainJobConfig``'s fields are the rows with a flag, with the run's
  defaults, and the main job passes each of them to the pipeline it runs;
- a default changed in the table changes the pipelines' and the run's (a fresh interpreter).
The components' own signatures are held to their step rows by tests/unit/test_step_params.py.
"""

# no `from __future__ import annotations`: kfp reads the fabricated pipelines' annotations as types
import argparse
import inspect
import re
import subprocess
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import MISSING, asdict, fields
from pathlib import Path
from typing import Any

import pytest

from gpuplace.jobs.config import MainJobConfig
from gpuplace.jobs.outputs import leaf_tasks
from gpuplace.steps.run_params import RUN, RunParam, pipeline_rows, step_table
from tests.unit.test_step_params import _subparser

# the component each step's table is the signature of
COMPONENT_STEP = {
    "profile_latency": "profile",
    "plan_placement": "plan",
    "discover_inventory": "inventory",
    "deploy_inference": "deploy",
    "teardown_inference": "teardown",
    "load_test": "loadtest",
    "serve_and_load_test": "serve_and_loadtest",
    "compare_paths": "compare",
    "repeat_runs": "repeat_runs",
    "track_run": "track",
}
RUN_OWN = {"workdir", "fleet", "compare", "verbose"}  # gpuplace run's own fields, no pipeline's


def _pipelines() -> dict[str, Any]:
    from gpuplace.pipelines.llm_placement.pipeline import pipeline as placement
    from gpuplace.pipelines.orchestration_comparison.pipeline import pipeline as comparison

    return {"llm_placement": placement, "orchestration_comparison": comparison}


def reached(pipeline: Any) -> dict[str, set[tuple[str, str]]]:
    """Pipeline parameter → the (step, input) task inputs it reaches in the compiled pipeline, through
    the loops and exit handlers' own inputs (:func:`gpuplace.jobs.outputs.leaf_tasks`, the walk the main
    job reads outputs with); a platform setting (an accelerator's channel) left out."""
    spec = pipeline.pipeline_spec
    roots = set(spec.root.input_definitions.parameters)
    out: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for around, _, task in leaf_tasks(spec):
        func = re.sub(r"-\d+$", "", task.component_ref.name.removeprefix("comp-")).replace("-", "_")
        for name, value in task.inputs.parameters.items():
            if name.startswith("pipelinechannel--"):
                continue
            source = value.component_input_parameter
            for _, dag_task in reversed(around):  # up through the DAGs' own inputs
                outer = dag_task.inputs.parameters.get(source) if source else None
                source = outer.component_input_parameter if outer is not None else ""
            if source in roots:
                out[source].add((COMPONENT_STEP[func], name))
    return out


def _same_stem(a: str, b: str) -> bool:
    return a == b or a.endswith("_" + b) or b.endswith("_" + a)


def disagreements(pipeline: Any, rows: Sequence[RunParam]) -> list[str]:
    """Where a compiled pipeline and its run-table rows differ (empty: they agree)."""
    sig = inspect.signature(pipeline.pipeline_func).parameters
    table = {r.name: r for r in rows}
    out = [f"{n}: a pipeline parameter, not in the run table" for n in sorted(set(sig) - set(table))]
    out += [f"{n}: in the run table, not a pipeline parameter" for n in sorted(set(table) - set(sig))]
    feeds = reached(pipeline)
    steps_run = {step for reach in feeds.values() for step, _ in reach}  # a row's step may run in one only
    for name in sorted(set(sig) & set(table)):
        r, q = table[name], sig[name]
        if q.default != r.pipeline_default:
            out.append(f"{name}: default {q.default!r} in the pipeline, {r.pipeline_default!r} in the table")
        if q.annotation not in (r.step_row.kind.__name__, r.step_row.kind):
            out.append(
                f"{name}: type {q.annotation} in the pipeline, {r.step_row.kind.__name__} in the table"
            )
        if r.step in steps_run and (r.step, r.row_name) not in feeds[name]:
            out.append(f"{name}: does not reach {r.step}'s {r.row_name} (it reaches {sorted(feeds[name])})")
        if r.step and not feeds[name]:
            out.append(f"{name}: reaches no task")
        if not r.step and feeds[name]:
            out.append(f"{name}: the run's own row reaches {sorted(feeds[name])}: point it at that row")
        for step, input_name in sorted(feeds[name]):
            row = {p.name: p for p in step_table(step)}[input_name]
            if row.kind is not r.step_row.kind:
                out.append(
                    f"{name}: {row.kind.__name__} at {step}'s {input_name}, {r.step_row.kind.__name__} here"
                )
            if not _same_stem(name, input_name) and not (r.row == input_name and r.why):
                out.append(f"{name}: reaches {step}'s {input_name}, another name, with no reason given")
            if row.default != r.pipeline_default and not r.why:
                out.append(
                    f"{name}: default {r.pipeline_default!r}, {step}'s {input_name} {row.default!r}, "
                    "with no reason given"
                )
    return out


@pytest.mark.parametrize("name", ["llm_placement", "orchestration_comparison"])
def test_each_pipeline_is_its_rows_of_the_run_table(name: str) -> None:
    pipeline = _pipelines()[name]
    assert disagreements(pipeline, pipeline_rows(name)) == []
    inputs = pipeline.pipeline_spec.root.input_definitions.parameters
    assert [n for n, p in inputs.items() if not p.description] == []  # what the Kubeflow UI shows beside each


def test_a_pipeline_that_drifts_from_the_table_is_caught() -> None:
    """A renamed parameter, another default, and a parameter that reaches no row the table names."""
    from kfp import dsl

    from gpuplace.components.benchmarking.load_test import load_test

    row = RunParam("max_requests", "loadtest", default=200, why="a cluster's load test")

    @dsl.pipeline(name="renamed")
    def renamed(loadtest_requests: int = 200) -> None:
        load_test(max_requests=loadtest_requests)

    bad = disagreements(renamed, [row])
    assert "loadtest_requests: a pipeline parameter, not in the run table" in bad
    assert "max_requests: in the run table, not a pipeline parameter" in bad

    @dsl.pipeline(name="another-default")
    def another_default(max_requests: int = 100) -> None:
        load_test(max_requests=max_requests)

    assert disagreements(another_default, [row]) == [
        "max_requests: default 100 in the pipeline, 200 in the table"
    ]
    unexplained = RunParam("max_requests", "loadtest", default=200)  # the step's own is 100
    assert disagreements(another_default, [unexplained])[-1].endswith("with no reason given")

    @dsl.pipeline(name="elsewhere")
    def elsewhere(max_requests: int = 200) -> None:
        load_test(concurrency=max_requests)

    bad = disagreements(elsewhere, [row])
    assert any("does not reach loadtest's max_requests" in b for b in bad), bad
    assert any("reaches loadtest's concurrency, another name" in b for b in bad), bad


def test_every_row_says_why_it_differs_from_its_step_and_names_a_real_row() -> None:
    for r in RUN:
        row = r.step_row  # a KeyError for a row its step does not have
        renamed = bool(r.step) and not _same_stem(r.name, row.name)
        if renamed or row.default != r.pipeline_default or r.run_default != r.pipeline_default:
            assert r.why, f"{r.name}: differs from {r.step or 'its own'} row {row.name} with no reason"
    assert len({r.name for r in RUN}) == len(RUN)


def _run_flags() -> dict[str, argparse.Action]:
    return {a.dest: a for a in _subparser("run")._actions if a.dest != "help"}


def test_gpuplace_run_and_its_config_are_the_table_s_rows_with_the_run_s_defaults() -> None:
    flags = _run_flags()
    config = {f.name: f for f in fields(MainJobConfig)}
    rows = {r.name: r for r in RUN if r.run}
    assert set(flags) == set(config) == set(rows) | RUN_OWN, (sorted(set(flags) ^ set(config)),)
    for name, f in config.items():
        assert f.default is not MISSING, name
        assert flags[name].default == (str(f.default) if name == "workdir" else f.default), name
        if name in rows:
            assert f.default == rows[name].run_default, name
            assert flags[name].option_strings == [rows[name].param().cli_flag], name


def test_the_run_flags_choices_are_the_deploy_targets_and_runtimes() -> None:
    from gpuplace.deploy import RUNTIMES, TARGETS

    flags = _run_flags()
    assert set(flags["target"].choices) == set(TARGETS)
    assert tuple(flags["runtime"].choices) == RUNTIMES


@pytest.mark.parametrize("compare", [False, True])
def test_the_main_job_passes_every_run_flag_to_the_pipeline_it_runs(tmp_path: Path, compare: bool) -> None:
    """``gpuplace run --compare --trace F`` passed no trace before: every flag that is a parameter of the
    pipeline reaches it, by its name."""
    from gpuplace.jobs.main import pipeline_arguments

    config = MainJobConfig(compare=compare, trace=str(tmp_path / "t.csv"), workdir=tmp_path)
    pipeline, arguments = pipeline_arguments(config, "tiny", "local", tmp_path, "local")
    name = "orchestration_comparison" if compare else "llm_placement"
    signature = set(inspect.signature(pipeline.pipeline_func).parameters)
    assert set(arguments) <= signature, sorted(set(arguments) - signature)
    flags = {r.name for r in pipeline_rows(name) if r.run} - {"inventory", "model"}  # both given resolved
    assert flags <= set(arguments), sorted(flags - set(arguments))
    assert arguments["trace"] == str(tmp_path / "t.csv")


def test_the_run_command_builds_its_config_from_the_flags_by_field_name() -> None:
    from gpuplace.cli import build_parser
    from gpuplace.cli.run import config_from_args

    args = build_parser().parse_args(
        ["run", "--slo-tpot-ms", "35", "--repeats", "5", "--workdir", "w", "--device", "cpu"]
    )
    config = config_from_args(args)
    assert config == MainJobConfig(slo_tpot_ms=35.0, repeats=5, workdir=Path("w"), profile_device="cpu")


def test_a_default_changed_in_the_table_changes_the_pipelines_and_the_run() -> None:
    """In a fresh interpreter, the table's max_requests row given other defaults before anything reads it."""
    code = """
import inspect
from dataclasses import replace
import gpuplace.steps.run_params as t
t.RUN = tuple(replace(r, default=333, local=44) if r.name == "max_requests" else r for r in t.RUN)
from gpuplace.jobs.config import MainJobConfig
from gpuplace.jobs.outputs import leaf_tasks
from gpuplace.pipelines.llm_placement.pipeline import pipeline as a
from gpuplace.pipelines.orchestration_comparison.pipeline import pipeline as b
from gpuplace.cli import build_parser
print([inspect.signature(p.pipeline_func).parameters["max_requests"].default for p in (a, b)],
      MainJobConfig().max_requests, build_parser().parse_args(["run"]).max_requests)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["[333,", "333]", "44", "44"], out


@pytest.mark.parametrize("name", ["llm_placement", "orchestration_comparison"])
def test_the_load_tests_take_what_their_pipeline_passes_them_with_a_trace(tmp_path: Path, name: str) -> None:
    """Every load test of the pipeline, given the values the pipeline passes it (its defaults, and a
    trace), builds its configuration: ``gpuplace run --trace`` failed at its load test before, which
    refused the rate the pipeline passes beside a trace."""
    from gpuplace.steps.loadtest import load_test_config

    trace = tmp_path / "t.csv"
    trace.write_text("timestamp,input_tokens,output_tokens\n0,8,4\n1,8,4\n3,8,4\n")
    values = {r.name: r.pipeline_default for r in pipeline_rows(name)} | {"trace": str(trace)}
    tested = 0
    for step in ("loadtest", "serve_and_loadtest"):
        params = {
            i: values[p] for p, reach in reached(_pipelines()[name]).items() for s, i in reach if s == step
        }
        if not params:
            continue
        config = load_test_config({**params, "endpoint": "http://h"})
        assert (config.traffic.trace, config.rate) == (str(trace), values["rate"])
        tested += 1
    assert tested == (1 if name == "llm_placement" else 2)


def test_the_serving_task_pod_gets_the_pipeline_arguments_that_reach_its_task() -> None:
    """The Kubeflow path's serving task (backend testenv) builds its pod from the compiled comparison and
    the pipeline's arguments (:func:`gpuplace.steps.run_params.pipeline_arguments`): those are exactly
    the parameters that reach the task in the compiled pipeline, each with the value the task was given
    (before, a hand list, which left out ``allow_misplacement``)."""
    from gpuplace.steps.run_params import pipeline_arguments
    from gpuplace.steps.serve_and_loadtest import step_params

    feeds = reached(_pipelines()["orchestration_comparison"])
    inputs = {name: i for name, reach in feeds.items() for s, i in reach if s == "serve_and_loadtest"}
    given = asdict(step_params({i: f"value of {i}" for i in ("trace", "backend", "kubeconfig", "namespace")}))
    args = pipeline_arguments("orchestration_comparison", "serve_and_loadtest", given)
    assert set(args) == set(inputs)
    assert {name: args[name] for name in inputs} == {name: given[i] for name, i in inputs.items()}
    assert args["kubeflow_backend"] == "value of backend"
