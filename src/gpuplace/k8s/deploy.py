"""Deploying a plan to a cluster and taking it down again: the ``kubernetes`` target of the deploy step.

:func:`deploy_plan` labels every object with its plan and pipeline run, dry-runs all of them (so an
object the API server rejects means nothing was applied), server-side applies them in order, waits for
each Deployment to roll out under one deadline, and returns a :class:`DeploymentRecord` with each pod's
node, planned node, GPU set and provisioning times. When applying or the rollout fails it tears down
what it applied, or rolls back to what was there before, or keeps it (``on_failure``), and says which in
the error: never half a deployment without a word. :func:`teardown_plan` deletes what a plan created
(404 is success) and waits for its pods to go.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from gpuplace.errors import GpuplaceError, InvalidInput
from gpuplace.k8s.api import Api, ref
from gpuplace.k8s.errors import KubeError, NotFound
from gpuplace.k8s.retry import Deadline
from gpuplace.k8s.rollout import RolloutTimeout, pod_record, wait_for_rollout
from gpuplace.labels import MANAGED_BY, MANAGER, PLAN_LABEL, REPLICA_LABEL, RUN_LABEL
from gpuplace.plandir import WORKLOAD_KINDS, PlanDir
from gpuplace.types import DeploymentRecord, PodRecord
from gpuplace.types.plan import Placement

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


@dataclass(frozen=True, slots=True)
class TeardownResult:
    deleted: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()  # already gone (404): success too
    pods_left: tuple[str, ...] = field(default=())


def pod_selector(plan_id: str) -> str:
    return f"{PLAN_LABEL}={plan_id}"


def labelled(obj: Mapping[str, Any], plan_id: str, run_id: str = "") -> dict[str, Any]:
    """``obj`` with the labels tying it to its plan and pipeline run (pod templates get the plan's)."""
    out: dict[str, Any] = json.loads(json.dumps(obj))  # deep copy of plain YAML data
    tie = {MANAGED_BY: MANAGER, PLAN_LABEL: plan_id}
    meta = out.setdefault("metadata", {})
    meta.pop("namespace", None)
    meta["labels"] = {**(meta.get("labels") or {}), **tie, **({RUN_LABEL: run_id} if run_id else {})}
    template = (out.get("spec") or {}).get("template")
    if out.get("kind") in WORKLOAD_KINDS and isinstance(template, dict):
        # Not the run id: a new pipeline run of an unchanged plan must not roll the pods.
        tmeta = template.setdefault("metadata", {})
        tmeta["labels"] = {**(tmeta.get("labels") or {}), **tie}
    return out


def match_placements(
    pods: list[PodRecord], placements: tuple[Placement, ...], replica_of: Mapping[str, int]
) -> list[PodRecord]:
    """Pair pods with planned replicas: by the replica label when pods carry one, else by node.

    Pods on a node the plan named take that node's placements first; the rest pair up in order, and a
    pod paired with a placement on another node is a mismatch. Planned GPU ids come with the pairing.
    """
    by_replica = {p.replica: p for p in placements}
    unused = list(placements)
    paired: dict[str, Placement] = {}
    for pod in pods:
        r = replica_of.get(pod.name)
        if r is not None and r in by_replica and by_replica[r] in unused:
            paired[pod.name] = by_replica[r]
            unused.remove(by_replica[r])
    for pod in pods:
        if pod.name in paired:
            continue
        same = next((p for p in unused if p.node == pod.node), None)
        if same is not None:
            paired[pod.name] = same
            unused.remove(same)
    for pod in pods:
        if pod.name not in paired and unused:
            paired[pod.name] = unused.pop(0)
    return [
        replace(pod, planned_node=paired[pod.name].node, gpu_ids=paired[pod.name].gpu_ids)
        if pod.name in paired
        else pod
        for pod in pods
    ]


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


def collect_pods(api: Api, plan_dir: PlanDir, namespace: str, *, deadline: Deadline) -> list[PodRecord]:
    plan = plan_dir.plan
    pods = api.list("v1", "Pod", namespace, label_selector=pod_selector(plan.plan_id), deadline=deadline)
    live = [p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")]
    records = sorted((pod_record(p) for p in live), key=lambda r: r.name)
    replica_of: dict[str, int] = {}
    for p in live:
        value = ((p.get("metadata") or {}).get("labels") or {}).get(REPLICA_LABEL)
        if value is not None and str(value).isdigit():
            replica_of[p["metadata"]["name"]] = int(value)
    return match_placements(records, plan.placements, replica_of)


def deploy_plan(
    plan_dir: PlanDir,
    *,
    api: Api,
    namespace: str,
    run_id: str = "",
    timeout_s: float = DEFAULT_TIMEOUT_S,
    on_failure: str = "teardown",
    log: Callable[[str], None] | None = None,
) -> DeploymentRecord:
    """Apply ``plan_dir``'s manifests to ``namespace`` and wait until it runs; see the module docstring."""
    if on_failure not in ON_FAILURE:
        raise InvalidInput("on_failure", on_failure, f"must be one of {', '.join(ON_FAILURE)}")
    if timeout_s <= 0:
        raise InvalidInput("timeout_s", timeout_s, "must be positive")
    say = log or (lambda _m: None)
    deadline = Deadline(timeout_s)
    plan = plan_dir.plan
    objects = [labelled(m, plan.plan_id, run_id) for m in plan_dir.manifests]
    created_at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")

    try:
        for obj in objects:
            api.apply(obj, namespace, dry_run=True, deadline=deadline)
    except NotFound as e:
        if (e.details or {}).get("kind") == "namespaces":
            raise InvalidInput(
                "namespace",
                namespace,
                "does not exist",
                f"Create it first: kubectl create namespace {namespace}",
            ) from e
        raise
    say(f"dry run passed for {len(objects)} objects")

    previous = {
        ref(o): api.get_or_none(
            o["apiVersion"], o["kind"], o["metadata"]["name"], namespace, deadline=deadline
        )
        for o in objects
    }
    applied: list[dict[str, Any]] = []
    try:
        t0 = time.monotonic()
        for obj in objects:
            api.apply(obj, namespace, deadline=deadline)
            applied.append(obj)
            say(f"applied {ref(obj)}")
        for w in plan_dir.workloads():
            wait_for_rollout(
                api,
                w["metadata"]["name"],
                namespace,
                pod_selector=pod_selector(plan.plan_id),
                deadline=deadline,
                on_status=say,
            )
        say(f"rolled out in {time.monotonic() - t0:.1f} s")
        pods = collect_pods(api, plan_dir, namespace, deadline=Deadline(max(10.0, deadline.remaining())))
    except (KubeError, RolloutTimeout) as e:
        cleanup = _clean_up(api, applied, previous, namespace, on_failure, plan.plan_id)
        raise DeployFailed(
            f"deploying plan {plan.plan_id} to namespace {namespace} failed: {e}", cleanup=cleanup, cause=e
        ) from e

    record = DeploymentRecord(
        target="kubernetes",
        name=plan.deployment_name,
        namespace=namespace,
        endpoint=_endpoint(plan_dir, namespace),
        model=plan.model,
        ready=True,
        pods=tuple(pods),
        created_at=created_at,
        plan_id=plan.plan_id,
        served_model_name=plan_dir.serving.served_model_name,
    )
    notes = [f"placement mismatch: {m}" for m in record.mismatches()]
    if len(pods) != len(plan.placements) and plan.placements:
        notes.append(f"plan has {len(plan.placements)} placements, {len(pods)} pods are running")
    if any(p.gpu_ids for p in plan.placements):
        notes.append(
            "GPU sets are the plan's: the API does not show which devices the device plugin assigned"
        )
    return replace(record, notes=tuple(notes))


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


def teardown_objects(
    api: Api,
    objects: list[dict[str, Any]],
    namespace: str,
    *,
    plan_id: str,
    deadline: Deadline,
    wait: bool = True,
) -> TeardownResult:
    deleted: list[str] = []
    absent: list[str] = []
    for obj in reversed(objects):
        (deleted if api.delete(obj, namespace, deadline=deadline) else absent).append(ref(obj))
    left: list[str] = []
    if wait:
        while True:
            pods = api.list("v1", "Pod", namespace, label_selector=pod_selector(plan_id), deadline=deadline)
            left = [p["metadata"]["name"] for p in pods]
            if not left or deadline.remaining() <= 0.5:
                break
            time.sleep(0.25)
    return TeardownResult(deleted=tuple(deleted), absent=tuple(absent), pods_left=tuple(left))


def teardown_plan(
    plan_dir: PlanDir, *, api: Api, namespace: str, timeout_s: float = 120.0, wait: bool = True
) -> TeardownResult:
    """Delete every object of the plan in reverse apply order (404 is success), then wait for its pods."""
    plan_id = plan_dir.plan.plan_id
    objects = [labelled(m, plan_id) for m in plan_dir.manifests]
    return teardown_objects(api, objects, namespace, plan_id=plan_id, deadline=Deadline(timeout_s), wait=wait)


# The kinds a plan's manifests hold; teardown by run id looks for these.
_RUN_KINDS: tuple[tuple[str, str], ...] = (
    ("apps/v1", "Deployment"),
    ("v1", "Service"),
    ("policy/v1", "PodDisruptionBudget"),
)


def teardown_run(api: Api, *, namespace: str, run_id: str, timeout_s: float = 120.0) -> TeardownResult:
    """Delete every object a deploy labelled with ``run_id`` (a pipeline's exit handler knows the run
    id but cannot read the plan the guarded tasks produced), then wait for their pods."""
    deadline = Deadline(timeout_s)
    objects: list[dict[str, Any]] = []
    for api_version, kind in _RUN_KINDS:
        for obj in api.list(
            api_version, kind, namespace, label_selector=f"{RUN_LABEL}={run_id}", deadline=deadline
        ):
            objects.append({**obj, "apiVersion": api_version, "kind": kind})
    plan_ids = {(o["metadata"].get("labels") or {}).get(PLAN_LABEL, "") for o in objects}
    plan_id = next(iter(plan_ids - {""}), "")
    if not objects:
        return TeardownResult(deleted=(), absent=(), pods_left=())
    return teardown_objects(api, objects, namespace, plan_id=plan_id, deadline=deadline, wait=bool(plan_id))
