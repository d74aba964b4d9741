"""What runs a pod's server, and how a deploy knows it serves: ready-to-serve for pods.

Provisioning ends at *ready to serve*: the first successful request (:mod:`gpuplace.serving.probe`),
the same on both orchestration paths and on the local target. A :class:`PodRuntime` says how that request
reaches a pod and what device answers it:

- :class:`KubeletRuntime` — a real cluster: the container runs on its node; the request goes through
  the API server's pod proxy (``/api/v1/namespaces/<ns>/pods/<pod>:<port>/proxy/v1/completions``), so
  it works from outside the cluster too (RBAC: ``pods/proxy`` create, docs/deploy.md#rbac).
- :class:`NoServeCheck` — ready-to-serve is not observed (``--runtime none``); provisioning is then
  unknown and every record says so.
- the KWOK stand-in (:mod:`gpuplace.deploy.standin`): KWOK runs no containers, so for each pod it
  marks Ready a local engine is started on this machine and the request goes there.

Checks run in one background thread per pod, so a slow first request to one pod does not delay the
others'; :meth:`PodRuntime.serve_check` returns the local-clock time the first request succeeded.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from gpuplace.k8s.api import Api
from gpuplace.k8s.errors import KubeError
from gpuplace.k8s.retry import Deadline
from gpuplace.serving.probe import answered, completion_body

KUBELET = "kubelet"
NO_CHECK = "none (ready-to-serve not observed)"
RETRY_S = 0.25


def container_port(pod: Mapping[str, Any], default: int = 8000) -> int:
    """The first container's first port (the server's), else ``default``."""
    for c in (pod.get("spec") or {}).get("containers") or ():
        for p in c.get("ports") or ():
            if p.get("containerPort"):
                return int(p["containerPort"])
    return default


class PodRuntime(Protocol):
    """How a deploy reaches the server of a pod, and what answers."""

    name: str  # written into the deployment record's ``runtime``
    observes_serving: bool  # False: ready-to-serve is not observed and provisioning is unknown
    serves_locally: bool  # True: the pods' servers are on this machine, not behind the plan's Service

    def serve_check(self, pod: Mapping[str, Any]) -> bool | float:
        """Non-blocking: the epoch time of the first successful request to ``pod``'s server, else False."""
        ...

    def endpoint_of(self, pod: Mapping[str, Any]) -> str:
        """Where ``pod`` serves, as a URL this machine can use ("" when none)."""
        ...

    def served_on(self) -> str:
        """The device that answers, when it is not the pod's node's GPU ("" = the node's)."""
        ...

    def model_of(self, pod: Mapping[str, Any]) -> str:
        """The ``model`` field requests to ``pod`` must carry, when not the serving spec's ("")."""
        ...

    def runtime_of(self, pod: Mapping[str, Any]) -> str:
        """What runs ``pod``'s server (its record's ``runtime``)."""
        ...

    def discard(self) -> None:
        """Stop whatever this runtime started (a failed deploy)."""
        ...

    def close(self) -> None:
        """Stop checking (what it started keeps running)."""
        ...


class BackgroundChecks:
    """One thread per pod calling ``attempt(pod)`` until it returns True; remembers when it did.

    An exception from ``attempt`` ends that pod's checks and is raised by the next :meth:`check`.
    """

    def __init__(
        self, attempt: Callable[[Mapping[str, Any]], bool], *, clock: Callable[[], float] = time.time
    ):
        self._attempt = attempt
        self._clock = clock
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: dict[str, threading.Thread] = {}
        self._done: dict[str, float] = {}
        self._errors: dict[str, BaseException] = {}

    def check(self, pod: Mapping[str, Any]) -> bool | float:
        uid = str((pod.get("metadata") or {}).get("uid", ""))
        with self._lock:
            if uid in self._errors:
                raise self._errors[uid]
            if uid in self._done:
                return self._done[uid]
            if uid not in self._threads:
                thread = threading.Thread(
                    target=self._run, args=(uid, pod), name=f"serve-{uid[:8]}", daemon=True
                )
                self._threads[uid] = thread
                thread.start()
        return False

    def _run(self, uid: str, pod: Mapping[str, Any]) -> None:
        try:
            while not self._stop.is_set():
                if self._attempt(pod):
                    with self._lock:
                        self._done[uid] = self._clock()
                    return
                self._stop.wait(RETRY_S)
        except BaseException as e:  # surfaced by check()
            with self._lock:
                self._errors[uid] = e

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def close(self) -> None:
        self._stop.set()
        for t in list(self._threads.values()):
            t.join(timeout=5.0)


class RuntimeDefaults:
    """What a runtime does when it has nothing of its own to say: no endpoint of its own, the node's device,
    the spec's model name, nothing to stop."""

    def endpoint_of(self, pod: Mapping[str, Any]) -> str:
        return ""

    def served_on(self) -> str:
        return ""

    def model_of(self, pod: Mapping[str, Any]) -> str:
        return ""

    def runtime_of(self, pod: Mapping[str, Any]) -> str:
        return str(getattr(self, "name", ""))

    def discard(self) -> None:
        return None

    def close(self) -> None:
        return None


class KubeletRuntime(RuntimeDefaults):
    """A real cluster: the first request goes through the API server's pod proxy."""

    name = KUBELET
    observes_serving = True
    serves_locally = False

    def __init__(self, api: Api, model: str, *, attempt_s: float = 5.0) -> None:
        self.api = api
        self.model = model
        self.attempt_s = attempt_s
        self._checks = BackgroundChecks(self._attempt)

    def _attempt(self, pod: Mapping[str, Any]) -> bool:
        meta = pod.get("metadata") or {}
        path = (
            f"/api/v1/namespaces/{meta.get('namespace')}/pods/{meta.get('name')}:{container_port(pod)}"
            "/proxy/v1/completions"
        )
        try:
            response = self.api.request(
                "POST",
                path,
                action=f"first request to pod {meta.get('name')}",
                body=completion_body(self.model),
                deadline=Deadline(self.attempt_s),
            )
        except KubeError:
            return False
        return answered(response)

    def serve_check(self, pod: Mapping[str, Any]) -> bool | float:
        return self._checks.check(pod)

    def endpoint_of(self, pod: Mapping[str, Any]) -> str:
        ip = (pod.get("status") or {}).get("podIP") or ""
        return f"http://{ip}:{container_port(pod)}" if ip else ""

    def close(self) -> None:
        self._checks.close()


class NoServeCheck(RuntimeDefaults):
    """Ready-to-serve is not observed: deploy waits for Ready only, and says so."""

    name = NO_CHECK
    observes_serving = False
    serves_locally = False

    def serve_check(self, pod: Mapping[str, Any]) -> bool | float:
        return False
