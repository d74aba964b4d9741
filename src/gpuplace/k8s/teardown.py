"""Taking a deployment down: delete what a plan (or a pipeline run, by its run id) created, in reverse
apply order — a 404 is success — and wait for its pods to go."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuplace.k8s.api import Api, ref
from gpuplace.k8s.errors import Forbidden, NotFound
from gpuplace.k8s.labelling import labelled, pod_selector
from gpuplace.k8s.retry import Deadline
from gpuplace.labels import PLAN_LABEL, RUN_LABEL
from gpuplace.plandir import PlanDir


@dataclass(frozen=True, slots=True)
class TeardownResult:
    deleted: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()  # already gone (404): success too
    pods_left: tuple[str, ...] = field(default=())


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
    """Delete every object of the plan in reverse apply order (404 is success) — the plan's manifests and
    whatever else a deploy labelled with its plan id (``--gpu-api dra``'s claims and per-replica
    Deployments) — then wait for its pods."""
    plan_id = plan_dir.plan.plan_id
    deadline = Deadline(timeout_s)
    objects = [labelled(m, plan_id) for m in plan_dir.manifests]
    known = {ref(o) for o in objects}
    extra = [
        o
        for o in _labelled_objects(api, namespace, f"{PLAN_LABEL}={plan_id}", deadline)
        if ref(o) not in known
    ]
    return teardown_objects(api, extra + objects, namespace, plan_id=plan_id, deadline=deadline, wait=wait)


# The kinds a deploy creates, in apply order; teardown by label looks for these.
_RUN_KINDS: tuple[tuple[str, str], ...] = (
    ("resource.k8s.io/v1", "ResourceClaim"),
    ("apps/v1", "Deployment"),
    ("v1", "Service"),
    ("policy/v1", "PodDisruptionBudget"),
)
# The Kubeflow path's task pods on a testenv (gpuplace.k8s.kfp_task) carry this label; a run's teardown
# deletes them too (the pods of Deployments go with their Deployment).
KFP_TASK_LABEL = "gpuplace.io/kfp-task-pod"


def _labelled_objects(
    api: Api,
    namespace: str,
    selector: str,
    deadline: Deadline,
    kinds: Sequence[tuple[str, str]] = _RUN_KINDS,
) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    for api_version, kind in kinds:
        try:
            found = api.list(api_version, kind, namespace, label_selector=selector, deadline=deadline)
        except NotFound:  # the kind is not served here (no DRA on this cluster)
            continue
        except Forbidden as e:  # a refused lookup is not "none found": what it hides would be left running
            raise Forbidden(
                f"teardown may not list {kind} in namespace {namespace} to find what was labelled "
                f"{selector}, so it cannot say that none is left ({e}). Grant the deployer's Role "
                f"(`gpuplace rbac --namespace {namespace} | kubectl apply -f -`, docs/deploy.md)",
                status=e.status,
                reason=e.reason,
            ) from e
        objects += [{**obj, "apiVersion": api_version, "kind": kind} for obj in found]
    return objects


def teardown_run(api: Api, *, namespace: str, run_id: str, timeout_s: float = 120.0) -> TeardownResult:
    """Delete every object a deploy labelled with ``run_id`` (a pipeline's exit handler knows the run
    id but cannot read the plan the guarded tasks produced), then wait for their pods."""
    deadline = Deadline(timeout_s)
    objects = _labelled_objects(api, namespace, f"{RUN_LABEL}={run_id}", deadline)
    objects += _labelled_objects(
        api, namespace, f"{RUN_LABEL}={run_id},{KFP_TASK_LABEL}", deadline, [("v1", "Pod")]
    )
    plan_ids = {(o["metadata"].get("labels") or {}).get(PLAN_LABEL, "") for o in objects}
    plan_id = next(iter(plan_ids - {""}), "")
    if not objects:
        return TeardownResult(deleted=(), absent=(), pods_left=())
    return teardown_objects(api, objects, namespace, plan_id=plan_id, deadline=deadline, wait=bool(plan_id))
