"""The main job (``gpuplace run`` / ``make run``): the pipelines on embedded defaults, locally.

It runs ``llm_placement`` (with ``compare=True``, ``orchestration_comparison``) through kfp's local
runner (``kfp.local`` with the SubprocessRunner) — the same compiled components users' tasks run,
minus the cluster — on embedded defaults: the local device (the ``tiny`` preset on a CPU,
``llama-3.1-8b`` on a GPU), the bundled ``mixed-a100-h100-l4`` fleet, the ``local`` serving target, a
local MLflow store, all under one run directory. Then it reads the outputs back and summarises them.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuplace.errors import InvalidInput


@dataclass(frozen=True, slots=True)
class MainJobConfig:
    workdir: Path = Path(".gpuplace/runs")
    model: str = ""  # "" picks tiny on CPU, llama-3.1-8b on a GPU
    device: str = "auto"
    inventory: str = "mixed-a100-h100-l4"
    slo_tpot_ms: float = 50.0
    slo_ttft_ms: float = 2000.0
    rate: float = 2.0
    max_requests: int = 20
    trace: str = ""
    compare: bool = False
    target: str = "local"  # or "kubernetes": deploy to the cluster of `kubeconfig`
    kubeconfig: str = ""
    namespace: str = "default"
    mlflow_uri: str = ""  # "" = $MLFLOW_TRACKING_URI, else a local store in the run directory


@dataclass(frozen=True, slots=True)
class MainJobResult:
    config: MainJobConfig
    model: str
    run_dir: Path
    outputs: Path  # the pipeline run's folder of task outputs
    plan: dict[str, Any]
    measured: dict[str, Any]  # the (native path's) load-test report
    mlflow: str  # how to open MLflow on the run
    report: Path  # the Markdown report a person reads first
    comparison: dict[str, Any] = field(default_factory=dict)


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
    model = config.model or default_model(config.device)
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
        inventory=config.inventory,
        slo_tpot_ms=config.slo_tpot_ms,
        slo_ttft_ms=config.slo_ttft_ms,
        rate=config.rate,
        namespace=config.namespace,
        kubeconfig=str(Path(config.kubeconfig).resolve()) if config.kubeconfig else "",
        loadtest_prompt_tokens="64",
        loadtest_output_tokens="16",
        loadtest_max_requests=config.max_requests,
        mlflow_uri=config.mlflow_uri,
        **_profile_args(model),
    )
    if config.compare:
        from pipelines.orchestration_comparison.pipeline import pipeline

        arguments = {**common, "native_target": config.target, "penalty_usd_per_breach": 0.05}
    else:
        from pipelines.llm_placement.pipeline import pipeline

        arguments = {
            **common,
            "target": config.target,
            "trace": config.trace,
            "mlflow_workdir": str(run_dir / "mlflow"),
        }
    local.init(
        runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(run_dir / "kfp"), raise_on_error=True
    )
    cwd = Path.cwd()
    os.chdir(run_dir)  # the local runner and the local MLflow store write relative paths
    try:
        pipeline(**arguments)
    finally:
        os.chdir(cwd)
    outputs = next((run_dir / "kfp").iterdir())
    plan = json.loads((_one(outputs, "plan-placement", "plan") / "plan.json").read_text())
    measured = json.loads(_one(outputs, "load-test", "report").read_text())
    comparison: dict[str, Any] = {}
    if config.compare:
        comparison = json.loads(_one(outputs, "compare-paths", "comparison").read_text())
        report = _one(outputs, "compare-paths", "report_md")
        store = run_dir / ".gpuplace" / "mlflow"
    else:
        report = _one(outputs, "load-test", "summary")
        store = run_dir / "mlflow"
    db, artifacts = store / "mlflow.db", store / "artifacts"
    mlflow = f"mlflow ui --backend-store-uri sqlite:///{db} --default-artifact-root {artifacts}"
    if config.mlflow_uri or os.environ.get("MLFLOW_TRACKING_URI"):
        mlflow = f"open {config.mlflow_uri or os.environ['MLFLOW_TRACKING_URI']} (experiment 'gpuplace')"
    return MainJobResult(config, model, run_dir, outputs, plan, measured, mlflow, report, comparison)


def _ms(seconds: Any) -> str:
    return (
        "-"
        if seconds is None or (isinstance(seconds, float) and math.isnan(seconds))
        else f"{seconds * 1e3:.2f}"
    )


def format_summary(result: MainJobResult) -> str:
    """The table ``gpuplace run`` prints: the chosen shape, predicted vs measured p99, cost, fragmentation."""
    plan, measured = result.plan, result.measured
    chosen = plan.get("chosen") or {}
    predicted = plan.get("predicted") or {}
    c = result.config
    pipeline = "orchestration_comparison" if c.compare else "llm_placement"
    attainment = measured.get("slo_attainment", float("nan"))
    lines = [
        f"gpuplace run: {pipeline} with model {result.model} on fleet {c.inventory}, "
        f"{c.target} serving target",
        "",
        f"chosen shape      {chosen.get('label', '-')}   (plan {plan.get('plan_id', '-')}, "
        f"fit score {chosen.get('fit_score', float('nan')):.3f})",
        f"{'':17} {'predicted':>10} {'measured':>10}",
        f"{'p99 TTFT (ms)':17} {_ms(predicted.get('ttft_p99_s')):>10} {_ms(measured['ttft']['p99']):>10}",
        f"{'p99 TPOT (ms)':17} {_ms(predicted.get('tpot_p99_s')):>10} {_ms(measured['tpot']['p99']):>10}",
        f"SLO               p99 TTFT ≤ {c.slo_ttft_ms:g} ms, p99 TPOT ≤ {c.slo_tpot_ms:g} ms "
        f"at {c.rate:g} req/s; measured attainment {attainment:.0%}",
        f"requests          {measured['completed']} completed, {measured['failed']} failed, "
        f"goodput {measured.get('goodput_rps', 0.0):.2f} req/s",
        f"cost              ${plan.get('cost_usd_per_month', float('nan')):,.0f}/month",
        f"fragmentation     {plan.get('fragmentation_before', float('nan')):.2f} → "
        f"{plan.get('fragmentation_after', float('nan')):.2f} GPUs (FGD, the fleet before → after placement)",
    ]
    if result.comparison:
        score = result.comparison.get("score") or {}
        margin = score.get("margin", float("nan"))
        lines.append(f"comparison        winner {score.get('winner', '-')} (margin {margin:.3f})")
    lines += [
        "",
        "Predicted latency is for the planned GPU; measured latency is the serving target's (locally:",
        "this machine's device), so on a CPU the two differ by design (docs/placement.md, docs/serving.md).",
        "",
        f"run directory     {result.run_dir}",
        f"task outputs      {result.outputs}",
        f"report            {result.report}",
        f"MLflow            {result.mlflow}",
    ]
    return "\n".join(lines)
