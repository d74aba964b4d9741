"""A step's parameter table, its component's signature and its CLI flags agree (issue 23, item 2): the
table (gpuplace.params) is the one place a default is written, the CLI makes its flags from it, and this
test fails when a component's parameter has another name, default or type than the table's row.
"""

from __future__ import annotations

import argparse
import inspect
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from gpuplace.cli import build_parser
from gpuplace.errors import InvalidInput
from gpuplace.params import REQUIRED, Param, add_flags, flag_disagreements, parse, signature_disagreements

PLAIN = (str, int, float, bool, dict, list)


def _artifacts(func: Callable[..., Any]) -> set[str]:
    """A component's artifact inputs and outputs (Input[...], Output[...]): not parameters."""
    return {n for n, q in inspect.signature(func).parameters.items() if q.annotation not in PLAIN}


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def _tables() -> list[tuple[str, Callable[..., Any], tuple[Param, ...], str]]:
    from gpuplace.components.benchmarking.load_test import load_test
    from gpuplace.components.benchmarking.repeat_runs import repeat_runs
    from gpuplace.components.benchmarking.serve_and_load_test import serve_and_load_test
    from gpuplace.components.placement.discover_inventory import discover_inventory
    from gpuplace.components.placement.plan_placement import plan_placement
    from gpuplace.components.profiling.profile_latency import profile_latency
    from gpuplace.components.reporting.compare_paths import compare_paths
    from gpuplace.components.reporting.track_run import track_run
    from gpuplace.components.serving.deploy_inference import deploy_inference
    from gpuplace.components.serving.teardown_inference import teardown_inference
    from gpuplace.steps.compare import PARAMS as COMPARE
    from gpuplace.steps.compare import REPEAT_RUNS
    from gpuplace.steps.deploy import PARAMS as DEPLOY
    from gpuplace.steps.inventory import PARAMS as INVENTORY
    from gpuplace.steps.loadtest import PARAMS as LOADTEST
    from gpuplace.steps.plan_params import PARAMS as PLAN
    from gpuplace.steps.profile import PARAMS as PROFILE
    from gpuplace.steps.serve_and_loadtest import PARAMS as SERVE_AND_LOAD_TEST
    from gpuplace.steps.teardown import PARAMS as TEARDOWN
    from gpuplace.steps.track import PARAMS as TRACK

    return [
        ("profile", profile_latency.python_func, PROFILE, "profile"),
        ("plan", plan_placement.python_func, PLAN, "plan"),
        ("compare", compare_paths.python_func, COMPARE, "compare"),
        ("deploy", deploy_inference.python_func, DEPLOY, "deploy"),
        ("teardown", teardown_inference.python_func, TEARDOWN, "teardown"),
        ("inventory", discover_inventory.python_func, INVENTORY, "inventory"),
        ("track", track_run.python_func, TRACK, ""),  # no CLI: gpuplace compare --mlflow tracks
        ("load test", load_test.python_func, LOADTEST, ""),  # its CLI flags: test_loadtest_flags_* below
        ("serve and load test", serve_and_load_test.python_func, SERVE_AND_LOAD_TEST, ""),  # no CLI
        ("repeat runs", repeat_runs.python_func, REPEAT_RUNS, ""),  # gpuplace run --compare --repeats
    ]


STEPS = [
    "profile", "plan", "compare", "deploy", "teardown", "inventory", "track", "load test",
    "serve and load test", "repeat runs",
]  # fmt: skip
COMMANDS = ["profile", "plan", "compare", "deploy", "teardown", "inventory"]


@pytest.mark.parametrize("step", STEPS)
def test_the_components_signature_is_its_steps_table(step: str) -> None:
    _, func, table, _ = next(t for t in _tables() if t[0] == step)
    assert signature_disagreements(func, table, artifacts=_artifacts(func)) == []


@pytest.mark.parametrize("command", COMMANDS)
def test_the_cli_flags_are_the_steps_table(command: str) -> None:
    _, _, table, _ = next(t for t in _tables() if t[3] == command)
    assert flag_disagreements(_subparser(command), table) == []


@pytest.mark.parametrize("command", COMMANDS)
def test_another_default_in_a_steps_table_fails_both_checks(command: str) -> None:
    """Each real table, its first row shared by the CLI and the component given another default: the
    component's signature and the command's flags no longer agree with it, and both checks say so."""
    _, func, table, _ = next(t for t in _tables() if t[3] == command)
    i, row = next(
        (i, p) for i, p in enumerate(table) if p.cli and p.component and p.kind is not bool and not p.required
    )
    changed = (*table[:i], replace(row, default=row.kind(7)), *table[i + 1 :])
    said = f"{row.name}: default "
    assert [d for d in signature_disagreements(func, changed, artifacts=_artifacts(func)) if said in d]
    assert [d for d in flag_disagreements(_subparser(command), changed) if said in d]


def test_loadtest_flags_are_the_load_test_table_but_an_explicit_rate() -> None:
    """--rate's own default is None (an explicit --rate 0 is refused); every other flag is the table's."""
    from gpuplace.steps.loadtest import PARAMS

    assert flag_disagreements(_subparser("loadtest"), PARAMS) == [
        "rate: default None on the command line, 0.0 in the table"
    ]
    changed = tuple(replace(p, default=7) if p.name == "max_requests" else p for p in PARAMS)
    assert "max_requests: default 100 on the command line, 7 in the table" in flag_disagreements(
        _subparser("loadtest"), changed
    )


@pytest.mark.parametrize("step", ["load test", "serve and load test"])
def test_another_default_in_a_table_without_a_command_fails_the_signature_check(step: str) -> None:
    """The load test's and serve-and-load-test's tables, a row given another default or dropped: the
    component's signature no longer agrees, and the check names the row."""
    _, func, table, _ = next(t for t in _tables() if t[0] == step)
    (before,) = (p.default for p in table if p.name == "max_requests")
    changed = tuple(replace(p, default=7) if p.name == "max_requests" else p for p in table)
    assert signature_disagreements(func, changed, artifacts=_artifacts(func)) == [
        f"max_requests: default {before} in the component, 7 in the table"
    ]
    dropped = tuple(p for p in table if p.name != "seed")
    assert signature_disagreements(func, dropped, artifacts=_artifacts(func)) == [
        "seed: a parameter of the component, not in the table"
    ]


def test_serve_and_load_test_takes_the_load_tests_rows_and_its_own() -> None:
    """Its load-test rows are the load test's (one spelling; only max_requests has its own default), and
    none is a CLI flag: the step has no command."""
    from gpuplace.steps.loadtest import PARAMS as LOAD_TEST
    from gpuplace.steps.serve_and_loadtest import PARAMS

    load_test = {p.name: p for p in LOAD_TEST}
    shared = [p for p in PARAMS if p.name in load_test]
    assert [p.name for p in shared] == [
        "prompt_tokens", "output_tokens", "trace", "time_scale", "rate", "concurrency", "max_requests",
        "seed",
    ]  # fmt: skip
    for p in shared:
        assert replace(p, default=load_test[p.name].default, cli=True) == load_test[p.name]
    assert [p.default for p in shared if p.default != load_test[p.name].default] == [20]
    assert not any(p.cli for p in PARAMS)


def test_serve_and_load_test_reads_its_table_and_the_components_unset() -> None:
    """Missing values take the table's defaults (kfp, 20 requests, 300 s), values are typed, other keys
    ignored; the component's "" backend is the local runner's, a 0 deadline and "" namespace the defaults."""
    from gpuplace.steps.serve_and_loadtest import step_params

    p = step_params({"rate": 2, "seed": "3", "plan": "ignored"})
    assert (p.backend, p.max_requests, p.startup_timeout_s, p.namespace) == (
        "kfp",
        20,
        300.0,
        "default",
    )
    assert p.rate == 2.0 and p.seed == 3 and not hasattr(p, "plan") and not hasattr(p, "api")
    p = step_params({"backend": "", "startup_timeout_s": 0, "namespace": "", "max_requests": 5})
    assert (p.backend, p.startup_timeout_s, p.namespace, p.max_requests) == (
        "local",
        300.0,
        "default",
        5,
    )
    assert step_params({"backend": "testenv", "startup_timeout_s": 9}).startup_timeout_s == 9.0


def test_the_checks_catch_a_disagreement() -> None:
    table = (
        Param("timeout_s", float, 300.0, "deadline", "--timeout"),
        Param("namespace", str, "default", "namespace"),
        Param("port", int, 0, "port", component=False),
        Param("path", str, "", "path", cli=False),
    )

    def component(plan: object, timeout_s: float = 30.0, namespace: int = 0, extra: str = "") -> None:
        """A component whose timeout default, namespace type and extra parameter disagree; no path."""

    assert signature_disagreements(component, table, artifacts={"plan"}) == [
        "extra: a parameter of the component, not in the table",
        "path: in the table, not a parameter of the component",
        "namespace: default 0 in the component, 'default' in the table",
        "namespace: type int in the component, str in the table",
        "timeout_s: default 30.0 in the component, 300.0 in the table",
    ]
    parser = argparse.ArgumentParser()
    parser.add_argument("--timeout", dest="timeout_s", type=float, default=120.0)
    parser.add_argument("--path", dest="path", default="")
    assert flag_disagreements(parser, table) == [
        "timeout_s: default 120.0 on the command line, 300.0 in the table",
        "namespace: no flag --namespace",
        "port: no flag --port",
        "path: a CLI flag, but not a CLI row of the table",
    ]


def test_the_checks_catch_a_required_row_and_a_repeatable_flag_that_disagree() -> None:
    table = (
        Param("model", str, REQUIRED, "the model"),
        Param("price", list, [], "a price, repeatable", component=False),
    )

    def component(model: str = "tiny") -> None:
        """A component whose model has a default the table does not give it."""

    assert signature_disagreements(component, table) == [
        "model: default 'tiny' in the component, none (required) in the table"
    ]
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", type=str, default="tiny")
    parser.add_argument("--price", dest="price", action="append", type=float, default=[])
    assert flag_disagreements(parser, table) == [
        "model: required False on the command line, True in the table",
        "price: type <class 'float'> on the command line, list in the table",
    ]
    with pytest.raises(InvalidInput, match=r"^model=None: is required.*--model"):
        parse(table, {"price": ["x"]})
    good = argparse.ArgumentParser()
    add_flags(good, table)
    assert flag_disagreements(good, table) == []
    assert vars(good.parse_args(["--model", "m", "--price", "a", "--price", "b"])) == {
        "model": "m",
        "price": ["a", "b"],
    }
    assert table[1].default == []  # argparse appended to a copy


def test_parse_takes_the_tables_default_for_a_missing_or_none_value_and_types_the_rest() -> None:
    from gpuplace.steps.deploy import PARAMS

    values = parse(PARAMS, {"timeout_s": "12", "namespace": None, "plan": "ignored", "allow_misplacement": 1})
    assert values["timeout_s"] == 12.0 and values["namespace"] == "default"
    assert values["allow_misplacement"] is True and values["target"] == "kubernetes" and "plan" not in values


def test_predict_flags_are_made_from_the_predict_steps_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """``gpuplace predict`` has no component: its table (shape, traffic, headroom) makes every step flag,
    so another default written in the table is the command line's default too."""
    from gpuplace.steps import predict
    from gpuplace.steps.predict import PARAMS

    assert flag_disagreements(_subparser("predict"), PARAMS) == []
    assert not any(p.component for p in PARAMS)
    changed = tuple(replace(p, default=7) if p.name == "requests" else p for p in predict.TRAFFIC)
    monkeypatch.setattr(predict, "TRAFFIC", changed)
    parser = _subparser("predict")
    assert parser.parse_args(["--model", "tiny", "--gpu", "L4"]).requests == 7
    assert flag_disagreements(parser, predict.SHAPE + changed + predict.HEADROOM) == []


def test_predict_reads_its_flags_with_its_table_and_refuses_what_cannot_be_simulated() -> None:
    """A missing required row is refused by name before anything runs; so are zero requests, and a
    --tp of 0 is no longer read as 1 (the old ``or 1``) but refused by the shape's check."""
    from gpuplace.catalog import load_gpu_catalog
    from gpuplace.errors import InvalidInput
    from gpuplace.steps.predict import run_predict_step

    catalog = load_gpu_catalog()
    base = {"model": "tiny", "gpu": "L4", "rate": 1.0, "requests": 50}
    with pytest.raises(InvalidInput, match="gpu"):
        run_predict_step({"model": "tiny", "rate": 1.0}, catalog)
    with pytest.raises(InvalidInput, match="requests"):
        run_predict_step({**base, "requests": 0}, catalog)
    with pytest.raises(InvalidInput, match="tp"):
        run_predict_step({**base, "tp": 0}, catalog)
    assert run_predict_step(base, catalog).requests_per_s > 0


# each step's values class (gpuplace.params.parse_as) and the table it is the values of
VALUES = [
    ("compare", "CompareValues", "PARAMS"),
    ("deploy", "DeployValues", "PARAMS"),
    ("inventory", "InventoryValues", "PARAMS"),
    ("loadtest", "LoadTestValues", "PARAMS"),
    ("plan_params", "PlanValues", "PARAMS"),
    ("plan_params", "ServingValues", "SERVING"),
    ("plan_params", "FormsValues", "FORMS"),
    ("predict", "PredictValues", "PARAMS"),
    ("profile", "ProfileValues", "PARAMS"),
    ("serve_and_loadtest", "ServeAndLoadTestValues", "PARAMS"),
    ("teardown", "TeardownValues", "PARAMS"),
    ("track", "TrackValues", "PARAMS"),
]


@pytest.mark.parametrize(("module", "cls", "table"), VALUES)
def test_each_steps_values_class_is_its_table(module: str, cls: str, table: str) -> None:
    """A step reads its parameters typed (``p.timeout_s``), through a class whose fields are its
    table's rows by name and type, and whose defaults are the table's alone (issue 34, item 2)."""
    import importlib

    from gpuplace.params import values_disagreements

    mod = importlib.import_module(f"gpuplace.steps.{module}")
    assert values_disagreements(getattr(mod, cls), getattr(mod, table)) == []


def test_every_step_reads_its_values_typed_not_by_name_from_a_dict() -> None:
    """No step parses its table into a dict or reads a value by a string key; every values class in
    steps/ is held to its table above."""
    import ast
    import importlib
    import pkgutil

    import gpuplace.steps

    found, dict_reads = set(), []
    for info in pkgutil.iter_modules(gpuplace.steps.__path__):
        mod = importlib.import_module(f"gpuplace.steps.{info.name}")
        found |= {
            (info.name, n)
            for n in vars(mod)
            if n.endswith("Values") and vars(mod)[n].__module__ == mod.__name__
        }
        tree = ast.parse(inspect.getsource(mod))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "parse":
                dict_reads.append(f"{info.name}:{node.lineno}: parse(...)")
            if (
                isinstance(node, ast.Subscript)
                and isinstance(node.value, ast.Name)
                and node.value.id in ("p", "v")
                and isinstance(node.slice, ast.Constant)
                and isinstance(node.slice.value, str)
            ):
                dict_reads.append(f"{info.name}:{node.lineno}: {node.value.id}[{node.slice.value!r}]")
    assert dict_reads == []
    assert found == {(m, c) for m, c, _ in VALUES}


def test_a_values_class_that_drifts_from_its_table_is_caught() -> None:
    """Another name, type, optionality, or a default written in the class: each is named."""
    from dataclasses import dataclass, field

    from gpuplace.params import values_disagreements

    table = (
        Param("timeout_s", float, 300.0, "deadline"),
        Param("share", float, None, "a share"),
        Param("price", list, [], "prices"),
        Param("name", str, REQUIRED, "a name"),
    )

    @dataclass(frozen=True)
    class Good:
        timeout_s: float
        share: float | None
        price: list[str]
        name: str

    @dataclass(frozen=True)
    class Bad:
        timeout: float
        share: float
        price: list[str] = field(default_factory=list)
        name: int = 0

    assert values_disagreements(Good, table) == []
    assert values_disagreements(Bad, table) == [
        "timeout: a field of Bad, not a row of the table",
        "timeout_s: a row of the table, not a field of Bad",
        "share: type <class 'float'> in Bad, float | None in the table",
        "price: a default in Bad; the table's is the only one",
        "name: type <class 'int'> in Bad, str in the table",
        "name: a default in Bad; the table's is the only one",
    ]


def _differing(made: Any, own: Any) -> dict[str, tuple[Any, Any]]:
    from dataclasses import fields

    return {
        f.name: (getattr(made, f.name), getattr(own, f.name))
        for f in fields(made)
        if getattr(made, f.name) != getattr(own, f.name)
    }


def test_the_library_s_own_defaults_are_what_its_step_reads_from_no_values() -> None:
    """Where a library dataclass keeps defaults of its own (for its callers in tests and benchmarks), they
    are what its step makes of its table's defaults: the profile's batch sizes were (1,) in
    ``ProfileConfig`` and 1,4 in the table (issue 34: library dataclasses wrote the defaults again).
    ``LoadTestConfig`` has none: the step is its one maker."""
    from dataclasses import MISSING, fields

    from gpuplace.catalog import load_gpu_catalog
    from gpuplace.loadtest.config import LoadTestConfig
    from gpuplace.manifests.builders import ServingOptions
    from gpuplace.manifests.forms import EmitOptions
    from gpuplace.planner.request import PlanRequest
    from gpuplace.profiling.operators import OperatorConfig
    from gpuplace.profiling.profiler import ProfileConfig
    from gpuplace.steps.compare import CompareOptions, compare_options
    from gpuplace.steps.plan_params import emit_options, plan_request, serving_options
    from gpuplace.steps.profile import operator_config, profile_config

    assert _differing(profile_config({}), ProfileConfig()) == {}
    assert _differing(operator_config({}), OperatorConfig()) == {}
    assert _differing(serving_options({}), ServingOptions()) == {}
    assert _differing(emit_options({}), EmitOptions()) == {}
    assert _differing(compare_options({}, ()), CompareOptions(paths=())) == {}
    slo = {"slo_tpot_ms": 50.0, "slo_ttft_ms": 2000.0, "rate": 1.0}
    made = plan_request({"model": "tiny", **slo}, load_gpu_catalog())
    assert _differing(made, PlanRequest(model=made.model, slo=made.slo, traffic=made.traffic)) == {}
    assert [
        f.name for f in fields(LoadTestConfig) if f.default is not MISSING or f.default_factory is not MISSING
    ] == []
    # the check can fail: the old ProfileConfig default is caught
    from dataclasses import replace

    assert _differing(profile_config({}), replace(ProfileConfig(), batch_sizes=(1,))) == {
        "batch_sizes": ((1, 4), (1,))
    }
