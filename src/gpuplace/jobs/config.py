"""The main job's configuration (``gpuplace run``): one field per flag. The fields that are pipeline
parameters take their names and defaults from the run table (:mod:`gpuplace.steps.run_params`), where
each is written once; the run's own (``workdir``, ``fleet``, ``compare``, ``verbose``) are written here.
Light to import, so ``gpuplace run``'s flags are made without importing the job."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gpuplace.steps.run_params import run_defaults

_RUN = run_defaults()
DEFAULT_REPEATS: int = _RUN["repeats"]  # runs of each path with --compare, interleaved (compare.noise)


@dataclass(frozen=True, slots=True)
class MainJobConfig:
    workdir: Path = Path(".gpuplace/runs")
    model: str = _RUN["model"]  # "" picks tiny on CPU, llama-3.1-8b on a GPU
    profile_device: str = _RUN["profile_device"]
    inventory: str = _RUN["inventory"]  # "" = local for the local target, else the fleet
    # Also planned (a prediction for its GPUs) when inventory is local ("": DEFAULT_FLEET); with the
    # kubernetes target, what is planned on ("": the cluster's own nodes, gpuplace.jobs.cluster).
    fleet: str = ""
    slo_tpot_ms: float = _RUN["slo_tpot_ms"]
    slo_ttft_ms: float = _RUN["slo_ttft_ms"]
    rate: float = _RUN["rate"]
    prompt_tokens: str = _RUN["prompt_tokens"]
    output_tokens: str = _RUN["output_tokens"]
    max_requests: int = _RUN["max_requests"]
    trace: str = _RUN["trace"]
    compare: bool = False
    repeats: int = DEFAULT_REPEATS  # with compare: interleaved runs of each path
    target: str = _RUN["target"]  # or "kubernetes": deploy to the cluster of `kubeconfig`
    kubeconfig: str = _RUN["kubeconfig"]
    namespace: str = _RUN["namespace"]
    runtime: str = _RUN["runtime"]  # what serves the pods on a cluster (docs/deploy.md#runtime)
    mlflow_uri: str = _RUN["mlflow_uri"]  # "" = $MLFLOW_TRACKING_URI, else a local store in the run directory
    verbose: bool = False  # show the runner's and the tasks' own logs instead of one line per task
