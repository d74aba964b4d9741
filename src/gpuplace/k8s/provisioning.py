"""Provisioning latency of pods, measured the same way whoever creates them: from the pod's creation to
ready-to-serve, on the local clock, from watch events.

API timestamps (``creationTimestamp``, condition ``lastTransitionTime``) have one-second resolution, too
coarse for pods KWOK starts in milliseconds and for comparing two orchestration paths. A
:class:`PodTimer` is started *before* the objects are created; its watch thread stamps each pod's first
appearance (created), its binding (``spec.nodeName`` set: scheduled), ``phase: Running`` and
``Ready=True`` with the time the event arrived here. Ready-to-serve is what ``serve_check`` says: called
with the pod after it is Ready, until it returns True (phase 2 passes "the first request succeeded");
without it, ready-to-serve is Ready. A pod that already existed when the watch started carries its API
creation time and ``seen_created=False``.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from gpuplace.errors import GpuplaceError
from gpuplace.k8s.api import Api
from gpuplace.k8s.errors import KubeError
from gpuplace.k8s.retry import Deadline
from gpuplace.k8s.rollout import _epoch as api_time_s
from gpuplace.k8s.watch import watch

# Called with a Ready pod until it says the pod serves: True (stamped with the time of the call) or the
# epoch time of the first successful request when the check ran it in the background.
ServeCheck = Callable[[Mapping[str, Any]], bool | float]


@dataclass(frozen=True, slots=True)
class PodTimes:
    """When one pod got where, in seconds since the epoch on this machine's clock (NaN: not yet)."""

    pod: str
    uid: str
    node: str = ""
    created_s: float = math.nan
    scheduled_s: float = math.nan
    running_s: float = math.nan
    ready_s: float = math.nan
    serving_s: float = math.nan  # first successful serve_check; NaN without one
    seen_created: bool = True  # False: the pod existed before the watch; created_s is the API's (1 s)

    @property
    def ready_to_serve_s(self) -> float:
        return self.serving_s if not math.isnan(self.serving_s) else self.ready_s

    @property
    def provisioning_s(self) -> float:
        """Created → ready-to-serve."""
        return self.ready_to_serve_s - self.created_s

    @property
    def scheduling_s(self) -> float:
        return self.scheduled_s - self.created_s


class ProvisioningTimeout(GpuplaceError):
    """Not enough pods became ready to serve in time; ``times`` is what was measured, ``reasons`` why the
    unscheduled ones are Pending (kube-scheduler's words)."""

    def __init__(self, message: str, *, times: tuple[PodTimes, ...], reasons: tuple[str, ...]) -> None:
        super().__init__(message)
        self.times = times
        self.reasons = reasons


def _ready(pod: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or ()
    )


class PodTimer:
    """Watches pods in ``namespace`` matching ``label_selector`` and times each; use as a context manager
    around the creation of the objects whose pods are timed."""

    def __init__(
        self,
        api: Api,
        namespace: str,
        *,
        label_selector: str = "",
        max_lifetime_s: float = 3600.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.api = api
        self.namespace = namespace
        self.label_selector = label_selector
        self.clock = clock
        self._deadline = Deadline(max_lifetime_s)
        self._stop = threading.Event()
        self._synced = threading.Event()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._times: dict[str, PodTimes] = {}  # by uid
        self._pods: dict[str, dict[str, Any]] = {}  # latest object by uid
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"pod-timer-{namespace}", daemon=True)

    # --- lifecycle ------------------------------------------------------------------------------------
    def __enter__(self) -> PodTimer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self, *, sync_timeout_s: float = 30.0) -> None:
        """Start watching and return once the initial list is in (so later creations are seen live)."""
        self._thread.start()
        if not self._synced.wait(sync_timeout_s):
            self.close()
            raise ProvisioningTimeout(
                f"could not start watching pods in {self.namespace} within {sync_timeout_s:g} s"
                + (f": {self._error}" if self._error else ""),
                times=(),
                reasons=(),
            )
        if self._error is not None:
            raise self._error

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5.0)

    def _run(self) -> None:
        try:
            for ev in watch(
                self.api,
                "v1",
                "Pod",
                self.namespace,
                label_selector=self.label_selector,
                deadline=self._deadline,
                stop=self._stop,
                clock=self.clock,
                on_listed=self._synced.set,
            ):
                if ev.type == "BOOKMARK":
                    continue
                self._record(ev.type, ev.object, ev.received_s, ev.listed)
            self._synced.set()
        except BaseException as e:  # surfaced to the caller by wait()
            self._error = e
            self._synced.set()
            with self._changed:
                self._changed.notify_all()

    def _record(self, kind: str, pod: dict[str, Any], at: float, listed: bool) -> None:
        meta = pod.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        with self._changed:
            if kind == "DELETED" or meta.get("deletionTimestamp"):
                self._times.pop(uid, None)
                self._pods.pop(uid, None)
                self._changed.notify_all()
                return
            t = self._times.get(uid) or PodTimes(
                pod=str(meta.get("name", "")),
                uid=uid,
                created_s=api_time_s(meta.get("creationTimestamp")) if listed else at,
                seen_created=not listed,
            )
            node = str((pod.get("spec") or {}).get("nodeName") or "")
            if node and math.isnan(t.scheduled_s):
                t = replace(t, node=node, scheduled_s=at)
            if (pod.get("status") or {}).get("phase") == "Running" and math.isnan(t.running_s):
                t = replace(t, running_s=at)
            if _ready(pod) and math.isnan(t.ready_s):
                t = replace(t, ready_s=at)
            self._times[uid] = t
            self._pods[uid] = pod
            self._changed.notify_all()

    # --- results --------------------------------------------------------------------------------------
    def times(self) -> tuple[PodTimes, ...]:
        with self._lock:
            return tuple(sorted(self._times.values(), key=lambda t: (t.created_s, t.pod)))

    def pods(self) -> dict[str, dict[str, Any]]:
        """The latest object of every live pod seen, by name."""
        with self._lock:
            return {str((p.get("metadata") or {}).get("name", "")): p for p in self._pods.values()}

    def wait(
        self,
        count: int,
        *,
        deadline: Deadline,
        serve_check: ServeCheck | None = None,
        poll_s: float = 0.1,
        fail_fast: bool = True,
    ) -> tuple[PodTimes, ...]:
        """Block until ``count`` pods are ready to serve; their times, ordered by creation.

        Raises :class:`ProvisioningTimeout` (with the scheduler's reasons for Pending pods) at the
        deadline, and the watch's :class:`~gpuplace.k8s.errors.KubeError` if it failed for good. With
        ``fail_fast``, a pod that will never serve (unschedulable, its image missing, crash-looping:
        :mod:`gpuplace.k8s.podfaults`) raises :class:`~gpuplace.k8s.podfaults.PodFailed` at once.
        """
        from gpuplace.k8s.podfaults import pod_failure, unschedulable_message

        unschedulable_since: dict[str, float] = {}
        node_cache: dict[str, tuple[float, list[dict[str, Any]]]] = {}

        def nodes() -> list[dict[str, Any]]:
            at, cached = node_cache.get("nodes", (-math.inf, []))
            if time.monotonic() - at > 5.0:
                cached = self.api.list("v1", "Node", deadline=Deadline(10.0))
                node_cache["nodes"] = (time.monotonic(), cached)
            return cached

        while True:
            with self._changed:
                if self._error is not None:
                    raise self._error
                pods = dict(self._pods)
                times = dict(self._times)
            if serve_check is not None:
                for uid, t in times.items():
                    if not math.isnan(t.ready_s) and math.isnan(t.serving_s):
                        served = serve_check(pods[uid])
                        if not served:
                            continue
                        at = served if isinstance(served, float) else self.clock()
                        with self._changed:
                            current = self._times.get(uid)
                            if current is not None:
                                self._times[uid] = replace(current, serving_s=at)
                        times[uid] = replace(t, serving_s=at)
            done = [
                t
                for t in times.values()
                if not math.isnan(t.ready_s) and (serve_check is None or not math.isnan(t.serving_s))
            ]
            if len(done) >= count:
                return tuple(sorted(done, key=lambda t: (t.created_s, t.pod)))[:count]
            if fail_fast:
                now = time.monotonic()
                for uid, pod in pods.items():
                    if not unschedulable_message(pod):
                        unschedulable_since.pop(uid, None)
                    elif uid not in unschedulable_since:
                        unschedulable_since[uid] = now
                    if uid in times and not math.isnan(times[uid].ready_s):
                        continue
                    failure = pod_failure(
                        self.api,
                        pod,
                        unschedulable_for_s=now - unschedulable_since.get(uid, now),
                        nodes=nodes,
                    )
                    if failure is not None:
                        raise failure
            if deadline.expired:
                raise self._timeout(count, deadline, tuple(times.values()), pods)
            with self._changed:
                self._changed.wait(min(poll_s, max(0.0, deadline.remaining())))

    def _timeout(
        self,
        count: int,
        deadline: Deadline,
        times: tuple[PodTimes, ...],
        pods: Mapping[str, Mapping[str, Any]],
    ) -> ProvisioningTimeout:
        from gpuplace.k8s.dra import pending_reason

        reasons: list[str] = []
        for t in sorted(times, key=lambda t: t.pod):
            if t.node:
                continue
            try:
                why = pending_reason(self.api, self.namespace, t.pod, deadline=Deadline(5.0))
            except KubeError as e:
                why = f"(could not read why: {e})"
            reasons.append(f"pod {t.pod}: {why or 'not scheduled yet'}")
        ready = sum(1 for t in times if not math.isnan(t.ready_s))
        detail = "".join(f"\n  {r}" for r in reasons)
        return ProvisioningTimeout(
            f"{ready} of {count} pods in {self.namespace} ready within {deadline.seconds:g} s "
            f"({len(times)} seen){detail}",
            times=tuple(sorted(times, key=lambda t: (t.created_s, t.pod))),
            reasons=tuple(reasons),
        )
