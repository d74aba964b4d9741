"""Every deploy target in one place, behind :func:`deploy` and :func:`teardown`, on a plan directory
already read (:mod:`gpuplace.steps.deploy` and :mod:`gpuplace.steps.teardown` read it).

``kubernetes`` applies a plan directory with :mod:`gpuplace.k8s` (the only module that calls the API);
``local`` starts the plan's model in an OpenAI-compatible server on this machine (:mod:`.local`);
:mod:`.inline` is the Kubeflow path's serving step, which serves inside its own task. Every target
returns a :class:`DeploymentRecord`, which :mod:`.record` writes as ``deployment.json`` for the next steps.
Heavy modules are imported only when their target is asked for.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

from gpuplace.deploy.record import RECORD_FILE, read_record, save_record, write_record
from gpuplace.errors import InvalidInput
from gpuplace.plandir import PlanDir
from gpuplace.types import DeploymentRecord, PodRecord
from gpuplace.types.deploy import NODE_LEVEL

__all__ = ["RECORD_FILE", "read_record", "save_record", "write_record"]

TARGETS = ("kubernetes", "local")
RUNTIMES = ("auto", "kubelet", "standin", "none")
STATE_DIR_ENV = "GPUPLACE_STATE_DIR"


def local_registry_path(key: str) -> Path:
    """Where a local deployment's record is kept, by plan id and by ``run-<run id>``, so that
    teardown needs only the plan or the run id: a pipeline's exit handler cannot read the outputs
    of the tasks it guards, but it knows the run id."""
    root = Path(os.environ.get(STATE_DIR_ENV) or Path.home() / ".cache" / "gpuplace")
    return root / "local-deployments" / key / RECORD_FILE


def runtime_kind(runtime: str, kubeconfig: str | None) -> str:
    """``auto`` → ``standin`` on a gpuplace testenv (its kubeconfig's context), else ``kubelet``."""
    if runtime not in RUNTIMES:
        raise InvalidInput("runtime", runtime, f"must be one of {', '.join(RUNTIMES)}")
    if runtime != "auto":
        return runtime
    from gpuplace.testenv.controlplane import is_testenv_kubeconfig

    return "standin" if is_testenv_kubeconfig(kubeconfig) else "kubelet"


def standin_dir(namespace: str, key: str) -> Path:
    """Where the KWOK stand-in's local servers of a deploy are registered (``key``: plan id or
    ``run-<id>``), one record per pod, so teardown finds them by the plan or the run id."""
    return local_registry_path(f"kwok/{namespace}/{key}").parent


def standin_records(namespace: str, key: str) -> list[tuple[Path, DeploymentRecord]]:
    folder = standin_dir(namespace, key)
    return [(p, read_record(p)) for p in sorted(folder.glob(f"*/{RECORD_FILE}"))]


def check_target(target: str, port: int = 0) -> None:
    """Refuse an unknown target, or a port for a target that does not take one (before any file is read)."""
    if target not in TARGETS:
        raise InvalidInput("target", target, f"must be one of {', '.join(TARGETS)}")
    if port and target != "local":
        raise InvalidInput(
            "port", port, "is for --target local only", "Drop --port: a cluster serves on the plan's port"
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
        from gpuplace.deploy.served import serve_local

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
    from gpuplace.k8s import Api, connect, deploy_plan
    from gpuplace.k8s.runtime import KubeletRuntime, NoServeCheck, PodRuntime

    kind = runtime_kind(runtime, kubeconfig)
    pod_runtime: PodRuntime
    standin = None
    image_notes: tuple[str, ...] = ()
    if kind == "standin":
        from gpuplace.deploy.memory import require_fits_memory
        from gpuplace.deploy.standin import LocalStandIn, testenv_servers_dir
        from gpuplace.deploy.testenv_runtime import TestenvRuntime, real_node_of, with_local_images
        from gpuplace.testenv.nodeimages import built_images

        require_fits_memory(plan.model)  # the stand-in and the real node both serve on this machine
        standin = LocalStandIn(
            plan.model,
            workdir=Path(workdir or planned.path / "standin"),
            startup_timeout_s=timeout_s,
            register_dir=testenv_servers_dir(kubeconfig),
        )
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
        record = _register_standin(record, standin.servers(), namespace, plan.plan_id, run_id)
    if image_notes:
        record = replace(record, notes=(*record.notes, *image_notes))
    return record


def _register_standin(
    record: DeploymentRecord,
    servers: Mapping[str, DeploymentRecord],
    namespace: str,
    plan_id: str,
    run_id: str,
) -> DeploymentRecord:
    """Keep the stand-in's servers findable by teardown (by plan id and by run id)."""
    for pod, server in servers.items():
        for key in (plan_id, f"run-{run_id}" if run_id else ""):
            if key:
                write_record(server, standin_dir(namespace, key) / pod)
    return record


def _stop_standins(namespace: str, keys: list[str]) -> int:
    """Stop the stand-in servers registered under ``keys`` and forget them under every key (a server is
    registered by plan id and by run id)."""
    from gpuplace.deploy.local import teardown_local

    stopped = 0
    for key in keys:
        for path, server in standin_records(namespace, key):
            teardown_local(server)
            pod = path.parent.name
            for twin in standin_dir(namespace, key).parent.glob(f"*/{pod}/{RECORD_FILE}"):
                twin.unlink(missing_ok=True)
            stopped += 1
    return stopped


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
    stopped = _stop_standins(namespace, keys)
    text = f"deleted {len(result.deleted)} objects" + (
        f", {len(result.absent)} already gone" if result.absent else ""
    )
    if stopped:
        text += f"; stopped {stopped} KWOK stand-in server(s)"
    if result.pods_left:
        text += f"; {len(result.pods_left)} pods still terminating: {', '.join(result.pods_left)}"
    return text


def _secs(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.2f}"


def _gpus(pod: PodRecord) -> str:
    if pod.gpu_ids:
        return ",".join(g.split("/", 1)[-1] for g in pod.gpu_ids)
    if pod.placement_level == NODE_LEVEL:
        return f"{pod.gpu_count}× (node level)"
    return "-"


def provisioning_split(record: DeploymentRecord) -> list[str]:
    """Per pod that a kubelet ran: provisioning split into scheduling, image, container start and server
    start (measured, docs/testenv.md#a-real-node---real-node); nothing for pods no container ran."""
    out = []
    for p in record.pods:
        if p.runtime and not math.isnan(p.image_s):
            out.append(
                f"{p.name} ({p.runtime}): scheduling {p.scheduling_s:.2f} s, image {p.image_s:.0f} s "
                f"(1 s events), container start {p.container_start_s:.2f} s, server start "
                f"{p.server_start_s:.2f} s"
            )
    return out


def format_record(record: DeploymentRecord) -> str:
    """The table ``gpuplace deploy`` prints: measured node and GPUs against the plan, and the times."""
    lines = [
        f"{'pod':34} {'node':16} {'planned':16} {'GPUs (measured)':22} {'planned GPUs':18} "
        f"{'sched s':>7} {'ready s':>7} {'serve s':>7}"
    ]
    for p in record.pods:
        planned = ",".join(g.split("/", 1)[-1] for g in p.planned_gpu_ids) or "-"
        lines.append(
            f"{p.name:34} {p.node or '-':16} {p.planned_node or '-':16} {_gpus(p):22} {planned:18} "
            f"{_secs(p.scheduling_s):>7} {_secs(p.ready_s):>7} {_secs(p.provisioning_s):>7}"
        )
    if record.pods:
        dist = record.provisioning()
        if dist.count:
            lines.append(
                f"provisioning (created → first successful request): p50 {dist.median:.2f} s, "
                f"max {dist.max:.2f} s over {dist.count} pods"
            )
        else:
            lines.append("provisioning: unknown (ready-to-serve was not observed)")
        lines.extend(provisioning_split(record))
    if record.gpu_api or record.runtime:
        lines.append(
            f"GPU API {record.gpu_api or '-'}; servers run by {record.runtime or '-'}; "
            f"served on {record.served_on or 'unknown'}"
        )
    lines.extend(f"note: {n}" for n in record.notes)
    return "\n".join(lines)


def deploy_metrics(record: DeploymentRecord) -> dict[str, float]:
    """The deploy step's KFP metrics: pods, misplaced pods, provisioning p50 and max (seconds)."""
    out = {"pods": float(len(record.pods)), "misplaced_pods": float(len(record.mismatches()))}
    dist = record.provisioning()
    if dist.count:
        out |= {"provisioning_p50_s": dist.median, "provisioning_max_s": dist.max}
    return out
