"""Waiting for a Deployment to roll out, under a deadline, and explaining why it did not.

Complete means what ``kubectl rollout status`` means: the controller has observed the latest generation,
and updated, total and available replicas all equal the desired count. The wait polls (so a restarted
kube-apiserver only costs the polls that fail: connection errors and 5xx are retried until the deadline)
and, when the deadline passes, raises :class:`RolloutTimeout` with the last status and the pods' warning
events — typically kube-scheduler's ``0/12 nodes are available: 12 Insufficient nvidia.com/gpu``.
"""

from __future__ import annotations

import datetime as dt
import math
import time
from collections.abc import Callable, Mapping
from typing import Any

from gpuplace.errors import GpuplaceError
from gpuplace.k8s.api import Api
from gpuplace.k8s.errors import KubeError
from gpuplace.k8s.retry import Deadline

POLL_S = 0.25


class RolloutTimeout(GpuplaceError):
    """The rollout did not complete within its deadline; ``status`` and ``reasons`` say where it stood."""

    def __init__(self, message: str, *, status: str, reasons: tuple[str, ...]) -> None:
        super().__init__(message)
        self.status = status
        self.reasons = reasons


def deployment_progress(dep: Mapping[str, Any]) -> tuple[bool, str]:
    """(complete?, one-line status) of a Deployment object."""
    meta = dep.get("metadata") or {}
    spec = dep.get("spec") or {}
    st = dep.get("status") or {}
    want = int(spec.get("replicas", 1))
    generation = int(meta.get("generation", 0))
    observed = int(st.get("observedGeneration", 0))
    updated = int(st.get("updatedReplicas", 0))
    total = int(st.get("replicas", 0))
    available = int(st.get("availableReplicas", 0))
    line = (
        f"Deployment {meta.get('name')}: {available}/{want} available, {updated} updated, {total} total, "
        f"generation {observed}/{generation} observed"
    )
    for c in st.get("conditions") or ():
        if c.get("status") != "True" or c.get("type") == "Progressing":
            line += f"; {c.get('type')}={c.get('status')} ({c.get('reason')}: {c.get('message')})"
    complete = observed >= generation and updated == want and total == want and available == want
    return complete, line


def progress_deadline_exceeded(dep: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "Progressing" and c.get("reason") == "ProgressDeadlineExceeded"
        for c in (dep.get("status") or {}).get("conditions") or ()
    )


def scheduling_reasons(api: Api, namespace: str, selector: str, *, deadline: Deadline) -> tuple[str, ...]:
    """Why pods matching ``selector`` are not running: unscheduled pods' conditions and warning events."""
    reasons: list[str] = []
    pods = api.list("v1", "Pod", namespace, label_selector=selector, deadline=deadline)
    names = {p["metadata"]["name"] for p in pods}
    for p in pods:
        for c in (p.get("status") or {}).get("conditions") or ():
            if c.get("type") == "PodScheduled" and c.get("status") != "True":
                reasons.append(f"pod {p['metadata']['name']}: {c.get('reason')}: {c.get('message')}")
    events = api.list("v1", "Event", namespace, field_selector="type=Warning", deadline=deadline)
    seen: set[str] = set()
    for e in sorted(events, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or ""):
        obj = e.get("involvedObject") or {}
        if obj.get("kind") == "Pod" and obj.get("name") not in names:
            continue
        text = f"event {obj.get('kind')}/{obj.get('name')}: {e.get('reason')}: {e.get('message')}"
        if text not in seen:
            seen.add(text)
            reasons.append(text)
    return tuple(reasons)


def wait_for_rollout(
    api: Api,
    name: str,
    namespace: str,
    *,
    pod_selector: str,
    deadline: Deadline,
    on_status: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Block until Deployment ``name`` is complete; returns it. Raises :class:`RolloutTimeout`."""
    last = "no status read yet"
    last_printed = ""
    while True:
        try:
            dep = api.get("apps/v1", "Deployment", name, namespace, deadline=deadline)
            complete, last = deployment_progress(dep)
            if complete:
                return dep
            if progress_deadline_exceeded(dep):
                break
        except KubeError as e:
            if not e.retryable:
                raise
            last = f"{last} (then: {e})"
        if on_status and last != last_printed:
            on_status(last)
            last_printed = last
        if deadline.remaining() <= POLL_S:
            break
        time.sleep(POLL_S)
    reasons: tuple[str, ...] = ()
    try:
        reasons = scheduling_reasons(api, namespace, pod_selector, deadline=Deadline(10.0))
    except KubeError as e:
        reasons = (f"(could not read pod events: {e})",)
    detail = "".join(f"\n  {r}" for r in reasons) or "\n  (no pod events)"
    raise RolloutTimeout(
        f"Deployment {name} in {namespace} not rolled out within {deadline.seconds:g} s; "
        f"last status: {last}{detail}",
        status=last,
        reasons=reasons,
    )


def _epoch(stamp: str | None) -> float:
    if not stamp:
        return math.nan
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def unschedulable(pod: Mapping[str, Any]) -> bool:
    """Whether kube-scheduler has decided the pod fits nowhere (PodScheduled=False, Unschedulable)."""
    return any(
        c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable"
        for c in (pod.get("status") or {}).get("conditions") or ()
    )


def wait_until_scheduled_or_unschedulable(
    api: Api, namespace: str, *, deadline: Deadline, interval_s: float = 0.25
) -> list[dict[str, Any]]:
    """Poll until every pod in ``namespace`` is bound or marked unschedulable (or the deadline
    passes); returns the pods still unbound. Used by the scheduler benchmarks."""
    while True:
        pending = api.list("v1", "Pod", namespace, field_selector="spec.nodeName=", deadline=deadline)
        if all(unschedulable(p) for p in pending) or deadline.expired:
            return pending
        time.sleep(interval_s)
