"""The main job's configuration (``gpuplace run``): one field per flag, the only place their defaults are
written. Standard library only, so ``gpuplace run``'s flags are made from it without importing the job."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DEFAULT_FLEET = "mixed-a100-h100-l4"  # the fleet a local run also plans, as a prediction for its GPUs
# runs of each path with --compare, interleaved: the fewest a verdict names a winner from (compare.noise)
DEFAULT_REPEATS = 3


@dataclass(frozen=True, slots=True)
class MainJobConfig:
    workdir: Path = Path(".gpuplace/runs")
    model: str = ""  # "" picks tiny on CPU, llama-3.1-8b on a GPU
    device: str = "auto"
    inventory: str = ""  # "" = local for the local target, else the fleet
    # Also planned (a prediction for its GPUs) when inventory is local ("": DEFAULT_FLEET); with the
    # kubernetes target, what is planned on ("": the cluster's own nodes, gpuplace.jobs.cluster).
    fleet: str = ""
    slo_tpot_ms: float = 50.0
    slo_ttft_ms: float = 2000.0
    rate: float = 2.0  # a quarter of tiny's local capacity on a slow day here (7-10 req/s, 2026-12-05)
    prompt_tokens: str = "128"
    output_tokens: str = "32"
    max_requests: int = 120
    trace: str = ""
    compare: bool = False
    repeats: int = DEFAULT_REPEATS  # with compare: interleaved runs of each path
    target: str = "local"  # or "kubernetes": deploy to the cluster of `kubeconfig`
    kubeconfig: str = ""
    namespace: str = "default"
    runtime: str = "auto"  # what serves the pods on a cluster (docs/deploy.md#runtime)
    mlflow_uri: str = ""  # "" = $MLFLOW_TRACKING_URI, else a local store in the run directory
    verbose: bool = False  # show the runner's and the tasks' own logs instead of one line per task
