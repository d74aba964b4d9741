"""Keeping :class:`~gpuplace.extender.state.ClusterState` current: list-then-watch of Nodes and bound pods.

Two daemon threads, one per kind, over :func:`gpuplace.k8s.watch.watch` (the only code that calls the
API is in :mod:`gpuplace.k8s`): each list replaces what the state holds, then watch events update it; a
dropped connection resumes from the last resourceVersion and a 410 lists again inside that function.
Pods are watched with the field selector ``spec.nodeName!=`` (bound pods only); a pod that stops
matching, or ends, arrives as DELETED or with a terminal phase and frees its GPUs. A typed API error
(a Forbidden after RBAC changed, a server error) is logged and the loop lists again after a pause.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from gpuplace.extender.state import ClusterState, pod_key
from gpuplace.k8s.api import ALL_NAMESPACES, Api
from gpuplace.k8s.errors import KubeError
from gpuplace.k8s.retry import Deadline
from gpuplace.k8s.watch import watch

log = logging.getLogger("gpuplace.extender")

RETRY_PAUSE_S = 1.0
POD_SELECTOR = "spec.nodeName!="
FOREVER_S = 10.0 * 365 * 24 * 3600  # the watch runs until stopped


def _loop(state: ClusterState, api: Api, kind: str, stop: threading.Event, listed: threading.Event) -> None:
    batch: list[dict[str, Any]] = []

    def replace() -> None:
        (state.replace_nodes if kind == "Node" else state.replace_pods)(list(batch))
        batch.clear()
        listed.set()

    selector = POD_SELECTOR if kind == "Pod" else ""
    while not stop.is_set():
        try:
            namespace = ALL_NAMESPACES if kind == "Pod" else ""
            for event in watch(
                api,
                "v1",
                kind,
                namespace,
                deadline=Deadline(FOREVER_S),
                field_selector=selector,
                stop=stop,
                on_listed=replace,
            ):
                if event.listed:
                    batch.append(event.object)
                elif kind == "Node":
                    name = str(event.object["metadata"]["name"])
                    state.remove_node(name) if event.type == "DELETED" else state.set_node(event.object)
                elif event.type == "DELETED":
                    state.remove_pod(pod_key(event.object))
                else:
                    state.set_pod(event.object)
        except KubeError as e:
            log.warning("watch of %s failed (%s); listing again", kind, e)
            batch.clear()
            stop.wait(RETRY_PAUSE_S)


def start_watches(state: ClusterState, api: Api, stop: threading.Event) -> list[threading.Thread]:
    """Start the Node and Pod watch threads; ``state.synced`` is set once both have listed."""
    events = {"Node": threading.Event(), "Pod": threading.Event()}
    threads = [
        threading.Thread(
            target=_loop, args=(state, api, kind, stop, events[kind]), name=f"watch-{kind}", daemon=True
        )
        for kind in events
    ]
    for t in threads:
        t.start()

    def synced() -> None:
        for e in events.values():
            while not e.wait(0.5):
                if stop.is_set():
                    return
        state.synced.set()

    threading.Thread(target=synced, name="watch-synced", daemon=True).start()
    return threads
