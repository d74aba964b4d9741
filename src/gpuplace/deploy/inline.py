"""The Kubeflow path's serving step: serve, load-test and stop, all inside one KFP task.

Where the server runs depends on where the task runs (``backend``):

- ``local`` — the local runner (``gpuplace run --compare``): the same local engine the native path's
  ``local`` target runs (:func:`gpuplace.deploy.served.serve_local`), on this machine;
- ``kfp`` — a real Kubeflow run: KFP's driver has placed this task's pod from the plan's outputs; the task
  runs the plan's serving spec (its engine and arguments) inside its own pod, and reads where it landed
  from the downward API (``NODE_NAME``, set by the pipeline from ``spec.nodeName``);
- ``testenv`` — no KFP backend runs on a gpuplace testenv, so :mod:`gpuplace.k8s.kfp_task` creates the pod
  KFP's driver would have created for this task on that control plane, and the KWOK stand-in serves it.

Every backend records the serving spec it ran, and provisioning from the serving object's creation to the
first successful request. :mod:`gpuplace.steps.serve_and_loadtest` runs the load test and the stop after
it, also when the load test fails.
"""

from __future__ import annotations

import math
import os
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpuplace.errors import GpuplaceError, InvalidInput
from gpuplace.plandir import PlanDir
from gpuplace.serving.probe import first_request
from gpuplace.types import DeploymentRecord, PodRecord
from gpuplace.types.engines import engine_of

BACKENDS = ("local", "kfp", "testenv")


def _serve_on_testenv(
    planned: PlanDir,
    *,
    workdir: Path,
    kubeconfig: str,
    namespace: str,
    run_id: str,
    package: str | Path,
    arguments: Mapping[str, Any],
    timeout_s: float,
    allow_misplacement: bool,
) -> tuple[DeploymentRecord, Callable[[], None]]:
    from gpuplace.deploy.memory import require_fits_memory
    from gpuplace.deploy.standin import LocalStandIn, testenv_servers_dir
    from gpuplace.deploy.testenv_runtime import TestenvRuntime, real_node_of, with_local_images
    from gpuplace.k8s import Api, connect
    from gpuplace.k8s.kfp_task import delete_task_pod, run_task_pod
    from gpuplace.k8s.runtime import PodRuntime
    from gpuplace.testenv.nodeimages import built_images

    require_fits_memory(planned.plan.model)  # the stand-in and the real node both serve on this machine
    standin = LocalStandIn(
        planned.plan.model,
        workdir=workdir,
        startup_timeout_s=timeout_s,
        register_dir=testenv_servers_dir(kubeconfig),
    )
    runtime: PodRuntime = standin
    real_node = real_node_of(kubeconfig)
    image_notes: tuple[str, ...] = ()
    # a plan for this machine is served on the real node by the task pod's own container
    in_pod = bool(real_node) and engine_of(planned.serving.engine).runs_here and bool(planned.manifests)
    if real_node:
        planned, image_notes = with_local_images(planned, built_images())
        runtime = TestenvRuntime(standin, real_node)
    api = Api(connect(kubeconfig or None))
    try:
        record = run_task_pod(
            planned,
            api=api,
            namespace=namespace,
            package=package,
            runtime=runtime,
            arguments=arguments,
            run_id=run_id,
            timeout_s=timeout_s,
            allow_misplacement=allow_misplacement,
            log=print,
            serve_in_pod=in_pod,
        )
    except BaseException:
        api.client.close()
        raise
    if image_notes:
        record = replace(record, notes=(*record.notes, *image_notes))

    def stop() -> None:
        try:
            delete_task_pod(api, namespace, record.name)
        finally:
            standin.discard()
            api.client.close()

    return record, stop


def _serve_in_pod(
    planned: PlanDir, *, workdir: Path, timeout_s: float
) -> tuple[DeploymentRecord, Callable[[], None]]:
    """The plan's serving spec in this task's own pod (a real KFP run): its engine with its arguments."""
    from gpuplace.deploy.local import _stop_pid

    spec = planned.serving
    engine = engine_of(spec.engine)
    if not engine.serves_in_task_pod:
        raise InvalidInput(
            "serving.engine", spec.engine, f"a KFP task cannot start {engine.title} from the plan's spec", ""
        )
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / "server.log"
    try:
        with log_path.open("ab") as log:
            proc = subprocess.Popen(
                [*engine.command, *spec.args], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
    except FileNotFoundError:
        raise GpuplaceError(
            "this task's image has no `vllm`: the Kubeflow path must run the plan's serving spec "
            f"({spec.image}); run the pipeline with the serving image (images/README.md)"
        ) from None
    endpoint = f"http://127.0.0.1:{spec.port}"
    deadline = time.monotonic() + timeout_s
    while not first_request(endpoint, spec.served_model_name, timeout_s=30.0):
        if proc.poll() is not None or time.monotonic() > deadline:
            _stop_pid(proc.pid)
            raise GpuplaceError(
                f"{' '.join(engine.command)} did not answer a first request within {timeout_s:g} s; "
                f"log {log_path}"
            )
        time.sleep(0.5)
    serving = time.time()
    own = os.environ.get("KFP_POD_NAME", "")
    pod_created = _own_pod_created(own)
    pod = PodRecord(
        name=own or "kfp-task",
        node=os.environ.get("NODE_NAME", ""),
        phase="Running",
        # the pod's creation as the API says it; unknown (so provisioning is) when this task may not read it
        created_at_s=pod_created or math.nan,
        serving_at_s=serving,
        placement_level="node" if os.environ.get("NODE_NAME") else "",
        timing="api",
    )
    record = DeploymentRecord(
        target="kubernetes",
        name=own or planned.plan.deployment_name,
        namespace=os.environ.get("POD_NAMESPACE", ""),
        endpoint=endpoint,
        model=planned.plan.model,
        ready=True,
        pods=(pod,),
        plan_id=planned.plan.plan_id,
        served_model_name=spec.served_model_name,
        serving=spec,
        path="kubeflow",
        gpu_api="device-plugin",
        runtime="kubelet",
        notes=(
            "node from the downward API (spec.nodeName); GPUs through the device plugin: node level only",
        ),
    )
    return record, lambda: _stop_pid(proc.pid)


def _own_pod_created(name: str) -> float:
    """This pod's creationTimestamp (1 s resolution), when the task's identity may read its pod; else 0."""
    if not name or not os.environ.get("POD_NAMESPACE"):
        return 0.0
    try:
        from gpuplace.k8s import Api, connect
        from gpuplace.k8s.rollout import _epoch

        api = Api(connect("in-cluster"))
        try:
            pod = api.get("v1", "Pod", name, os.environ["POD_NAMESPACE"])
        finally:
            api.client.close()
        return _epoch((pod.get("metadata") or {}).get("creationTimestamp"))
    except Exception:  # no in-cluster identity or no RBAC to read its pod: the creation time is unknown
        return 0.0


def serve_inline(
    planned: PlanDir,
    *,
    backend: str,
    workdir: Path,
    startup_timeout_s: float = 300.0,
    kubeconfig: str = "",
    namespace: str = "default",
    run_id: str = "",
    allow_misplacement: bool = False,
    package: str | Path = "",
    arguments: Mapping[str, Any] | None = None,
) -> tuple[DeploymentRecord, Callable[[], None]]:
    """Serve the plan on ``backend`` (see the module docstring); the record (the Kubeflow path's) and how
    to stop the server."""
    if backend not in BACKENDS:
        raise InvalidInput("backend", backend, f"must be one of {', '.join(BACKENDS)}")
    plan = planned.plan
    stop: Callable[[], None]
    if backend == "testenv":
        if not package:
            raise InvalidInput(
                "package", package, "the testenv backend builds the task pod from a compiled pipeline"
            )
        record, stop = _serve_on_testenv(
            planned,
            workdir=workdir,
            kubeconfig=kubeconfig,
            namespace=namespace,
            run_id=run_id,
            package=package,
            arguments=arguments or {},
            timeout_s=startup_timeout_s,
            allow_misplacement=allow_misplacement,
        )
    elif backend == "kfp":
        record, stop = _serve_in_pod(planned, workdir=workdir, timeout_s=startup_timeout_s)
    else:
        from gpuplace.deploy.local import teardown_local
        from gpuplace.deploy.served import serve_local

        record = serve_local(
            plan.model,
            workdir=workdir,
            startup_timeout_s=startup_timeout_s,
            name=f"{plan.deployment_name}-kfp",
            path="kubeflow",
            serving=plan.serving,
        )
        local = record

        def stop() -> None:
            teardown_local(local)

    return replace(record, plan_id=plan.plan_id, path="kubeflow"), stop
