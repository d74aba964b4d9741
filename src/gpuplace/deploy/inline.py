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
first successful request. The load test and the stop always follow, also when the load test fails.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gpuplace.errors import GpuplaceError, InvalidInput
from gpuplace.loadtest.config import LoadTestConfig
from gpuplace.loadtest.run import LoadTestResult, require_served, run_loadtest_to_paths
from gpuplace.plandir import PlanDir, read_plan_dir
from gpuplace.serving.probe import first_request
from gpuplace.types import DeploymentRecord, PodRecord

BACKENDS = ("local", "kfp", "testenv")


@dataclass(frozen=True, slots=True)
class InlineResult:
    deployment: DeploymentRecord
    loadtest: LoadTestResult


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
    from gpuplace.deploy.standin import LocalStandIn
    from gpuplace.k8s import Api, connect
    from gpuplace.k8s.kfp_task import delete_task_pod, run_task_pod

    standin = LocalStandIn(planned.plan.model, workdir=workdir, startup_timeout_s=timeout_s)
    api = Api(connect(kubeconfig or None))
    try:
        record = run_task_pod(
            planned,
            api=api,
            namespace=namespace,
            package=package,
            runtime=standin,
            arguments=arguments,
            run_id=run_id,
            timeout_s=timeout_s,
            allow_misplacement=allow_misplacement,
            log=print,
        )
    except BaseException:
        api.client.close()
        raise

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
    if spec.engine != "vllm":
        raise InvalidInput("serving.engine", spec.engine, "a KFP task serves the plan's vLLM spec", "")
    workdir.mkdir(parents=True, exist_ok=True)
    log_path = workdir / "server.log"
    try:
        with log_path.open("ab") as log:
            proc = subprocess.Popen(
                ["vllm", "serve", *spec.args], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
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
                f"vllm serve did not answer a first request within {timeout_s:g} s; log {log_path}"
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


def serve_and_load_test(
    plan_dir: str | Path,
    params: Mapping[str, Any],
    *,
    workdir: str | Path,
    records: str | Path,
    report: str | Path,
    summary: str | Path,
    startup_timeout_s: float = 300.0,
    backend: str = "local",
    kubeconfig: str = "",
    namespace: str = "default",
    run_id: str = "",
    allow_misplacement: bool = False,
    package: str | Path = "",
    arguments: Mapping[str, Any] | None = None,
) -> InlineResult:
    """Serve the plan on ``backend`` (see the module docstring), run the load test ``params`` describe
    (the names of :data:`gpuplace.loadtest.config.PARAMS`; SLO and traffic default to the plan's), stop the
    server, and fail (:class:`~gpuplace.loadtest.run.NothingServed`) when no request succeeded."""
    if backend not in BACKENDS:
        raise InvalidInput("backend", backend, f"must be one of {', '.join(BACKENDS)}")
    planned = read_plan_dir(plan_dir)
    plan = planned.plan
    stop: Callable[[], None]
    if backend == "testenv":
        if not package:
            raise InvalidInput(
                "package", package, "the testenv backend builds the task pod from a compiled pipeline"
            )
        record, stop = _serve_on_testenv(
            planned,
            workdir=Path(workdir),
            kubeconfig=kubeconfig,
            namespace=namespace,
            run_id=run_id,
            package=package,
            arguments=arguments or {},
            timeout_s=startup_timeout_s,
            allow_misplacement=allow_misplacement,
        )
    elif backend == "kfp":
        record, stop = _serve_in_pod(planned, workdir=Path(workdir), timeout_s=startup_timeout_s)
    else:
        from gpuplace.deploy.local import teardown_local
        from gpuplace.deploy.served import serve_local

        record = serve_local(
            plan.model,
            workdir=Path(workdir),
            startup_timeout_s=startup_timeout_s,
            name=f"{plan.deployment_name}-kfp",
            path="kubeflow",
            serving=plan.serving,
        )
        local = record

        def stop() -> None:
            teardown_local(local)

    record = replace(record, plan_id=plan.plan_id, path="kubeflow")
    try:
        config = LoadTestConfig.from_params(
            {**params, "endpoint": "", "tokenizer": plan.model}, deployment=record, plan=planned.path
        )
        result = run_loadtest_to_paths(config, records=records, report=report, summary=summary)
    finally:
        stop()
    return InlineResult(deployment=record, loadtest=result)


def compiled_package(name: str) -> Path:
    """The checked-in compiled YAML of pipeline ``name``, found without importing kfp or the pipelines."""
    import importlib.util

    spec = importlib.util.find_spec("gpuplace.pipelines")
    if spec is None or not spec.submodule_search_locations:
        raise InvalidInput("pipeline", name, "gpuplace.pipelines is not installed", "Reinstall gpuplace")
    return Path(next(iter(spec.submodule_search_locations))) / name / "pipeline.yaml"


def serve_and_load_test_task(
    plan_dir: str | Path,
    params: Mapping[str, Any],
    *,
    deployment: str | Path,
    records: str | Path,
    report: str | Path,
    summary: str | Path,
) -> InlineResult:
    """The ``serve_and_load_test`` component's step, by its parameter names: serve, load-test, write the
    deployment record beside the load test's outputs."""
    backend = str(params.get("backend") or "local")
    package = ""
    if backend == "testenv":
        package = str(compiled_package("orchestration_comparison"))
    # this task's inputs by the pipeline's parameter names, for the task pod's executor input
    pipeline_args = {
        "traffic_prompt_tokens": params.get("prompt_tokens", ""),
        "traffic_output_tokens": params.get("output_tokens", ""),
        "loadtest_max_requests": params.get("max_requests", 20),
        "rate": params.get("rate", 0.0),
        "namespace": params.get("namespace", "default"),
        "kubeconfig": params.get("kubeconfig", ""),
        "kubeflow_backend": backend,
    }
    result = serve_and_load_test(
        plan_dir,
        params,
        workdir=str(deployment) + ".server",
        records=records,
        report=report,
        summary=summary,
        startup_timeout_s=float(params.get("startup_timeout_s") or 300.0),
        backend=backend,
        kubeconfig=str(params.get("kubeconfig") or ""),
        namespace=str(params.get("namespace") or "default"),
        run_id=str(params.get("run_id") or ""),
        allow_misplacement=bool(params.get("allow_misplacement")),
        package=package,
        arguments=pipeline_args,
    )
    Path(deployment).write_text(json.dumps(result.deployment.to_json_dict(), indent=2))
    return result


def check_served(result: InlineResult) -> None:
    """Fail the task when no request succeeded (its outputs are written first by the component)."""
    require_served(result.loadtest, "the Kubeflow path's load test", result.deployment.endpoint)
