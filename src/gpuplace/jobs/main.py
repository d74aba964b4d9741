"""The main job (``gpuplace run`` / ``make run``): the pipelines on embedded defaults, locally.

It runs ``llm_placement`` (with ``compare=True``, ``orchestration_comparison``) through kfp's local
runner (``kfp.local`` with the SubprocessRunner) — the same compiled components users' tasks run,
minus the cluster — on embedded defaults: the local device (the ``tiny`` preset on a CPU,
``llama-3.1-8b`` on a GPU) as the planning target (``inventory=local``: the profile task measures the
local engine's step time and the plan predicts this machine's latency with it), the ``local`` serving
target running that plan, a load test of the plan's traffic, a local MLflow store, all under one run
directory. Then it reads the outputs back and prints predicted against measured p50/p99 TTFT and TPOT
for the same device, with the error. The bundled ``mixed-a100-h100-l4`` fleet is planned too, after the
pipeline, and shown as what it is: a prediction for other GPUs, not checked here.

With ``--target kubernetes`` the native path deploys to the cluster of ``--kubeconfig``. The Kubeflow path
needs a KFP backend to place its task's pod; the local runner is none, so ``--compare --target
kubernetes`` runs only against a gpuplace testenv, where the task's pod is created as KFP's driver would
create it (``kubeflow_backend=testenv``); on a real cluster, ``gpuplace submit`` runs the pipeline.

A task that fails fails the job (:class:`PipelineFailed`, exit status 1): a load test in which no request
succeeded, pods that are not where the plan put them, two paths that served different specs. What the
tasks wrote is kept, and :func:`format_partial` says what was measured before the failure.
"""

from __future__ import annotations

import datetime as dt
import math
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gpuplace.errors import CheckFailed, InvalidInput
from gpuplace.jobs.config import DEFAULT_REPEATS, MainJobConfig
from gpuplace.jobs.console import _ANSI, quiet_console
from gpuplace.jobs.outputs import RunOutputs, format_partial, format_paths, read_run, require
from gpuplace.plandir import PlanDir
from gpuplace.steps.compare import repeat_runs
from gpuplace.steps.run_params import ROWS
from gpuplace.tracking.config import DEFAULT_WORKDIR, ui_command
from gpuplace.types.compare import Comparison
from gpuplace.types.fleet import DEFAULT_FLEET, LOCAL_INVENTORY, is_local_inventory
from gpuplace.types.latency import PredictedVsMeasured
from gpuplace.types.loadtest import LatencyReport
from gpuplace.units import ms

RUNNER_LOG = "runner.log"  # in the run directory: the runner's and the tasks' own output


@dataclass(frozen=True, slots=True)
class MainJobResult:
    config: MainJobConfig
    model: str
    run_dir: Path
    outputs: Path  # the pipeline run's folder of task outputs
    run: RunOutputs  # what the tasks wrote, read once
    plan: PlanDir
    measured: LatencyReport  # the (native path's) load test
    mlflow: str  # how to open MLflow on the run
    report: Path  # the Markdown report a person reads first
    log: Path  # the runner's and the tasks' own output
    comparison: Comparison | None = None
    # predicted vs measured on the device that served (None when the plan is for another device)
    prediction: PredictedVsMeasured | None = None
    fleet_plan: PlanDir | None = None  # the fleet's plan: a prediction for its GPUs, not measured here
    fleet_note: str = ""  # why the fleet has no plan, when it has none
    mlflow_url: str = ""  # the pipeline run's page in MLflow's UI, as the tracking task recorded it


def run_store(run_dir: Path) -> Path:
    """A run's local MLflow store, the same for both pipelines: ``<run dir>/.gpuplace/mlflow``, the default
    store of a step run in that directory (``orchestration_comparison``'s ``compare_paths`` takes no path)."""
    return run_dir / DEFAULT_WORKDIR


def default_model(device: str) -> str:
    import torch

    on_gpu = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
    return "llama-3.1-8b" if on_gpu else "tiny"


def _profile_args(model: str) -> dict[str, str]:
    """What the profile task measures: for tiny (a CPU), the profile step's own defaults; else the
    pipelines' (the run table's, for a GPU)."""
    if model == "tiny":
        return {
            n: ROWS[n].step_row.default
            for n in ("batch_sizes", "profile_prompt_tokens", "profile_output_tokens")
        }
    return {}


def run_main_job(config: MainJobConfig) -> MainJobResult:
    """Check the configuration (nothing runs on a bad one), make the run directory, run the pipeline
    through kfp's local runner in it, then read its outputs back (and plan the fleet, for a local run)."""
    kubeflow_backend = check_config(config)
    model = config.model or default_model(config.profile_device)
    if config.target == "local":
        config = replace(config, fleet=config.fleet or DEFAULT_FLEET)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    run_dir = (config.workdir / stamp).resolve()
    if run_dir.exists():
        raise InvalidInput(
            "workdir", str(run_dir), "already holds a run with this timestamp", "Rerun in a second"
        )
    inventory = planning_inventory(config, run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    pipeline, arguments = pipeline_arguments(config, model, inventory, run_dir, kubeflow_backend)
    outputs = run_locally(pipeline, arguments, run_dir, verbose=config.verbose)
    return read_result(config, model, inventory, run_dir, read_run(pipeline.pipeline_spec, outputs))


def check_config(config: MainJobConfig) -> str:
    """Refuse a configuration that cannot run, by the field, before anything is written; the Kubeflow
    path's backend: ``local`` (kfp's local runner) or ``testenv`` (the task's pod on a gpuplace testenv)."""
    if config.rate <= 0:
        raise InvalidInput("rate", config.rate, "must be positive", "e.g. --rate 2")
    if config.target not in ("local", "kubernetes"):
        raise InvalidInput("target", config.target, "must be local or kubernetes", "")
    if config.target == "kubernetes" and not Path(config.kubeconfig).is_file():
        raise InvalidInput(
            "kubeconfig", config.kubeconfig, "no such file", "Give --kubeconfig for --target kubernetes"
        )
    if config.repeats != DEFAULT_REPEATS and not config.compare:
        raise InvalidInput("repeats", config.repeats, "repeats the comparison's runs", "Add --compare")
    repeat_runs(config.repeats)  # a bad count fails here, before anything runs
    if config.trace and not Path(config.trace).is_file():
        raise InvalidInput("trace", config.trace, "no such file", "Give the Azure trace CSV")
    if config.target != "kubernetes":
        return "local"
    from gpuplace.testenv.controlplane import is_testenv_kubeconfig

    if config.compare and not is_testenv_kubeconfig(config.kubeconfig):
        raise InvalidInput(
            "kubeconfig",
            config.kubeconfig,
            "is not a gpuplace testenv: the Kubeflow path needs a KFP backend to place its task's pod, "
            "and the local runner is none",
            "Submit the pipeline to Kubeflow (gpuplace submit orchestration_comparison), or run against "
            '--kubeconfig "$(gpuplace testenv kubeconfig)"',
        )
    return "testenv"


def planning_inventory(config: MainJobConfig, run_dir: Path) -> str:
    """What the pipeline plans on: ``--inventory``; else this machine (``local``), or for ``--target
    kubernetes`` the cluster's own nodes (written to ``cluster-inventory.json``), unless the testenv's
    real node is this machine and no fleet was named."""
    if config.inventory or config.target != "kubernetes":
        return config.inventory or LOCAL_INVENTORY
    from gpuplace.deploy.testenv_runtime import real_node_of
    from gpuplace.jobs.cluster import cluster_inventory_file

    if not config.fleet and real_node_of(config.kubeconfig):
        # the testenv's real node is this machine: plan the local engine on its CPUs, served in containers
        return LOCAL_INVENTORY
    return cluster_inventory_file(config.kubeconfig, config.fleet, run_dir / "cluster-inventory.json")


def pipeline_arguments(
    config: MainJobConfig, model: str, inventory: str, run_dir: Path, kubeflow_backend: str
) -> tuple[Any, dict[str, Any]]:
    """The pipeline function (``llm_placement``, or ``orchestration_comparison`` with ``compare``) and
    its arguments."""
    # every value by its run-table name; the ones gpuplace run has no flag for are set here
    common: dict[str, Any] = dict(
        model=model,
        profile_device=config.profile_device,
        inventory=inventory,
        measure_engine_steps=is_local_inventory(inventory),
        slo_tpot_ms=config.slo_tpot_ms,
        slo_ttft_ms=config.slo_ttft_ms,
        rate=config.rate,
        namespace=config.namespace,
        kubeconfig=str(Path(config.kubeconfig).resolve()) if config.kubeconfig else "",
        prompt_tokens=config.prompt_tokens,
        output_tokens=config.output_tokens,
        # the runner works in run_dir: a relative trace path is the caller's, resolve it here
        trace=str(Path(config.trace).resolve()) if config.trace else "",
        max_requests=config.max_requests,
        runtime=config.runtime,
        target=config.target,
        mlflow_uri=config.mlflow_uri,
        **_profile_args(model),
    )
    if config.compare:
        from gpuplace.pipelines.orchestration_comparison.pipeline import pipeline as comparison

        return comparison, {
            **common,
            "kubeflow_backend": kubeflow_backend,
            "penalty_usd_per_breach": ROWS["penalty_usd_per_breach"].run_default,
            "repeats": config.repeats,
        }
    from gpuplace.pipelines.llm_placement.pipeline import pipeline as placement

    return placement, {**common, "mlflow_workdir": str(run_store(run_dir))}


def run_locally(pipeline: Any, arguments: dict[str, Any], run_dir: Path, *, verbose: bool) -> Path:
    """Run ``pipeline`` through kfp's local runner (SubprocessRunner) in ``run_dir``, one line per task
    (the runner's and the tasks' own output in ``runner.log``); the folder of its task outputs. A failed
    task raises :class:`PipelineFailed` with what was measured before it."""
    from kfp import local

    local.init(
        runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(run_dir / "kfp"), raise_on_error=True
    )
    log = run_dir / RUNNER_LOG
    cwd = Path.cwd()
    console = None
    os.chdir(run_dir)  # the local runner and the local MLflow store write relative paths
    try:
        with quiet_console(log, verbose=verbose) as console:
            pipeline(**arguments)
    except RuntimeError as e:  # kfp.local's "Task ... finished with status FAILURE"
        outputs = next((run_dir / "kfp").iterdir(), None)
        said = f" It raised {console.last_error}." if console is not None and console.last_error else ""
        raise PipelineFailed(
            f"{_ANSI.sub('', str(e))}{said} The tasks' own output is in {log}; "
            f"what they wrote is kept in {run_dir}",
            partial=format_partial(pipeline.pipeline_spec, outputs) if outputs is not None else "",
        ) from e
    finally:
        os.chdir(cwd)
    return next((run_dir / "kfp").iterdir())


def read_result(
    config: MainJobConfig, model: str, inventory: str, run_dir: Path, run: RunOutputs
) -> MainJobResult:
    """The result from the run's outputs (the plan, the native path's load test, the comparison, where the
    report and MLflow are); and, for a local run, the fleet planned as a prediction for its GPUs."""
    store = run_store(run_dir)
    db, artifacts = store / "mlflow.db", store / "artifacts"
    mlflow = ui_command(f"sqlite:///{db}", artifacts)
    if config.mlflow_uri or os.environ.get("MLFLOW_TRACKING_URI"):
        mlflow = f"open {config.mlflow_uri or os.environ['MLFLOW_TRACKING_URI']} (experiment 'gpuplace')"
    fleet_plan, fleet_note = None, ""
    if is_local_inventory(inventory) and config.fleet:
        profile = require(run.profile, "profile", run.folder)
        fleet_plan, fleet_note = plan_fleet(config, model, run_dir / "fleet-plan", profile)
    return MainJobResult(
        config,
        model,
        run_dir,
        run.folder,
        run,
        require(run.plan, "plan", run.folder),
        require(run.measured, "load-test report of the native path", run.folder),
        mlflow,
        require(run.report, "report", run.folder),
        run_dir / RUNNER_LOG,
        run.comparison if config.compare else None,
        prediction=run.prediction,
        fleet_plan=fleet_plan,
        fleet_note=fleet_note,
        mlflow_url=run.mlflow_url,
    )


def plan_fleet(config: MainJobConfig, model: str, out: Path, profile: Path) -> tuple[PlanDir | None, str]:
    """The same request planned on the fleet: what the model predicts for its GPUs (with the profile,
    which calibrates only its own GPU model — a CPU profile calibrates none). Not deployed, not measured
    here; ``(None, why)`` when no shape of the fleet meets the SLO."""
    from gpuplace.catalog import load_gpu_catalog
    from gpuplace.errors import GpuplaceError
    from gpuplace.manifests import ServingOptions
    from gpuplace.steps.plan import run_plan_step
    from gpuplace.steps.plan_params import plan_request

    catalog = load_gpu_catalog()
    params = {
        "model": model,
        "slo_tpot_ms": config.slo_tpot_ms,
        "slo_ttft_ms": config.slo_ttft_ms,
        "rate": config.rate,
        "prompt_tokens": config.prompt_tokens,
        "output_tokens": config.output_tokens,
        "trace": config.trace,
    }
    try:
        result = run_plan_step(
            plan_request(params, catalog),
            profile=profile,
            inventory=config.fleet,
            out=out,
            catalog=catalog,
            options=ServingOptions(),
        )
    except GpuplaceError as e:
        return None, str(e).splitlines()[0]
    return result.plan_dir, ""


class PipelineFailed(CheckFailed):
    """A task of the pipeline failed; the message points at the log with the task's own output, and
    ``partial`` is what the finished tasks measured (as :func:`format_partial` prints it)."""

    def __init__(self, message: str, *, partial: str = "") -> None:
        super().__init__(message)
        self.partial = partial


def _pct(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:+.1%}"


def format_prediction_table(result: MainJobResult) -> list[str]:
    """Predicted against measured p50/p99 TTFT and TPOT: with the error when the plan's prediction is
    for the device that served (the local plan), else side by side, each labelled with its device."""
    plan, measured, checked = result.plan.plan, result.measured, result.prediction
    pred = plan.prediction
    served = next(iter(result.run.served_on()), "")
    if checked is not None:
        head = [
            f"predicted vs measured on the same device ({plan.chosen.unit}; error = (measured − predicted)"
            " / predicted):",
            f"{'':17} {'predicted':>10} {'measured':>10} {'error':>9}",
        ]
    else:
        head = [
            f"predicted for {plan.chosen.unit}, measured on {served or 'an unknown device'}: different "
            "devices, so no error is computed (docs/serving-model.md)",
            f"{'':17} {'predicted':>10} {'measured':>10}",
        ]
    lines = head
    for label, metric, q in (
        ("p50 TTFT (ms)", "ttft", 50),
        ("p99 TTFT (ms)", "ttft", 99),
        ("p50 TPOT (ms)", "tpot", 50),
        ("p99 TPOT (ms)", "tpot", 99),
    ):
        value = getattr(getattr(pred, metric), f"p{q}") if pred else None
        line = f"{label:17} {ms(value, 2):>10} {ms(getattr(getattr(measured, metric), f'p{q}'), 2):>10}"
        if checked is not None:
            line += f" {_pct(checked.error(metric, q)):>9}"
        lines.append(line)
    return lines


def format_fleet_plan(result: MainJobResult) -> list[str]:
    """The fleet's plan, labelled as a prediction for other GPUs."""
    c = result.config
    if result.fleet_plan is None:
        return [f"fleet {c.fleet}: no plan ({result.fleet_note})"] if result.fleet_note else []
    plan = result.fleet_plan.plan
    pred = plan.prediction
    return [
        f"fleet {c.fleet} (a prediction for {plan.chosen.unit}, another device: not deployed or measured "
        "here)",
        f"  would choose    {plan.chosen.label}, ${plan.cost_usd_per_month:,.0f}/month; "
        "predicted p50/p99 TTFT "
        f"{ms(pred.ttft.p50 if pred else None, 1)}/{ms(pred.ttft.p99 if pred else None, 1)} ms, "
        f"TPOT {ms(pred.tpot.p50 if pred else None, 2)}/{ms(pred.tpot.p99 if pred else None, 2)} ms",
        f"  plan            {result.fleet_plan.path}",
    ]


def format_summary(result: MainJobResult) -> str:
    """The table ``gpuplace run`` prints: the chosen shape, predicted vs measured p50/p99 (with the error
    when both are for the same device), cost, fragmentation, and the fleet's plan, labelled."""
    plan, measured = result.plan.plan, result.measured
    c = result.config
    pipeline = "orchestration_comparison" if c.compare else "llm_placement"
    where = (
        "planned on this machine" if plan.is_local else f"planned on fleet {plan.inventory_source or c.fleet}"
    )
    traffic = plan.traffic
    rate = f"{plan.slo.rate_rps or 0:g} req/s"
    # a trace: planned with its lengths at the rate, replayed with its arrivals scaled to that mean rate
    lengths = (
        f"trace {traffic.trace}: its lengths, planned with {traffic.arrival} arrivals at {rate}, "
        f"replayed at {rate}"
        if traffic.trace
        else f"{traffic.prompt_tokens.describe()}/{traffic.output_tokens.describe()} tokens, "
        f"{traffic.arrival} arrivals at {rate}"
    )
    lines = [
        f"gpuplace run: {pipeline} with model {result.model}, {where}, {c.target} serving target",
        "",
        f"chosen shape      {plan.chosen.label}   "
        f"(plan {plan.plan_id}, fit score {plan.chosen.fit_score:.3f})",
        f"traffic           {lengths}",
        *format_prediction_table(result),
        f"SLO               {plan.slo.describe()}; measured attainment {measured.slo_attainment:.0%}",
        f"requests          {measured.completed} completed, {measured.failed} failed, "
        f"goodput {measured.goodput_rps:.2f} req/s",
    ]
    if not plan.is_local:
        lines += [
            f"planned cost      ${plan.cost_usd_per_month:,.0f}/month",
            f"planned frag.     {plan.fragmentation_before:.2f} → {plan.fragmentation_after:.2f} GPUs "
            "(FGD, the fleet before → after the planned placement)",
        ]
    lines += ["", *format_paths(result.run)]
    if result.comparison is not None:
        from gpuplace.report.render import verdict_line

        score = result.comparison.score
        lines.append(f"comparison        {verdict_line(result.comparison).replace('**', '')}")
        lines += [f"                  not scored: {c} ({why})" for c, why in score.excluded.items()]
    fleet = format_fleet_plan(result)
    if fleet:
        lines += ["", *fleet]
    lines += [
        "",
        f"run directory     {result.run_dir}",
        f"task outputs      {result.outputs}",
        f"task logs         {result.log}",
        f"report            {result.report}",
        f"MLflow            {result.mlflow}",
    ]
    if result.mlflow_url:
        lines.append(f"MLflow run page   {result.mlflow_url}")
    return "\n".join(lines)
