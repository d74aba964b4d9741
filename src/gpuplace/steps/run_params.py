"""The run's parameter table: one row per parameter of the two pipelines and of ``gpuplace run``, each
pointing at the step-table row it is passed to (:data:`RUN`).

A row's type, unit and help come from the step's row (:mod:`gpuplace.params` tables in
:mod:`gpuplace.steps`); its name is the step row's, or that name with a prefix naming the step
(``profile_prompt_tokens`` is the profile step's ``prompt_tokens``), unless the row says why not. Its
default is the step row's unless the row gives another with the reason (the pipelines run on a GPU
cluster, a step's own defaults suit a CPU), and ``gpuplace run``'s default is the pipelines' unless the
row gives a local one with the reason (``gpuplace run`` serves on this machine). From the table:

- both pipelines take their defaults (:func:`pipeline_defaults`);
- ``gpuplace run`` makes its flags (:func:`run_flags`) and ``MainJobConfig`` its defaults;
- tests/unit/test_run_table.py holds each pipeline's signature, the task inputs each parameter reaches in
  the compiled pipeline and their components' rows to it.

Light to import: a step's table is imported when a row is first read.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any

from gpuplace.labels import GPU_RESOURCE
from gpuplace.params import Param

INHERIT: Any = object()  # a default taken from the step's row (or, for gpuplace run, the pipelines')
BOTH = ("llm_placement", "orchestration_comparison")
PLACEMENT = ("llm_placement",)
COMPARISON = ("orchestration_comparison",)

# step → the module of its table and the table's name there
STEP_TABLES = {
    "profile": ("gpuplace.steps.profile", "PARAMS"),
    "plan": ("gpuplace.steps.plan_params", "PARAMS"),
    "inventory": ("gpuplace.steps.inventory", "PARAMS"),
    "deploy": ("gpuplace.steps.deploy", "PARAMS"),
    "teardown": ("gpuplace.steps.teardown", "PARAMS"),
    "loadtest": ("gpuplace.steps.loadtest", "PARAMS"),
    "serve_and_loadtest": ("gpuplace.steps.serve_and_loadtest", "PARAMS"),
    "compare": ("gpuplace.steps.compare", "PARAMS"),
    "repeat_runs": ("gpuplace.steps.compare", "REPEAT_RUNS"),
    "track": ("gpuplace.steps.track", "PARAMS"),
}


@functools.cache
def step_table(step: str) -> tuple[Param, ...]:
    module, name = STEP_TABLES[step]
    table: tuple[Param, ...] = getattr(importlib.import_module(module), name)
    return table


@functools.cache
def _step_rows(step: str) -> dict[str, Param]:
    return {p.name: p for p in step_table(step)}


@dataclass(frozen=True, slots=True)
class RunParam:
    """One parameter of the run: the pipelines' name and gpuplace run's field, the step row it is."""

    name: str
    step: str = ""  # the step whose row this is; "" for the run's own (``own`` then describes it)
    row: str = ""  # that row's name, when not ``name`` or ``name`` without its step prefix
    default: Any = INHERIT  # the pipelines' default
    local: Any = INHERIT  # gpuplace run's default
    why: str = ""  # why the name, the default or the local default is not the step row's
    pipelines: tuple[str, ...] = BOTH  # the pipelines that take it
    run: bool = True  # a flag of gpuplace run
    flag: str = ""  # gpuplace run's flag when not --<name with dashes>
    help: str = ""  # gpuplace run's help when the step row's does not say what the run does with it
    own: Param | None = None  # the run's own row (kind, default, help) when no step has one

    @property
    def row_name(self) -> str:
        if self.row:
            return self.row
        return self.name.removeprefix(self.step + "_") if self.step else self.name

    @property
    def step_row(self) -> Param:
        """The step's row (or the run's own)."""
        if not self.step:
            assert self.own is not None, self.name
            return self.own
        return _step_rows(self.step)[self.row_name]

    @property
    def pipeline_default(self) -> Any:
        return self.step_row.default if self.default is INHERIT else self.default

    @property
    def run_default(self) -> Any:
        return self.pipeline_default if self.local is INHERIT else self.local

    def param(self) -> Param:
        """gpuplace run's flag: the step row under this name, with the run's default."""
        row = self.step_row
        metavar = row.metavar or self.flag.removeprefix("--").replace("-", "_").upper()
        return replace(
            row,
            metavar=metavar,
            name=self.name,
            default=self.run_default,
            flag=self.flag,
            cli=True,
            help=self.help or row.help,
        )


_GPU = "the pipelines run on a GPU cluster; the profile step's own default suits a CPU"
_LOCAL_LENGTHS = "gpuplace run serves tiny on this CPU"

RUN: tuple[RunParam, ...] = (
    # the profile task
    RunParam(
        "model",
        "profile",
        default="llama-3.1-8b",
        local="",
        why=f"{_GPU}; gpuplace run's '' picks tiny on a CPU, llama-3.1-8b on a GPU",
        help="model preset (default: tiny on a CPU, llama-3.1-8b on a GPU)",
    ),
    RunParam("profile_device", "profile", flag="--device", help="profiling device: auto, cpu, cuda, cuda:N"),
    RunParam("batch_sizes", "profile", default="1,8", why=_GPU, run=False),
    RunParam("profile_prompt_tokens", "profile", default="1024", why=_GPU, run=False),
    RunParam("profile_output_tokens", "profile", default="128", why=_GPU, run=False),
    RunParam("profile_mode", "profile", pipelines=PLACEMENT, run=False),
    RunParam("measure_engine_steps", "profile", run=False),  # gpuplace run: for a local inventory
    RunParam("measure_operators", "profile", run=False),
    RunParam(
        "accelerator_type",
        own=Param(
            "accelerator_type", str, GPU_RESOURCE, "resource name of the GPU the profile task asks for"
        ),
        run=False,
    ),
    # the fleet and the plan
    RunParam(
        "inventory",
        "inventory",
        row="source",
        default="cluster",
        local="",
        why="discover_inventory's output artifact is called inventory; a pipeline plans on the cluster it "
        "runs in; gpuplace run's '' is this machine (local) for the local target, else the fleet",
        help="what to plan on (default: local, this machine, for the local target; else --fleet)",
    ),
    RunParam(
        "slo_tpot_ms", "plan", default=50.0, why="the common TPOT target; the plan step is always given one"
    ),
    RunParam(
        "slo_ttft_ms",
        "plan",
        default=2000.0,
        why="a chat service's TTFT target; the plan step is always given one",
    ),
    RunParam(
        "rate",
        "plan",
        default=5.0,
        local=2.0,
        why="the plan step is always given one; 5 req/s suits one GPU serving llama-3.1-8b, 2 req/s is a "
        "quarter of tiny's local capacity on a slow day here (7-10 req/s, 2026-12-05)",
        help="target and load-test request rate, requests/s",
    ),
    RunParam(
        "prompt_tokens",
        "plan",
        local="128",
        why=_LOCAL_LENGTHS,
        help="prompt length of the planned and sent traffic: N, uniform:LO:HI or normal:MEAN:STD",
    ),
    RunParam("output_tokens", "plan", local="32", why=_LOCAL_LENGTHS),
    RunParam(
        "trace", "plan", help="Azure-format trace CSV: planned for, and replayed instead of synthetic load"
    ),
    # deploy and serve
    RunParam(
        "target",
        "deploy",
        local="local",
        why="gpuplace run serves on this machine unless told",
        help="serving target: local (this machine) or kubernetes (the cluster of --kubeconfig)",
    ),
    RunParam("namespace", "deploy"),
    RunParam("kubeconfig", "deploy", help="the cluster for --target kubernetes"),
    RunParam(
        "runtime", "deploy", help="what serves the pods with --target kubernetes (gpuplace deploy --runtime)"
    ),
    RunParam(
        "timeout_s",
        "deploy",
        default=600.0,
        why="a cluster pulls vLLM's image and the model's weights before the first answer; the deploy "
        "step's own 300 s suits a testenv",
        run=False,
    ),
    RunParam("gpu_api", "deploy", pipelines=COMPARISON, run=False),
    RunParam("allow_misplacement", "deploy", pipelines=COMPARISON, run=False),
    RunParam("kubeflow_backend", "serve_and_loadtest", row="backend", pipelines=COMPARISON, run=False),
    # the load test
    RunParam(
        "max_requests",
        "loadtest",
        default=200,
        local=120,
        why="on a cluster 200 requests at 5 req/s give 40 s of load (the load-test step's 100, the serving "
        "task's 20, are for a quick check); gpuplace run's 120 at 2 req/s give a minute",
        help="requests each load test sends",
    ),
    RunParam(
        "repeats",
        "repeat_runs",
        pipelines=COMPARISON,
        help="with --compare: the runs of each path, interleaved; 3 or more name a winner",
    ),
    # the comparison and MLflow
    RunParam("weights", "compare", pipelines=COMPARISON, run=False),
    RunParam(
        "penalty_usd_per_breach",
        "compare",
        pipelines=COMPARISON,
        local=0.05,
        why="gpuplace run prices a breach, so its comparison's ROI is not zero",
        run=False,
    ),
    RunParam("engineering_weeks", "compare", pipelines=COMPARISON, run=False),
    RunParam("rate_usd_per_week", "compare", pipelines=COMPARISON, run=False),
    RunParam(
        "log_to_mlflow",
        "compare",
        pipelines=COMPARISON,
        default=True,
        why="the pipeline logs its comparison; the compare command only with --mlflow",
        run=False,
    ),
    RunParam(
        "mlflow_uri", "compare", help="MLflow server (default: $MLFLOW_TRACKING_URI, else a local store)"
    ),
    RunParam("mlflow_experiment", "compare", run=False),
    RunParam("mlflow_workdir", "track", pipelines=PLACEMENT, run=False),  # gpuplace run: the run's folder
)
ROWS: dict[str, RunParam] = {r.name: r for r in RUN}


def pipeline_rows(pipeline: str) -> tuple[RunParam, ...]:
    return tuple(r for r in RUN if pipeline in r.pipelines)


def pipeline_arguments(pipeline: str, step: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """The ``pipeline``'s arguments that give ``step`` its ``values`` (by the step's row names): each of
    the pipeline's rows that is a row of the step, under the pipeline's name. The row is the one the run
    table names for the step, else the step's row of the same name, else its one row of that name with a
    prefix (the pipeline's ``timeout_s`` is the serving step's ``startup_timeout_s``), as the table's test
    holds the names."""
    rows = _step_rows(step)
    out = {}
    for r in pipeline_rows(pipeline):
        if r.step == step:
            row = r.row_name
        else:
            stems = [n for n in rows if n.endswith("_" + r.name)]
            row = r.name if r.name in rows else (stems[0] if len(stems) == 1 else "")
        if row in values:
            out[r.name] = values[row]
    return out


def pipeline_defaults(pipeline: str) -> Any:
    """The pipeline's defaults by name, as attributes (``D.slo_tpot_ms``)."""
    return SimpleNamespace(**{r.name: r.pipeline_default for r in pipeline_rows(pipeline)})


def run_flags() -> tuple[Param, ...]:
    """gpuplace run's flags that are pipeline parameters, as step rows under the run's names."""
    return tuple(r.param() for r in RUN if r.run)


def run_defaults() -> dict[str, Any]:
    """gpuplace run's defaults of the pipeline parameters it has a flag for."""
    return {r.name: r.run_default for r in RUN if r.run}
