"""Deploying a plan to a cluster and taking it down again: the ``kubernetes`` target of the deploy step.

:func:`deploy_plan` labels every object with its plan and pipeline run, dry-runs all of them (so an
object the API server rejects means nothing was applied), server-side applies them in order, and times
each pod with a watch (:class:`~gpuplace.k8s.provisioning.PodTimer`) from its creation to *ready to serve*
(the first successful request, through a :class:`~gpuplace.k8s.runtime.PodRuntime`). Then it reads back
where every pod landed — the node from ``spec.nodeName``, the GPU devices from its DRA claims'
allocations (:mod:`gpuplace.k8s.dra`; with the device plugin, "node level only") — and the serving spec
the pods run, and compares that with the plan. A pod off its planned node or a claim outside the
planned GPU set fails the deploy (:class:`PlacementMismatch`) unless ``allow_misplacement``. When
applying, the rollout or the verification fails it tears down what it applied, or rolls back to what was
there before, or keeps it (``on_failure``), and says which in the error: never half a deployment without
a word. :func:`teardown_plan` deletes what a plan created (404 is success) and waits for its pods to go.

``gpu_api`` says how the pods get their GPUs: ``dra`` claims each replica's planned devices by UUID
(:mod:`gpuplace.manifests.pinned`), ``device-plugin`` applies the plan's manifests (``nvidia.com/gpu``),
``auto`` takes ``dra`` when the DRA driver publishes every planned device (a shared plan: the device
plugin; ``dra`` claims it with the driver's sharing config), else the device plugin.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from gpuplace.errors import GpuplaceError, InvalidInput
from gpuplace.k8s.api import Api, ref
from gpuplace.k8s.dra import (
    published_gpus,
)
from gpuplace.k8s.errors import Conflict, Forbidden, KubeError, NotFound
from gpuplace.k8s.labelling import labelled, pod_selector
from gpuplace.k8s.measure import Measured, PlacementMismatch, served_on, wait_and_measure
from gpuplace.k8s.provisioning import PodTimer, ProvisioningTimeout
from gpuplace.k8s.retry import Deadline
from gpuplace.k8s.rollout import RolloutTimeout, wait_for_rollout
from gpuplace.k8s.runtime import KubeletRuntime, PodRuntime
from gpuplace.k8s.teardown import teardown_objects
from gpuplace.plandir import WORKLOAD_KINDS, PlanDir
from gpuplace.types import DeploymentRecord, Inventory
from gpuplace.types.plan import PlacementPlan

ON_FAILURE = ("teardown", "rollback", "keep")
DEFAULT_TIMEOUT_S = 300.0
# Metadata the server owns; stripped before re-applying an object's previous state on rollback.
_SERVER_METADATA = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink")
_SERVER_ANNOTATIONS = (
    "deployment.kubernetes.io/revision",
    "kubectl.kubernetes.io/last-applied-configuration",
)


class DeployFailed(GpuplaceError):
    """Applying or rolling out a plan failed; ``cleanup`` says what was done about the objects applied."""

    def __init__(self, message: str, *, cleanup: str, cause: BaseException) -> None:
        super().__init__(f"{message}\n{cleanup}")
        self.cleanup = cleanup
        self.cause = cause


GPU_APIS = ("auto", "dra", "device-plugin")


def choose_gpu_api(
    api: Api, plan: PlacementPlan, requested: str, *, deadline: Deadline
) -> tuple[str, dict[str, tuple[str, str]], str]:
    """(the GPU API to deploy with, planned id → (uuid, kind) for DRA, a note on why not DRA)."""
    if requested not in GPU_APIS:
        raise InvalidInput("gpu_api", requested, f"must be one of {', '.join(GPU_APIS)}")
    if requested == "device-plugin":
        return "device-plugin", {}, "GPUs through the device plugin (--gpu-api device-plugin)"
    needed = [g for p in plan.placements for g in p.gpu_ids]
    reason = ""
    if plan.chosen.kind == "shared" and requested == "auto":
        # DRA shares a device only between the pods of one claim; the device plugin's sharing joins any.
        return "device-plugin", {}, "a shared GPU through the device plugin (--gpu-api dra claims it)"
    if not needed:
        reason = "the plan names no GPU devices"
    else:
        try:
            published = published_gpus(api, deadline=deadline)
        except NotFound:
            reason = "the cluster serves no resource.k8s.io/v1"
        except Forbidden:
            reason = "this identity may not list ResourceSlices"
        else:
            missing = [g for g in needed if g not in published]
            if not missing:
                return "dra", {g: (published[g].uuid, published[g].kind) for g in needed}, ""
            reason = f"{len(missing)} planned GPU(s) are not published by the DRA driver, e.g. {missing[0]}"
    if requested == "dra":
        raise InvalidInput("gpu_api", "dra", reason, "Deploy with --gpu-api device-plugin")
    return "device-plugin", {}, f"GPUs through the device plugin: {reason}"


def ensure_namespace(api: Api, namespace: str, *, deadline: Deadline) -> bool:
    """Create ``namespace`` when it does not exist (``--create-namespace``); True when it was created."""
    try:
        api.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}, deadline=deadline
        )
    except Conflict:
        return False
    return True


def _endpoint(plan_dir: PlanDir, namespace: str) -> str:
    for m in plan_dir.manifests:
        if m.get("kind") == "Service":
            ports = (m.get("spec") or {}).get("ports") or [{}]
            port = ports[0].get("port", 80)
            return f"http://{m['metadata']['name']}.{namespace}.svc.cluster.local:{port}"
    return ""


def _restorable(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A previously stored object as an apply configuration that puts it back."""
    meta = dict(obj.get("metadata") or {})
    for k in _SERVER_METADATA:
        meta.pop(k, None)
    meta.pop("namespace", None)
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in _SERVER_ANNOTATIONS}
    meta["annotations"] = annotations
    return {k: v for k, v in obj.items() if k not in ("status",)} | {"metadata": meta}


def _expected_pods(objects: Sequence[Mapping[str, Any]]) -> int:
    return sum(
        int((o.get("spec") or {}).get("replicas", 1)) for o in objects if o.get("kind") in WORKLOAD_KINDS
    )


def _check_deployable(plan_dir: PlanDir, on_failure: str, timeout_s: float) -> None:
    if on_failure not in ON_FAILURE:
        raise InvalidInput("on_failure", on_failure, f"must be one of {', '.join(ON_FAILURE)}")
    if timeout_s <= 0:
        raise InvalidInput("timeout_s", timeout_s, "must be positive")
    if not plan_dir.manifests:
        raise InvalidInput(
            "plan",
            str(plan_dir.path),
            f"was written without the manifests form (--emit {','.join(plan_dir.forms)}), which deploy "
            "applies",
            "Re-plan with --emit manifests,... (the other forms are in alternatives/ to apply yourself)",
        )


def _gpu_objects(
    api: Api, plan_dir: PlanDir, gpu_api: str, deadline: Deadline
) -> tuple[str, str, list[Mapping[str, Any]]]:
    """(the GPU API the pods get their GPUs through, a note why, the objects to apply): DRA objects pinned
    to the devices the plan chose when the cluster publishes them, else the plan's device-plugin
    manifests (``gpu_api`` "auto" falls back with the reason; "dra" refuses)."""
    plan = plan_dir.plan
    chosen_api, published, api_note = choose_gpu_api(api, plan, gpu_api, deadline=deadline)
    raw: list[Mapping[str, Any]] = list(plan_dir.manifests)
    if chosen_api == "dra":
        from gpuplace.manifests.pinned import pinned_dra_objects, shared_config

        # a shared GPU is shared as the plan's dra form chose (no form, or time-slicing: no config)
        sharing = plan.chosen.kind == "shared" and "dra" in plan_dir.forms
        config = shared_config(plan_dir.alternative("dra")) if sharing else []
        try:
            raw = list(pinned_dra_objects(plan, plan_dir.manifests, published, config))
        except InvalidInput as e:
            if gpu_api == "dra":
                raise
            chosen_api, api_note = "device-plugin", f"GPUs through the device plugin: {e.problem}"
    return chosen_api, api_note, raw


def _dry_run(api: Api, objects: Sequence[Mapping[str, Any]], namespace: str, deadline: Deadline) -> None:
    """Every object through the API server's dry run first, so nothing is half-applied; a namespace that
    does not exist is the user's to create."""
    try:
        for obj in objects:
            api.apply(obj, namespace, dry_run=True, deadline=deadline)
    except NotFound as e:
        if (e.details or {}).get("kind") == "namespaces":
            raise InvalidInput(
                "namespace",
                namespace,
                "does not exist",
                f"Create it first (kubectl create namespace {namespace}), or pass --create-namespace",
            ) from e
        raise


def deploy_plan(
    plan_dir: PlanDir,
    *,
    api: Api,
    namespace: str,
    run_id: str = "",
    timeout_s: float = DEFAULT_TIMEOUT_S,
    on_failure: str = "teardown",
    log: Callable[[str], None] | None = None,
    gpu_api: str = "auto",
    create_namespace: bool = False,
    allow_misplacement: bool = False,
    runtime: PodRuntime | None = None,
    inventory: Inventory | None = None,
    path: str = "",
) -> DeploymentRecord:
    """Apply ``plan_dir``'s manifests to ``namespace``, wait until every pod serves, read back where they
    are and check that against the plan; see the module docstring."""
    _check_deployable(plan_dir, on_failure, timeout_s)
    say = log or (lambda _m: None)
    deadline = Deadline(timeout_s)
    plan = plan_dir.plan
    if create_namespace and ensure_namespace(api, namespace, deadline=deadline):
        say(f"created namespace {namespace}")
    chosen_api, api_note, raw = _gpu_objects(api, plan_dir, gpu_api, deadline)
    objects = [labelled(m, plan.plan_id, run_id) for m in raw]
    say(f"GPU API: {chosen_api}" + (f" ({api_note})" if api_note and chosen_api != "device-plugin" else ""))
    created_at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    _dry_run(api, objects, namespace, deadline)
    say(f"dry run passed for {len(objects)} objects")

    previous = {
        ref(o): api.get_or_none(
            o["apiVersion"], o["kind"], o["metadata"]["name"], namespace, deadline=deadline
        )
        for o in objects
    }
    runtime = runtime or KubeletRuntime(api, plan_dir.serving.served_model_name)
    measured, applied = _apply_and_measure(
        api,
        plan_dir,
        objects,
        namespace,
        runtime=runtime,
        previous=previous,
        on_failure=on_failure,
        deadline=deadline,
        say=say,
        inventory=inventory,
    )
    record = _deployment_record(
        plan_dir,
        namespace,
        measured,
        runtime,
        gpu_api=chosen_api,
        api_note=api_note,
        created_at=created_at,
        path=path,
    )
    if record.mismatches() and not allow_misplacement:
        runtime.discard()
        cleanup = _clean_up(api, applied, previous, namespace, on_failure, plan.plan_id)
        raise PlacementMismatch(
            f"plan {plan.plan_id}: pods are not where the plan put them:\n  "
            + "\n  ".join(record.mismatches())
            + "\nPass --allow-misplacement to keep a deployment that differs from its plan.",
            record=replace(record, ready=False),
            cleanup=cleanup,
        )
    return record


def _apply_and_measure(
    api: Api,
    plan_dir: PlanDir,
    objects: Sequence[dict[str, Any]],
    namespace: str,
    *,
    runtime: PodRuntime,
    previous: Mapping[str, dict[str, Any] | None],
    on_failure: str,
    deadline: Deadline,
    say: Callable[[str], None],
    inventory: Inventory | None,
) -> tuple[Measured, list[dict[str, Any]]]:
    """Apply ``objects`` and wait until they serve: (their pods read back, the objects applied)."""
    plan = plan_dir.plan
    selector = pod_selector(plan.plan_id)
    applied: list[dict[str, Any]] = []
    timer = PodTimer(api, namespace, label_selector=selector)
    try:
        try:
            timer.start()
            t0 = time.monotonic()
            for obj in objects:
                api.apply(obj, namespace, deadline=deadline)
                applied.append(obj)
                say(f"applied {ref(obj)}")

            def rolled_out() -> None:
                for w in objects:
                    if w.get("kind") in WORKLOAD_KINDS:
                        wait_for_rollout(
                            api,
                            w["metadata"]["name"],
                            namespace,
                            pod_selector=selector,
                            deadline=deadline,
                            on_status=say,
                        )
                what = "serving" if runtime.observes_serving else "ready"
                say(f"{_expected_pods(objects)} pod(s) {what} in {time.monotonic() - t0:.1f} s")

            measured = wait_and_measure(
                api,
                plan_dir,
                namespace,
                timer=timer,
                runtime=runtime,
                count=_expected_pods(objects),
                deadline=deadline,
                inventory=inventory,
                then=rolled_out,
            )
        except (KubeError, RolloutTimeout, ProvisioningTimeout, GpuplaceError) as e:
            runtime.discard()
            cleanup = _clean_up(api, applied, previous, namespace, on_failure, plan.plan_id)
            raise DeployFailed(
                f"deploying plan {plan.plan_id} to namespace {namespace} failed: {e}",
                cleanup=cleanup,
                cause=e,
            ) from e
    finally:
        timer.close()
        runtime.close()
    return measured, applied


def _deployment_record(
    plan_dir: PlanDir,
    namespace: str,
    measured: Measured,
    runtime: PodRuntime,
    *,
    gpu_api: str,
    api_note: str,
    created_at: str,
    path: str,
) -> DeploymentRecord:
    """The record of the deployment as measured: where its pods serve, and any placement mismatch noted."""
    plan = plan_dir.plan
    notes = [n for n in (api_note,) if n] + list(measured.notes)
    endpoint = _endpoint(plan_dir, namespace)
    if runtime.serves_locally:  # the servers are on this machine: the load test drives them, not the Service
        endpoint = next((p.endpoint for p in measured.pods if p.endpoint), endpoint)
        if len(measured.pods) > 1:
            notes.append(
                f"the load test drives one pod's server ({endpoint}); the Service's balancing over "
                f"{len(measured.pods)} pods is not stood in for"
            )
    record = DeploymentRecord(
        target="kubernetes",
        name=plan.deployment_name,
        namespace=namespace,
        endpoint=endpoint,
        model=plan.model,
        ready=True,
        pods=measured.pods,
        created_at=created_at,
        plan_id=plan.plan_id,
        served_model_name=measured.request_model,
        serving=measured.serving,
        path=path,
        gpu_api=gpu_api,
        runtime=runtime.name,
    )
    return replace(
        record,
        served_on=served_on(plan, measured.pods, runtime),
        notes=tuple(notes + [f"placement mismatch: {m}" for m in record.mismatches()]),
    )


def _clean_up(
    api: Api,
    applied: list[dict[str, Any]],
    previous: Mapping[str, dict[str, Any] | None],
    namespace: str,
    on_failure: str,
    plan_id: str,
) -> str:
    if not applied:
        return "Nothing was applied."
    names = ", ".join(ref(o) for o in applied)
    if on_failure == "keep":
        return f"Left in place as asked (on_failure=keep): {names}. Remove with `gpuplace teardown`."
    deadline = Deadline(60.0)
    try:
        if on_failure == "teardown":
            result = teardown_objects(api, applied, namespace, plan_id=plan_id, deadline=deadline)
            return f"Tore down what was applied: {', '.join(result.deleted + result.absent)}."
        restored, deleted = [], []
        for obj in reversed(applied):
            before = previous.get(ref(obj))
            if before is None:
                api.delete(obj, namespace, deadline=deadline)
                deleted.append(ref(obj))
            else:
                api.apply(_restorable(before), namespace, force=True, deadline=deadline)
                restored.append(ref(obj))
        return (
            "Rolled back: "
            + (f"restored {', '.join(restored)}" if restored else "")
            + ("; " if restored and deleted else "")
            + (f"deleted new {', '.join(deleted)}" if deleted else "")
            + "."
        )
    except KubeError as e:
        return (
            f"Clean-up ({on_failure}) FAILED: {e}. Objects that may remain: {names}. Run `gpuplace teardown`."
        )
