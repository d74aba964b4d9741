"""The Kubeflow path's task pod on a cluster where no KFP backend runs: created as KFP's driver would
create it, then timed and read back exactly like the native path's pods.

A real Kubeflow run places the ``serve-and-load-test`` task's pod through KFP's driver and Argo; neither
runs on the testenv. So this module stands in for them and nothing else: it builds the task's Pod from
the checked-in compiled pipeline with :func:`gpuplace.manifests.kfp_pod.kfp_task_pod` (the driver's
pod-spec patch: the plan's node affinity, tolerations, node selector and accelerator type and count,
resolved from the plan's outputs), creates it on the same control plane as the native path, times it from
creation to ready-to-serve with the same :class:`~gpuplace.k8s.provisioning.PodTimer` and
:class:`~gpuplace.k8s.runtime.PodRuntime`, and reads back its node and GPUs with the same code
(:func:`gpuplace.k8s.deploy.measure_pods`). KFP 2.17 gives a task GPUs only through ``nvidia.com/gpu``
(kfp-kubernetes cannot attach a ResourceClaim), so this path's placement is node level only.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuplace.errors import GpuplaceError
from gpuplace.k8s.api import Api
from gpuplace.k8s.deploy import DeployFailed
from gpuplace.k8s.dra import PodPlacement
from gpuplace.k8s.errors import KubeError
from gpuplace.k8s.measure import Measured, PlacementMismatch, gpu_taken, served_on, wait_and_measure
from gpuplace.k8s.provisioning import PodTimer, ProvisioningTimeout
from gpuplace.k8s.retry import Deadline
from gpuplace.k8s.runtime import PodRuntime
from gpuplace.k8s.teardown import KFP_TASK_LABEL
from gpuplace.labels import PLAN_LABEL, RUN_LABEL
from gpuplace.plandir import PlanDir
from gpuplace.types import DeploymentRecord, PlacementPlan
from gpuplace.types.serving import ServingSpec

if TYPE_CHECKING:
    from gpuplace.manifests.kfp_pod import KfpTaskPod

TASK = "serve-and-load-test"  # the Kubeflow path's serving task in orchestration_comparison
PLAN_TASK = "plan-placement"
REPEAT_TASK = "repeat-runs"  # the task whose output list orchestration_comparison's run loop iterates
TASK_LABEL = KFP_TASK_LABEL
PATH_LABEL = "gpuplace.io/path"
STANDS_IN = (
    "the KFP backend stands in: the task pod is built as KFP 2.17's driver builds it from the compiled "
    "pipeline and the plan's outputs, and created directly (no Argo workflow, no ML Metadata)"
)


SERVES_IN_POD = (
    "the task pod's main container runs the plan's serving container directly, not the component through "
    "KFP's launcher (which a KFP run would start there, serving the same spec)"
)


def plan_outputs(plan_dir: PlanDir) -> dict[str, Any]:
    """What the ``plan-placement`` task outputs, from the plan directory it wrote."""
    kfp = dict(plan_dir.kfp)
    spec = plan_dir.serving
    return {
        "node_affinity": kfp.get("node_affinity") or {},
        "tolerations": kfp.get("tolerations") or [],
        "node_selector": kfp.get("node_selector") or {},
        "accelerator_type": str(kfp.get("accelerator_type") or spec.gpu_resource),
        "accelerator_count": str(kfp.get("accelerator_count") or spec.gpus_per_replica),
        "plan_id": plan_dir.plan.plan_id,
    }


def spec_of_task_pod(
    plan_spec: ServingSpec, pods: Sequence[Mapping[str, Any]], placements: Mapping[str, PodPlacement]
) -> ServingSpec:
    """The spec the task serves: the plan's (the component starts exactly that engine and arguments), in
    the task pod's image, with the GPUs its pod holds and one replica per task pod."""
    first = sorted(pods, key=lambda p: str(p["metadata"]["name"]))[0]
    containers = (first.get("spec") or {}).get("containers") or [{}]
    main = next((c for c in containers if c.get("name") == "main"), containers[0])
    placement = placements.get(str(first["metadata"]["name"]))
    resource, count = gpu_taken(placement, first) if placement else ("", 0)
    return replace(
        plan_spec,
        image=str(main.get("image", "")),
        gpu_resource=resource,
        gpus_per_replica=count,
        replicas=len(pods),
    )


def _kfp_pod(
    plan_dir: PlanDir, package: str | Path, name: str, arguments: Mapping[str, Any] | None, run_id: str
) -> KfpTaskPod:
    """The serving task's pod named ``name``, as KFP's driver builds it from the plan's outputs, labelled."""
    from gpuplace.manifests.kfp_pod import kfp_task_pod

    labels = {TASK_LABEL: name, PATH_LABEL: "kubeflow", PLAN_LABEL: plan_dir.plan.plan_id}
    if run_id:
        labels[RUN_LABEL] = run_id
    return kfp_task_pod(
        package,
        TASK,
        arguments=arguments or {},
        # the task runs in a loop over repeat_runs' output (orchestration_comparison's `repeats`): this pod
        # is one iteration, so that output stands in as one run
        task_outputs={PLAN_TASK: plan_outputs(plan_dir), REPEAT_TASK: {"Output": [0]}},
        run_id=run_id or "00000000-0000-0000-0000-000000000000",
        pod_name=name,
        labels=labels,
    )


def run_task_pod(
    plan_dir: PlanDir,
    *,
    api: Api,
    namespace: str,
    package: str | Path,
    runtime: PodRuntime,
    arguments: Mapping[str, Any] | None = None,
    run_id: str = "",
    timeout_s: float = 300.0,
    allow_misplacement: bool = False,
    log: Callable[[str], None] | None = None,
    serve_in_pod: bool = False,
) -> DeploymentRecord:
    """Create the task pod for ``plan_dir``, wait until it serves, read it back and check it against the
    plan. On failure the pod is deleted and what the runtime started is stopped."""
    say = log or (lambda _m: None)
    plan = plan_dir.plan
    name = f"{plan.deployment_name}-kfp-{uuid.uuid4().hex[:6]}"[:63]
    built = _kfp_pod(plan_dir, package, name, arguments, run_id)
    for w in built.warnings:
        say(f"KFP driver: {w}")
    task_pod = built.pod
    if serve_in_pod:  # the pod's own container serves the plan (a local plan on the testenv's real node)
        from gpuplace.manifests.local import serving_task_pod

        task_pod = serving_task_pod(task_pod, plan_dir.serving)
    deadline = Deadline(timeout_s)
    created_at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    selector = f"{TASK_LABEL}={name}"
    timer = PodTimer(api, namespace, label_selector=selector)
    try:
        try:
            timer.start()
            api.create(task_pod, namespace, deadline=deadline)
            say(f"created task pod {name}")
            measured = wait_and_measure(
                api,
                plan_dir,
                namespace,
                timer=timer,
                runtime=runtime,
                count=1,
                deadline=deadline,
                spec_of=spec_of_task_pod,
            )
        except (KubeError, ProvisioningTimeout, GpuplaceError) as e:
            runtime.discard()
            cleanup = delete_task_pod(api, namespace, name)
            raise DeployFailed(
                f"the Kubeflow path's task pod {name} failed: {e}", cleanup=cleanup, cause=e
            ) from e
    finally:
        timer.close()
        runtime.close()
    notes = (STANDS_IN, *((SERVES_IN_POD,) if serve_in_pod else ()), *built.warnings)
    record = _task_record(plan, name, namespace, created_at, measured, runtime, notes)
    if record.mismatches() and not allow_misplacement:
        runtime.discard()
        cleanup = delete_task_pod(api, namespace, name)
        raise PlacementMismatch(
            "the Kubeflow path's task pod is not where the plan put it:\n  "
            + "\n  ".join(record.mismatches()),
            record=replace(record, ready=False),
            cleanup=cleanup,
        )
    return record


def _task_record(
    plan: PlacementPlan,
    name: str,
    namespace: str,
    created_at: str,
    measured: Measured,
    runtime: PodRuntime,
    notes: tuple[str, ...],
) -> DeploymentRecord:
    """The deployment record of the task pod ``name`` as ``measured`` (``notes`` before the measurement's)."""
    pod = measured.pods[0]
    record = DeploymentRecord(
        target="kubernetes",
        name=name,
        namespace=namespace,
        endpoint=pod.endpoint,
        model=plan.model,
        ready=True,
        pods=measured.pods,
        created_at=created_at,
        plan_id=plan.plan_id,
        served_model_name=measured.request_model,
        notes=(*notes, *measured.notes),
        serving=measured.serving,
        path="kubeflow",
        gpu_api="device-plugin",
        runtime=runtime.name,
    )
    return replace(record, served_on=served_on(plan, measured.pods, runtime))


def delete_task_pod(api: Api, namespace: str, name: str) -> str:
    try:
        gone = api.delete({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}}, namespace)
    except KubeError as e:
        return f"Deleting task pod {name} FAILED: {e}; delete it by hand."
    return f"Deleted task pod {name}." if gone else f"Task pod {name} was already gone."
