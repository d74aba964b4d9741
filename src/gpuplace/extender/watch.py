"""Keeping :class:`~gpuplace.extender.state.ClusterState` current: list-then-watch of Nodes and bound pods.

Two daemon threads, one per kind, each listing (which replaces what the state holds) and then watching
from the list's resourceVersion with the kubernetes client; on any error — an expired resourceVersion
(410), a dropped connection — they list again after a short pause. Pods are watched with the field
selector ``spec.nodeName!=`` (bound pods only); a pod that stops matching, or ends, arrives as DELETED
or with a terminal phase and frees its GPUs.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from gpuplace.extender.state import ClusterState, pod_key

log = logging.getLogger("gpuplace.extender")

WATCH_TIMEOUT_S = 300
RETRY_PAUSE_S = 1.0
POD_SELECTOR = "spec.nodeName!="


def _loop(
    state: ClusterState,
    kind: str,
    list_fn: Callable[..., Any],
    stop: threading.Event,
    listed: threading.Event,
) -> None:
    from kubernetes import watch

    selector = POD_SELECTOR if kind == "Pod" else ""
    while not stop.is_set():
        try:
            resp = list_fn(field_selector=selector, _preload_content=False, _request_timeout=60)
            doc = json.loads(resp.data)
            items = doc.get("items") or []
            if kind == "Node":
                state.replace_nodes(items)
            else:
                state.replace_pods(items)
            listed.set()
            version = (doc.get("metadata") or {}).get("resourceVersion", "")
            w = watch.Watch()
            for event in w.stream(
                list_fn, field_selector=selector, resource_version=version, timeout_seconds=WATCH_TIMEOUT_S
            ):
                if stop.is_set():
                    w.stop()
                    break
                kind_of, obj = event["type"], event["raw_object"]
                if kind_of == "ERROR":
                    break  # e.g. 410 Gone: list again
                if kind == "Node":
                    if kind_of == "DELETED":
                        state.remove_node(str(obj["metadata"]["name"]))
                    else:
                        state.set_node(obj)
                elif kind_of == "DELETED":
                    state.remove_pod(pod_key(obj))
                else:
                    state.set_pod(obj)
        except Exception as e:  # a watch must outlive API hiccups; it lists again
            log.warning("watch of %s failed (%s); listing again", kind, e)
            stop.wait(RETRY_PAUSE_S)


def start_watches(state: ClusterState, api_client: Any, stop: threading.Event) -> list[threading.Thread]:
    """Start the Node and Pod watch threads; ``state.synced`` is set once both have listed."""
    from kubernetes import client

    core = client.CoreV1Api(api_client)
    events = {"Node": threading.Event(), "Pod": threading.Event()}
    fns = {"Node": core.list_node, "Pod": core.list_pod_for_all_namespaces}
    threads = [
        threading.Thread(
            target=_loop, args=(state, kind, fns[kind], stop, events[kind]), name=f"watch-{kind}", daemon=True
        )
        for kind in fns
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
