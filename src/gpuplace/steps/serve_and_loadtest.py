"""The Kubeflow path's serving step: serve the plan, load-test it and stop, all inside one KFP task.

The ``serve_and_load_test`` component's step. :data:`PARAMS` (a :mod:`gpuplace.params` table) is its
parameters: the load test's rows it takes (:data:`gpuplace.steps.loadtest.PARAMS`, fewer requests by
default) and its own (the server's deadline, the backend and where it serves); the component's signature
is checked against it, and :func:`run_serve_and_load_test_step` reads the component's values by its
names. The server comes from :func:`gpuplace.deploy.inline.serve_inline` (where it runs depends on the
backend); the stop always follows the load test, also when it fails; the deployment record is written
through :mod:`gpuplace.deploy.record`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from gpuplace.deploy.inline import BACKENDS, serve_inline
from gpuplace.deploy.record import save_record
from gpuplace.errors import InvalidInput
from gpuplace.loadtest.run import LoadTestResult, require_served, run_loadtest_to_paths
from gpuplace.params import Param, defaults, parse_as
from gpuplace.plandir import read_plan_dir
from gpuplace.steps.loadtest import PARAMS as LOAD_TEST
from gpuplace.steps.loadtest import load_test_config
from gpuplace.steps.run_params import pipeline_arguments
from gpuplace.types import DeploymentRecord

# The load test's rows this step takes, by name (there is no command: the rows are the component's only).
_LOAD_TEST_ROWS = ("prompt_tokens", "output_tokens", "trace", "time_scale", "rate", "concurrency")
_load_test = {p.name: replace(p, cli=False) for p in LOAD_TEST}

PARAMS: tuple[Param, ...] = (
    *(_load_test[name] for name in _LOAD_TEST_ROWS),
    replace(_load_test["max_requests"], default=20),  # a serving task: fewer than a load test's 100
    _load_test["seed"],
    Param(
        "startup_timeout_s",
        float,
        300.0,
        "deadline for the server to answer its first request; 0 = this default",
        unit="s",
        cli=False,
    ),
    Param(
        "backend",
        str,
        "kfp",
        "kfp: serve the plan's spec in this task's pod; local: the local engine on this machine; testenv: "
        "create this task's pod on the gpuplace testenv of kubeconfig ('' = local)",
        choices=BACKENDS,
        cli=False,
    ),
    Param("kubeconfig", str, "", "the testenv's kubeconfig (backend testenv)", cli=False),
    Param("namespace", str, "default", "the task pod's namespace (backend testenv; '' = default)", cli=False),
    Param("run_id", str, "", "pipeline run id to label the task pod with (backend testenv)", cli=False),
    Param(
        "allow_misplacement",
        bool,
        False,
        "keep going when the task pod is not on its planned node",
        cli=False,
    ),
)


@dataclass(frozen=True, slots=True)
class ServeAndLoadTestValues:
    """:data:`PARAMS`'s values, typed: one field per row, read by :func:`~gpuplace.params.parse_as` (its
    defaults are the table's alone)."""

    prompt_tokens: str
    output_tokens: str
    trace: str
    time_scale: float
    rate: float
    concurrency: int
    max_requests: int
    seed: int
    startup_timeout_s: float
    backend: str
    kubeconfig: str
    namespace: str
    run_id: str
    allow_misplacement: bool


_DEFAULTS = defaults(PARAMS)


@dataclass(frozen=True, slots=True)
class InlineResult:
    deployment: DeploymentRecord
    loadtest: LoadTestResult


def serve_and_load_test(
    plan_dir: str | Path,
    params: Mapping[str, Any],
    *,
    workdir: str | Path,
    records: str | Path,
    report: str | Path,
    summary: str | Path,
    startup_timeout_s: float = 300.0,
    backend: str = "local",
    kubeconfig: str = "",
    namespace: str = "default",
    run_id: str = "",
    allow_misplacement: bool = False,
    package: str | Path = "",
    arguments: Mapping[str, Any] | None = None,
) -> InlineResult:
    """Serve the plan on ``backend`` (:func:`gpuplace.deploy.inline.serve_inline`), run the load test
    ``params`` describe (the names of :data:`gpuplace.steps.loadtest.PARAMS`; SLO and traffic default to
    the plan's), stop the server, and fail (:class:`~gpuplace.loadtest.run.NothingServed`) when no
    request succeeded."""
    planned = read_plan_dir(plan_dir)
    plan = planned.plan
    record, stop = serve_inline(
        planned,
        backend=backend,
        workdir=Path(workdir),
        startup_timeout_s=startup_timeout_s,
        kubeconfig=kubeconfig,
        namespace=namespace,
        run_id=run_id,
        allow_misplacement=allow_misplacement,
        package=package,
        arguments=arguments,
    )
    try:
        config = load_test_config(
            {**params, "endpoint": "", "tokenizer": plan.model}, deployment=record, plan=plan
        )
        result = run_loadtest_to_paths(config, records=records, report=report, summary=summary)
    finally:
        stop()
    return InlineResult(deployment=record, loadtest=result)


def compiled_package(name: str) -> Path:
    """The checked-in compiled YAML of pipeline ``name``, found without importing kfp or the pipelines."""
    import importlib.util

    spec = importlib.util.find_spec("gpuplace.pipelines")
    if spec is None or not spec.submodule_search_locations:
        raise InvalidInput("pipeline", name, "gpuplace.pipelines is not installed", "Reinstall gpuplace")
    return Path(next(iter(spec.submodule_search_locations))) / name / "pipeline.yaml"


def step_params(params: Mapping[str, Any]) -> ServeAndLoadTestValues:
    """``params`` by the names of :data:`PARAMS` (missing ones take its defaults, other keys are ignored),
    typed, the component's "unset" read: an empty backend is the local runner's, a 0 deadline and an empty
    namespace are the table's defaults."""
    p = parse_as(ServeAndLoadTestValues, PARAMS, params)
    return replace(
        p,
        backend=p.backend or "local",
        startup_timeout_s=p.startup_timeout_s or _DEFAULTS["startup_timeout_s"],
        namespace=p.namespace or _DEFAULTS["namespace"],
    )


def run_serve_and_load_test_step(
    plan_dir: str | Path,
    params: Mapping[str, Any],
    *,
    deployment: str | Path,
    records: str | Path,
    report: str | Path,
    summary: str | Path,
) -> InlineResult:
    """The ``serve_and_load_test`` component's step, ``params`` by the names of :data:`PARAMS` (read by
    :func:`step_params`): serve, load-test, write the deployment record beside the load test's outputs."""
    p = step_params(params)
    backend = p.backend
    package = ""
    if backend == "testenv":
        package = str(compiled_package("orchestration_comparison"))
    # this task's inputs by the pipeline's parameter names, for the task pod's executor input
    values = asdict(p)
    pipeline_args = pipeline_arguments("orchestration_comparison", "serve_and_loadtest", values)
    result = serve_and_load_test(
        plan_dir,
        {name: value for name, value in values.items() if name in _load_test},  # the load test's rows
        workdir=str(deployment) + ".server",
        records=records,
        report=report,
        summary=summary,
        startup_timeout_s=p.startup_timeout_s,
        backend=backend,
        kubeconfig=p.kubeconfig,
        namespace=p.namespace,
        run_id=p.run_id,
        allow_misplacement=p.allow_misplacement,
        package=package,
        arguments=pipeline_args,
    )
    save_record(result.deployment, deployment)
    return result


def check_served(result: InlineResult) -> None:
    """Fail the task when no request succeeded (its outputs are written first by the component)."""
    require_served(result.loadtest, "the Kubeflow path's load test", result.deployment.endpoint)
