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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuplace.errors import CheckFailed, InvalidInput
from gpuplace.jobs.console import _ANSI, quiet_console
from gpuplace.plandir import PlanDir, read_plan_dir
from gpuplace.types.compare import Comparison
from gpuplace.types.loadtest import LatencyReport
from gpuplace.units import ms


@dataclass(frozen=True, slots=True)
class MainJobConfig:
    workdir: Path = Path(".gpuplace/runs")
    model: str = ""  # "" picks tiny on CPU, llama-3.1-8b on a GPU
    device: str = "auto"
    inventory: str = ""  # "" = local for the local target, else the fleet
    fleet: str = "mixed-a100-h100-l4"  # also planned (a prediction for its GPUs) when inventory is local
    slo_tpot_ms: float = 50.0
    slo_ttft_ms: float = 2000.0
    rate: float = 4.0
    prompt_tokens: str = "128"
    output_tokens: str = "32"
    max_requests: int = 120
    trace: str = ""
    compare: bool = False
    target: str = "local"  # or "kubernetes": deploy to the cluster of `kubeconfig`
    kubeconfig: str = ""
    namespace: str = "default"
    runtime: str = "auto"  # what serves the pods on a cluster (docs/deploy.md#runtime)
    mlflow_uri: str = ""  # "" = $MLFLOW_TRACKING_URI, else a local store in the run directory
    verbose: bool = False  # show the runner's and the tasks' own logs instead of one line per task


@dataclass(frozen=True, slots=True)
class MainJobResult:
    config: MainJobConfig
    model: str
    run_dir: Path
    outputs: Path  # the pipeline run's folder of task outputs
    plan: PlanDir
    measured: LatencyReport  # the (native path's) load test
    mlflow: str  # how to open MLflow on the run
    report: Path  # the Markdown report a person reads first
    log: Path  # the runner's and the tasks' own output
    comparison: Comparison | None = None
    # predicted vs measured on the device that served (empty when the plan is for another device)
    prediction: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    fleet_plan: PlanDir | None = None  # the fleet's plan: a prediction for its GPUs, not measured here
    fleet_note: str = ""  # why the fleet has no plan, when it has none


def default_model(device: str) -> str:
    import torch

    on_gpu = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
    return "llama-3.1-8b" if on_gpu else "tiny"


def _profile_args(model: str) -> dict[str, str]:
    if model == "tiny":
        return {"batch_sizes": "1,4", "prompt_tokens": "128", "output_tokens": "32"}
    return {"batch_sizes": "1,8", "prompt_tokens": "1024", "output_tokens": "128"}


def _one(outputs: Path, task: str, name: str) -> Path:
    found = sorted(p for p in outputs.glob(f"{task}*/{name}") if p.exists())
    if not found:
        raise FileNotFoundError(f"{outputs}: no output {name!r} of task {task!r}")
    return found[0]


def run_main_job(config: MainJobConfig) -> MainJobResult:
    from kfp import local

    if config.rate <= 0:
        raise InvalidInput("rate", config.rate, "must be positive", "e.g. --rate 2")
    if config.target not in ("local", "kubernetes"):
        raise InvalidInput("target", config.target, "must be local or kubernetes", "")
    if config.target == "kubernetes" and not Path(config.kubeconfig).is_file():
        raise InvalidInput(
            "kubeconfig", config.kubeconfig, "no such file", "Give --kubeconfig for --target kubernetes"
        )
    if config.trace and not Path(config.trace).is_file():
        raise InvalidInput("trace", config.trace, "no such file", "Give the Azure trace CSV")
    kubeflow_backend = "local"
    if config.target == "kubernetes":
        from gpuplace.testenv.controlplane import is_testenv_kubeconfig

        kubeflow_backend = "testenv"
        if config.compare and not is_testenv_kubeconfig(config.kubeconfig):
            raise InvalidInput(
                "kubeconfig",
                config.kubeconfig,
                "is not a gpuplace testenv: the Kubeflow path needs a KFP backend to place its task's pod, "
                "and the local runner is none",
                "Submit the pipeline to Kubeflow (gpuplace submit orchestration_comparison), or run against "
                '--kubeconfig "$(gpuplace testenv kubeconfig)"',
            )
    model = config.model or default_model(config.device)
    inventory = config.inventory or ("local" if config.target == "local" else config.fleet)
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    run_dir = (config.workdir / stamp).resolve()
    if run_dir.exists():
        raise InvalidInput(
            "workdir", str(run_dir), "already holds a run with this timestamp", "Rerun in a second"
        )
    run_dir.mkdir(parents=True)
    common: dict[str, Any] = dict(
        model=model,
        profile_device=config.device,
        inventory=inventory,
        measure_engine_steps=inventory == "local",
        slo_tpot_ms=config.slo_tpot_ms,
        slo_ttft_ms=config.slo_ttft_ms,
        rate=config.rate,
        namespace=config.namespace,
        kubeconfig=str(Path(config.kubeconfig).resolve()) if config.kubeconfig else "",
        traffic_prompt_tokens=config.prompt_tokens,
        traffic_output_tokens=config.output_tokens,
        loadtest_max_requests=config.max_requests,
        serving_runtime=config.runtime,
        mlflow_uri=config.mlflow_uri,
        **_profile_args(model),
    )
    if config.compare:
        from gpuplace.pipelines.orchestration_comparison.pipeline import pipeline

        arguments = {
            **common,
            "native_target": config.target,
            "kubeflow_backend": kubeflow_backend,
            "penalty_usd_per_breach": 0.05,
        }
    else:
        from gpuplace.pipelines.llm_placement.pipeline import pipeline

        arguments = {
            **common,
            "target": config.target,
            "trace": config.trace,
            "mlflow_workdir": str(run_dir / "mlflow"),
        }
    local.init(
        runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(run_dir / "kfp"), raise_on_error=True
    )
    log = run_dir / "runner.log"
    cwd = Path.cwd()
    console = None
    os.chdir(run_dir)  # the local runner and the local MLflow store write relative paths
    try:
        with quiet_console(log, verbose=config.verbose) as console:
            pipeline(**arguments)
    except RuntimeError as e:  # kfp.local's "Task ... finished with status FAILURE"
        outputs = next((run_dir / "kfp").iterdir(), None)
        said = f" It raised {console.last_error}." if console is not None and console.last_error else ""
        raise PipelineFailed(
            f"{_ANSI.sub('', str(e))}{said} The tasks' own output is in {log}; "
            f"what they wrote is kept in {run_dir}",
            partial=format_partial(outputs) if outputs is not None else "",
        ) from e
    finally:
        os.chdir(cwd)
    outputs = next((run_dir / "kfp").iterdir())
    from gpuplace.compare.step import read_comparison
    from gpuplace.loadtest.io import read_prediction, read_report

    plan = read_plan_dir(_one(outputs, "plan-placement", "plan"))
    report_file = _one(outputs, "load-test", "report")
    measured = read_report(report_file)
    comparison = None
    if config.compare:
        comparison = read_comparison(_one(outputs, "compare-paths", "comparison"))
        report = _one(outputs, "compare-paths", "report_md")
        store = run_dir / ".gpuplace" / "mlflow"
    else:
        report = _one(outputs, "load-test", "summary")
        store = run_dir / "mlflow"
    db, artifacts = store / "mlflow.db", store / "artifacts"
    mlflow = f"mlflow ui --backend-store-uri sqlite:///{db} --default-artifact-root {artifacts}"
    if config.mlflow_uri or os.environ.get("MLFLOW_TRACKING_URI"):
        mlflow = f"open {config.mlflow_uri or os.environ['MLFLOW_TRACKING_URI']} (experiment 'gpuplace')"
    fleet_plan, fleet_note = None, ""
    if inventory == "local" and config.fleet:
        fleet_plan, fleet_note = plan_fleet(config, model, run_dir / "fleet-plan", outputs)
    return MainJobResult(
        config,
        model,
        run_dir,
        outputs,
        plan,
        measured,
        mlflow,
        report,
        log,
        comparison,
        prediction=read_prediction(report_file),
        fleet_plan=fleet_plan,
        fleet_note=fleet_note,
    )


def plan_fleet(config: MainJobConfig, model: str, out: Path, outputs: Path) -> tuple[PlanDir | None, str]:
    """The same request planned on the fleet: what the model predicts for its GPUs (with the profile,
    which calibrates only its own GPU model — a CPU profile calibrates none). Not deployed, not measured
    here; ``(None, why)`` when no shape of the fleet meets the SLO."""
    from gpuplace.catalog import load_gpu_catalog
    from gpuplace.errors import GpuplaceError
    from gpuplace.manifests import ServingOptions
    from gpuplace.planner import PlanRequest
    from gpuplace.planner.step import run_plan_step

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
            PlanRequest.from_params(params, catalog),
            profile=_one(outputs, "profile-latency", "profile"),
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


def _path_outputs(outputs: Path) -> list[tuple[str, Path | None, Path | None]]:
    """(path, deployment.json, load-test report) of each path whose outputs exist, in flow order."""
    found = []
    for path, deploy_task, report_task in (
        ("native", "deploy-inference", "load-test"),
        ("kubeflow", "serve-and-load-test", "serve-and-load-test"),
    ):
        dep = next((p for p in sorted(outputs.glob(f"{deploy_task}*/deployment")) if p.is_file()), None)
        rep = next((p for p in sorted(outputs.glob(f"{report_task}*/report")) if p.is_file()), None)
        if dep is not None or rep is not None:
            found.append((path, dep, rep))
    return found


def format_paths(outputs: Path) -> list[str]:
    """One line per path that ran: measured nodes and GPU devices, provisioning, and the load test."""
    from gpuplace.deploy import read_record
    from gpuplace.loadtest.io import read_report

    lines = [
        f"{'path':9} {'nodes (measured)':18} {'GPUs (measured)':30} {'provisioning s':>14} "
        f"{'p99 TTFT ms':>11} {'p99 TPOT ms':>11} {'ok/failed':>9}"
    ]
    for path, dep_file, rep_file in _path_outputs(outputs):
        dep = read_record(dep_file) if dep_file is not None else None
        rep = read_report(rep_file) if rep_file is not None else None
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
            f"{path:9} {nodes or '-':18} {gpus:30} {provisioning:>14} {ttft:>11} {tpot:>11} {done:>9}"
        )
        if dep is not None and dep.mismatches():
            lines += [f"{'':9} placement mismatch: {m}" for m in dep.mismatches()]
    return lines


def format_partial(outputs: Path) -> str:
    """What the tasks that finished measured, for a run that failed."""
    lines = format_paths(outputs)
    return "\n".join(lines) if len(lines) > 1 else ""


def _pct(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:+.1%}"


def format_prediction_table(result: MainJobResult) -> list[str]:
    """Predicted against measured p50/p99 TTFT and TPOT: with the error when the plan's prediction is
    for the device that served (the local plan), else side by side, each labelled with its device."""
    plan, measured, rows = result.plan.plan, result.measured, result.prediction
    pred = plan.prediction
    served = next(iter(_served_on(result.outputs)), "")
    if rows:
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
    for label, key, dist in (
        ("p50 TTFT (ms)", "ttft_p50_s", measured.ttft.p50),
        ("p99 TTFT (ms)", "ttft_p99_s", measured.ttft.p99),
        ("p50 TPOT (ms)", "tpot_p50_s", measured.tpot.p50),
        ("p99 TPOT (ms)", "tpot_p99_s", measured.tpot.p99),
    ):
        value = getattr(pred, key) if pred else None
        line = f"{label:17} {ms(value, 2):>10} {ms(dist, 2):>10}"
        if rows:
            line += f" {_pct(rows.get(key, {}).get('error')):>9}"
        lines.append(line)
    return lines


def _served_on(outputs: Path) -> list[str]:
    from gpuplace.deploy import read_record

    return [read_record(d).served_on for _, d, _ in _path_outputs(outputs) if d is not None]


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
        f"{ms(pred.ttft_p50_s if pred else None, 1)}/{ms(pred.ttft_p99_s if pred else None, 1)} ms, "
        f"TPOT {ms(pred.tpot_p50_s if pred else None, 2)}/{ms(pred.tpot_p99_s if pred else None, 2)} ms",
        f"  plan            {result.fleet_plan.path}",
    ]


def format_summary(result: MainJobResult) -> str:
    """The table ``gpuplace run`` prints: the chosen shape, predicted vs measured p50/p99 (with the error
    when both are for the same device), cost, fragmentation, and the fleet's plan, labelled."""
    plan, measured = result.plan.plan, result.measured
    c = result.config
    pipeline = "orchestration_comparison" if c.compare else "llm_placement"
    where = (
        "planned on this machine"
        if plan.inventory_source == "local"
        else f"planned on fleet {plan.inventory_source or c.fleet}"
    )
    traffic = plan.traffic
    lengths = (
        f"trace {traffic.trace}"
        if traffic.trace
        else f"{traffic.prompt_tokens.describe()}/{traffic.output_tokens.describe()} tokens"
    )
    lines = [
        f"gpuplace run: {pipeline} with model {result.model}, {where}, {c.target} serving target",
        "",
        f"chosen shape      {plan.chosen.label}   "
        f"(plan {plan.plan_id}, fit score {plan.chosen.fit_score:.3f})",
        f"traffic           {lengths}, {traffic.arrival} arrivals at {plan.slo.rate_rps or 0:g} req/s",
        *format_prediction_table(result),
        f"SLO               {plan.slo.describe()}; measured attainment {measured.slo_attainment:.0%}",
        f"requests          {measured.completed} completed, {measured.failed} failed, "
        f"goodput {measured.goodput_rps:.2f} req/s",
    ]
    if plan.inventory_source != "local":
        lines += [
            f"planned cost      ${plan.cost_usd_per_month:,.0f}/month",
            f"planned frag.     {plan.fragmentation_before:.2f} → {plan.fragmentation_after:.2f} GPUs "
            "(FGD, the fleet before → after the planned placement)",
        ]
    lines += ["", *format_paths(result.outputs)]
    if result.comparison is not None:
        score = result.comparison.score
        lines.append(f"comparison        winner {score.winner or 'tie'} (margin {score.margin:.3f})")
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
    return "\n".join(lines)
