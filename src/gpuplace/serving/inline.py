"""Serving inside the task itself: the Kubeflow orchestration path's serving + load-test step.

On the Kubeflow path, KFP places the step's pod with the plan's node affinity, tolerations and
node selector (kfp-kubernetes, at run time), and the step serves the model in its own pod and
load-tests it there; provisioning is then the server's start-up inside the already-placed pod. The
server is always stopped before the step returns, also when the load test fails.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gpuplace.loadtest.step import LoadTestResult, config_from_component_params, run_loadtest_to_paths
from gpuplace.serving.local import deploy_local, teardown_local
from gpuplace.types import DeploymentRecord


@dataclass(frozen=True, slots=True)
class InlineResult:
    deployment: DeploymentRecord
    loadtest: LoadTestResult


def serve_and_load_test(
    plan_dir: str | Path,
    *,
    workdir: str | Path,
    records: str | Path,
    report: str | Path,
    summary: str | Path,
    startup_timeout_s: float = 300.0,
    **workload: Any,
) -> InlineResult:
    """Start the plan's model in this process's pod, run the load test (``workload`` takes the load
    test component's parameters) and stop the server."""
    from gpuplace.k8s.plandir import load_plan_dir

    bundle = load_plan_dir(plan_dir)
    record = deploy_local(
        bundle.model,
        workdir=Path(workdir),
        startup_timeout_s=startup_timeout_s,
        name=f"{bundle.deployment_name}-kfp",
    )
    record = replace(record, plan_id=bundle.plan_id)
    try:
        config = config_from_component_params(
            endpoint=record.endpoint,
            model=record.served_model_name,
            tokenizer=bundle.model,
            plan=str(plan_dir),
            **workload,
        )
        result = run_loadtest_to_paths(config, records=records, report=report, summary=summary)
    finally:
        teardown_local(record)
    return InlineResult(deployment=record, loadtest=result)
