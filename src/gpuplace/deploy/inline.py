"""Serving inside the task itself: the Kubeflow orchestration path's serve-and-load-test step.

On the Kubeflow path, KFP places the step's pod with the plan's node affinity, tolerations and node
selector (kfp-kubernetes, at run time); the step starts the plan's model in its own pod, load-tests it
there and stops it, also when the load test fails. Provisioning is then the server's start-up inside
the already-placed pod.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gpuplace.deploy.local import deploy_local, teardown_local
from gpuplace.loadtest.config import LoadTestConfig
from gpuplace.loadtest.run import LoadTestResult, run_loadtest_to_paths
from gpuplace.plandir import read_plan_dir
from gpuplace.types import DeploymentRecord


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
) -> InlineResult:
    """Start the plan's model in this process's pod, run the load test ``params`` describe (the names of
    :data:`gpuplace.loadtest.config.PARAMS`; SLO and traffic default to the plan's) and stop the server."""
    planned = read_plan_dir(plan_dir)
    plan = planned.plan
    record = deploy_local(
        plan.model,
        workdir=Path(workdir),
        startup_timeout_s=startup_timeout_s,
        name=f"{plan.deployment_name}-kfp",
    )
    record = replace(record, plan_id=plan.plan_id)
    try:
        config = LoadTestConfig.from_params(
            {**params, "endpoint": "", "tokenizer": plan.model}, deployment=record, plan=planned.path
        )
        result = run_loadtest_to_paths(config, records=records, report=report, summary=summary)
    finally:
        teardown_local(record)
    return InlineResult(deployment=record, loadtest=result)
