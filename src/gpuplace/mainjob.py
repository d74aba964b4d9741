"""The main job (``gpuplace run`` / ``make run``) on embedded defaults, through kfp's local runner.

It runs the pipeline steps that exist as real KFP components with ``kfp.local`` and the
SubprocessRunner — the same path users' tasks take, minus the cluster — on the local device, the
``tiny`` preset on a CPU (``llama-3.1-8b`` when a GPU is present), and writes everything under one
run directory. It grows step by step as the components of docs/ land (today: profile).
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path

from gpuplace.errors import InvalidInput


@dataclass(frozen=True, slots=True)
class MainJobConfig:
    workdir: Path = Path(".gpuplace/runs")
    model: str = ""  # "" picks tiny on CPU, llama-3.1-8b on a GPU
    device: str = "auto"
    batch_sizes: str = "1,4"
    prompt_tokens: str = "128"
    output_tokens: str = "32"
    repeats: int = 5


@dataclass(frozen=True, slots=True)
class MainJobResult:
    run_dir: Path
    profile_path: Path
    summary_path: Path
    device_json_path: Path


def default_model(device: str) -> str:
    import torch

    on_gpu = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
    return "llama-3.1-8b" if on_gpu else "tiny"


def run_main_job(config: MainJobConfig) -> MainJobResult:
    from components.profiling.profile_latency import profile_latency
    from kfp import local

    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    run_dir = (config.workdir / stamp).resolve()
    if run_dir.exists():
        raise InvalidInput(
            "workdir", str(run_dir), "already holds a run with this timestamp", "Wait a second and rerun"
        )
    run_dir.mkdir(parents=True)
    model = config.model or default_model(config.device)
    local.init(
        runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(run_dir / "kfp"), raise_on_error=True
    )
    cwd = Path.cwd()
    os.chdir(run_dir)  # the local runner writes relative paths under the current directory
    try:
        task = profile_latency(
            model=model,
            device=config.device,
            batch_sizes=config.batch_sizes,
            prompt_tokens=config.prompt_tokens,
            output_tokens=config.output_tokens,
            repeats=config.repeats,
        )
    finally:
        os.chdir(cwd)
    return MainJobResult(
        run_dir=run_dir,
        profile_path=Path(task.outputs["profile"].path),
        summary_path=Path(task.outputs["summary"].path),
        device_json_path=Path(task.outputs["device_info"].path),
    )
