"""The deploy step: every target in one place, behind :func:`deploy` and :func:`teardown`.

``kubernetes`` applies a plan directory with :mod:`gpuplace.k8s` (the only module that calls the API);
``local`` starts the plan's model in an OpenAI-compatible server on this machine (:mod:`.local`);
:mod:`.inline` is the Kubeflow path's serving step, which serves inside its own task. Every target
returns a :class:`DeploymentRecord`, written as ``<out>/deployment.json`` for the load-test step.
Heavy modules are imported only when their target is asked for.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from gpuplace.errors import InvalidInput
from gpuplace.plandir import read_plan_dir
from gpuplace.types import DeploymentRecord

TARGETS = ("kubernetes", "local")
RECORD_FILE = "deployment.json"
STATE_DIR_ENV = "GPUPLACE_STATE_DIR"


def local_registry_path(key: str) -> Path:
    """Where a local deployment's record is kept, by plan id and by ``run-<run id>``, so that
    teardown needs only the plan or the run id: a pipeline's exit handler cannot read the outputs
    of the tasks it guards, but it knows the run id."""
    root = Path(os.environ.get(STATE_DIR_ENV) or Path.home() / ".cache" / "gpuplace")
    return root / "local-deployments" / key / RECORD_FILE


def deploy(
    plan_dir: str | Path,
    *,
    target: str = "kubernetes",
    kubeconfig: str | None = None,
    context: str | None = None,
    namespace: str = "default",
    run_id: str = "",
    timeout_s: float = 300.0,
    on_failure: str = "teardown",
    workdir: str | Path | None = None,
    log: Callable[[str], None] | None = None,
) -> DeploymentRecord:
    """Deploy the plan in ``plan_dir`` to ``target``; see docs/deploy.md."""
    if target not in TARGETS:
        raise InvalidInput("target", target, f"must be one of {', '.join(TARGETS)}")
    planned = read_plan_dir(plan_dir)
    run_id = run_id or os.environ.get("KFP_RUN_ID", "")
    if target == "local":
        from gpuplace.deploy.local import deploy_local

        plan = planned.plan
        record: DeploymentRecord = deploy_local(
            plan.model,
            workdir=Path(workdir or planned.path / "local"),
            startup_timeout_s=timeout_s,
            name=plan.deployment_name,
        )
        record = replace(record, plan_id=plan.plan_id)
        for key in (plan.plan_id, f"run-{run_id}" if run_id else ""):
            if key:
                write_record(record, local_registry_path(key).parent)
        return record
    from gpuplace.k8s import Api, connect, deploy_plan

    api = Api(connect(kubeconfig, context=context))
    try:
        return deploy_plan(
            planned,
            api=api,
            namespace=namespace,
            run_id=run_id,
            timeout_s=timeout_s,
            on_failure=on_failure,
            log=log,
        )
    finally:
        api.client.close()


def teardown(
    plan_dir: str | Path | None = None,
    *,
    target: str = "kubernetes",
    kubeconfig: str | None = None,
    context: str | None = None,
    namespace: str = "default",
    record: DeploymentRecord | None = None,
    run_id: str = "",
    timeout_s: float = 120.0,
) -> str:
    """Remove what a deploy created — named by the plan, the record, or the run id it was labelled
    with — and return a one-line summary."""
    if target not in TARGETS:
        raise InvalidInput("target", target, f"must be one of {', '.join(TARGETS)}")
    if target == "local":
        registry = None
        if record is None and (plan_dir is not None or run_id):
            key = f"run-{run_id}" if run_id else read_plan_dir(plan_dir or "").plan.plan_id
            registry = local_registry_path(key)
            if not registry.is_file():
                return f"no local server registered for {key}: nothing to stop"
            record = read_record(registry)
        if record is None:
            raise InvalidInput(
                "record",
                None,
                "the local target needs the deployment record, and none is registered for this plan",
                "Pass --record <out>/deployment.json",
            )
        from gpuplace.deploy.local import teardown_local

        teardown_local(record)
        if registry is not None:
            registry.unlink(missing_ok=True)
        return f"stopped local server {record.name} (pid {record.pid})"
    if plan_dir is None and not run_id:
        raise InvalidInput(
            "plan_dir", None, "needed for the kubernetes target", "Give the plan or the run id"
        )
    from gpuplace.k8s import Api, connect, teardown_plan, teardown_run

    api = Api(connect(kubeconfig, context=context))
    try:
        if plan_dir is not None:
            result = teardown_plan(read_plan_dir(plan_dir), api=api, namespace=namespace, timeout_s=timeout_s)
        else:
            result = teardown_run(api, namespace=namespace, run_id=run_id, timeout_s=timeout_s)
    finally:
        api.client.close()
    text = f"deleted {len(result.deleted)} objects" + (
        f", {len(result.absent)} already gone" if result.absent else ""
    )
    if result.pods_left:
        text += f"; {len(result.pods_left)} pods still terminating: {', '.join(result.pods_left)}"
    return text


def read_record(path: str | Path, field: str = "deployment") -> DeploymentRecord:
    """A ``deployment.json`` (or the folder holding one), as :func:`write_record` wrote it."""
    p = Path(path)
    if p.is_dir():
        p = p / RECORD_FILE
    try:
        return DeploymentRecord.from_json_dict(json.loads(p.read_text()))
    except (FileNotFoundError, IsADirectoryError):
        raise InvalidInput(field, str(p), "no such file", "Give gpuplace deploy's deployment.json") from None
    except (json.JSONDecodeError, TypeError, AttributeError, KeyError, ValueError) as e:
        raise InvalidInput(field, str(p), f"is not a deployment record ({e})", "") from None


def write_record(record: DeploymentRecord, out: str | Path) -> Path:
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / RECORD_FILE
    path.write_text(json.dumps(record.to_json_dict(), indent=2) + "\n")
    return path


def format_record(record: DeploymentRecord) -> str:
    lines = [f"{'pod':40} {'node':24} {'planned':24} {'phase':9} {'sched s':>8} {'ready s':>8}"]
    for p in record.pods:
        sched = "-" if math.isnan(p.scheduling_s) else f"{p.scheduling_s:.1f}"
        ready = "-" if math.isnan(p.provisioning_s) else f"{p.provisioning_s:.1f}"
        lines.append(f"{p.name:40} {p.node:24} {p.planned_node:24} {p.phase:9} {sched:>8} {ready:>8}")
    if record.pods:
        dist = record.provisioning()
        lines.append(
            f"provisioning (created → ready): p50 {dist.median:.1f} s, max {dist.max:.1f} s "
            f"over {dist.count} pods"
        )
    lines.extend(f"note: {n}" for n in record.notes)
    return "\n".join(lines)
