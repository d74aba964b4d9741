"""The deploy targets' dispatch: :func:`deploy` and :func:`teardown` on a plan directory already read,
to the kubernetes target (through :mod:`gpuplace.k8s`) or a local server (:mod:`.local`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from gpuplace.deploy.record import read_record, write_record
from gpuplace.deploy.registry import local_registry_path, register_standin, stop_standins
from gpuplace.errors import InvalidInput
from gpuplace.plandir import PlanDir
from gpuplace.types import DeploymentRecord

if TYPE_CHECKING:
    from gpuplace.deploy.standin import LocalStandIn

TARGETS = ("kubernetes", "local")
RUNTIMES = ("auto", "kubelet", "standin", "none")


def runtime_kind(runtime: str, kubeconfig: str | None) -> str:
    """``auto`` → ``standin`` on a gpuplace testenv (its kubeconfig's context), else ``kubelet``."""
    if runtime not in RUNTIMES:
        raise InvalidInput("runtime", runtime, f"must be one of {', '.join(RUNTIMES)}")
    if runtime != "auto":
        return runtime
    from gpuplace.testenv.controlplane import is_testenv_kubeconfig

    return "standin" if is_testenv_kubeconfig(kubeconfig) else "kubelet"


def check_target(target: str, port: int = 0) -> None:
    """Refuse an unknown target, or a port for a target that does not take one (before any file is read)."""
    if target not in TARGETS:
        raise InvalidInput("target", target, f"must be one of {', '.join(TARGETS)}")
    if port and target != "local":
        raise InvalidInput(
            "port", port, "is for --target local only", "Drop --port: a cluster serves on the plan's port"
        )


def _deploy_local(
    planned: PlanDir, run_id: str, timeout_s: float, workdir: str | Path | None, path: str, port: int
) -> DeploymentRecord:
    """Serve the plan on this machine and register its record under the plan id (and the run id)."""
    from gpuplace.deploy.served import serve_local

    plan = planned.plan
    record: DeploymentRecord = serve_local(
        plan.model,
        workdir=Path(workdir or planned.path / "local"),
        startup_timeout_s=timeout_s,
        name=plan.deployment_name,
        path=path,
        serving=plan.serving,
        port=port,
    )
    record = replace(record, plan_id=plan.plan_id)
    for key in (plan.plan_id, f"run-{run_id}" if run_id else ""):
        if key:
            write_record(record, local_registry_path(key).parent)
    return record


def _local_standin(
    planned: PlanDir, kubeconfig: str | None, timeout_s: float, workdir: str | Path | None
) -> LocalStandIn:
    """The runtime serving the testenv's KWOK pods on this machine; refused when the model does not fit."""
    from gpuplace.deploy.memory import require_fits_memory
    from gpuplace.deploy.standin import LocalStandIn, testenv_servers_dir

    require_fits_memory(planned.plan.model)  # the stand-in and the real node both serve on this machine
    return LocalStandIn(
        planned.plan.model,
        workdir=Path(workdir or planned.path / "standin"),
        startup_timeout_s=timeout_s,
        register_dir=testenv_servers_dir(kubeconfig),
    )


def deploy(
    planned: PlanDir,
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
    gpu_api: str = "auto",
    create_namespace: bool = False,
    allow_misplacement: bool = False,
    runtime: str = "auto",
    path: str = "",
    port: int = 0,
) -> DeploymentRecord:
    """Deploy the plan (a plan directory, read by the deploy step) to ``target``; see docs/deploy.md.
    ``port``: the local server's (0: any free one; only for the local target).

    Raises :class:`~gpuplace.k8s.measure.PlacementMismatch` (carrying the measured record) when a pod is not
    where the plan put it and ``allow_misplacement`` is False.
    """
    check_target(target, port)
    run_id = run_id or os.environ.get("KFP_RUN_ID", "")
    plan = planned.plan
    if target == "local":
        return _deploy_local(planned, run_id, timeout_s, workdir, path, port)
    from gpuplace.k8s import Api, connect, deploy_plan
    from gpuplace.k8s.runtime import KubeletRuntime, NoServeCheck, PodRuntime

    kind = runtime_kind(runtime, kubeconfig)
    pod_runtime: PodRuntime
    standin = None
    image_notes: tuple[str, ...] = ()
    if kind == "standin":
        from gpuplace.deploy.testenv_runtime import TestenvRuntime, real_node_of, with_local_images
        from gpuplace.testenv.nodeimages import built_images

        standin = _local_standin(planned, kubeconfig, timeout_s, workdir)
        pod_runtime = standin
        real_node = real_node_of(kubeconfig)
        if real_node:
            planned, image_notes = with_local_images(planned, built_images())
            pod_runtime = TestenvRuntime(standin, real_node)
    api = Api(connect(kubeconfig, context=context))
    if kind == "none":
        pod_runtime = NoServeCheck()
    elif kind != "standin":
        pod_runtime = KubeletRuntime(api, planned.serving.served_model_name)
    try:
        record = deploy_plan(
            planned,
            api=api,
            namespace=namespace,
            run_id=run_id,
            timeout_s=timeout_s,
            on_failure=on_failure,
            log=log,
            gpu_api=gpu_api,
            create_namespace=create_namespace,
            allow_misplacement=allow_misplacement,
            runtime=pod_runtime,
            path=path,
        )
    finally:
        api.client.close()
    if standin is not None:
        record = register_standin(record, standin.servers(), namespace, plan.plan_id, run_id)
    if image_notes:
        record = replace(record, notes=(*record.notes, *image_notes))
    return record


def teardown(
    planned: PlanDir | None = None,
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
    check_target(target)
    if target == "local":
        registry = None
        if record is None and (planned is not None or run_id):
            key = f"run-{run_id}" if run_id else planned.plan.plan_id if planned is not None else ""
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
    if planned is None and not run_id:
        raise InvalidInput(
            "plan_dir", None, "needed for the kubernetes target", "Give the plan or the run id"
        )
    from gpuplace.k8s import Api, connect, teardown_plan, teardown_run

    api = Api(connect(kubeconfig, context=context))
    keys = [f"run-{run_id}"] if run_id else []
    try:
        if planned is not None:
            keys.append(planned.plan.plan_id)
            result = teardown_plan(planned, api=api, namespace=namespace, timeout_s=timeout_s)
        else:
            result = teardown_run(api, namespace=namespace, run_id=run_id, timeout_s=timeout_s)
    finally:
        api.client.close()
    stopped = stop_standins(namespace, keys)
    text = f"deleted {len(result.deleted)} objects" + (
        f", {len(result.absent)} already gone" if result.absent else ""
    )
    if stopped:
        text += f"; stopped {stopped} KWOK stand-in server(s)"
    if result.pods_left:
        text += f"; {len(result.pods_left)} pods still terminating: {', '.join(result.pods_left)}"
    return text
