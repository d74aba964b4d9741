"""Watching a collection through the API, under a deadline, across API-server restarts.

:func:`watch` lists once (so what exists already is seen, and a ``resourceVersion`` to start from is
known), then streams watch events, each stamped with the local clock when its line arrived: the only way
to time what happens to a pod below the API's one-second timestamps. A dropped connection (kube-apiserver
restarting) is retried with backoff from the last ``resourceVersion`` seen, so no event is lost; a
``410 Gone`` (that version compacted away) lists again. Other errors are raised as typed
:class:`~gpuplace.k8s.errors.KubeError`\\ s. The stream is re-opened every few seconds of silence, which is
how a caller's stop request and the deadline are noticed.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from gpuplace.k8s.api import Api
from gpuplace.k8s.errors import KubeError, translate
from gpuplace.k8s.retry import BACKOFF_MAX_S, BACKOFF_START_S, Deadline

# How long one watch request may stay silent before it is re-opened.
IDLE_S = 2.0


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str  # ADDED | MODIFIED | DELETED
    object: dict[str, Any]
    received_s: float  # local clock when the event arrived
    listed: bool = False  # from the initial (or a re-) list, not a watch event


class WatchExpired(KubeError):
    """410 Gone: the resourceVersion to resume from is no longer in etcd's history."""


def _lines(resp: Any) -> Iterator[str]:
    buffer = bytearray()
    for chunk in resp.stream(amt=None, decode_content=False):
        buffer.extend(chunk if isinstance(chunk, bytes) else str(chunk).encode())
        while (i := buffer.find(b"\n")) != -1:
            line = buffer[:i].decode("utf-8", errors="replace")
            del buffer[: i + 1]
            if line:
                yield line


def watch(
    api: Api,
    api_version: str,
    kind: str,
    namespace: str = "",
    *,
    deadline: Deadline,
    label_selector: str = "",
    field_selector: str = "",
    stop: threading.Event | None = None,
    clock: Callable[[], float] = time.time,
    on_listed: Callable[[], None] | None = None,
) -> Iterator[WatchEvent]:
    """Events of ``kind`` objects (listed ones first) until ``stop`` is set or ``deadline`` passes.

    ``on_listed`` is called after each list has been handed out: from then on, changes arrive as they
    happen.
    """
    info = api.resource(api_version, kind, deadline=deadline)
    path = info.collection_path(namespace if info.namespaced else "")
    stopped = stop or threading.Event()
    version = ""
    failures = 0
    while not stopped.is_set() and not deadline.expired:
        try:
            if not version:
                doc = api.request(
                    "GET",
                    path,
                    action=f"list {info.plural}",
                    query={"labelSelector": label_selector, "fieldSelector": field_selector},
                    deadline=deadline,
                )
                now = clock()
                version = str((doc.get("metadata") or {}).get("resourceVersion") or "")
                for item in doc.get("items") or ():
                    yield WatchEvent("ADDED", item, now, listed=True)
                if on_listed is not None:
                    on_listed()
            for event in _stream(
                api, path, info.plural, version, label_selector, field_selector, deadline, clock
            ):
                failures = 0
                obj_version = (event.object.get("metadata") or {}).get("resourceVersion")
                if obj_version:
                    version = str(obj_version)
                yield event
                if stopped.is_set():
                    return
        except WatchExpired:
            version = ""  # list again: events in between are summarised by the list
        except KubeError as e:
            if not e.retryable:
                raise
            delay = min(BACKOFF_MAX_S, BACKOFF_START_S * 2**failures)
            failures += 1
            if delay >= deadline.remaining():
                raise
            stopped.wait(delay)


def _stream(
    api: Api,
    path: str,
    plural: str,
    version: str,
    label_selector: str,
    field_selector: str,
    deadline: Deadline,
    clock: Callable[[], float],
) -> Iterator[WatchEvent]:
    """One watch request, until the server or the idle timeout ends it."""
    action = f"watch {plural}"
    idle = max(0.5, min(IDLE_S, deadline.remaining()))
    query = [
        ("watch", "true"),
        ("resourceVersion", version),
        ("allowWatchBookmarks", "true"),
        ("timeoutSeconds", str(max(1, int(idle) + 1))),
    ]
    query += [(k, v) for k, v in (("labelSelector", label_selector), ("fieldSelector", field_selector)) if v]
    try:
        resp = api.client.call_api(
            path,
            "GET",
            query_params=query,
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=True,
            _request_timeout=(min(idle, 10.0), idle),
        )
    except Exception as e:
        raise translate(e, action) from e
    try:
        for line in _lines(resp):
            received = clock()
            try:
                event = json.loads(line)
            except ValueError:
                continue
            kind = str(event.get("type", ""))
            obj = event.get("object") or {}
            if kind == "ERROR":
                code = int(obj.get("code") or 0)
                if code == 410:
                    raise WatchExpired(
                        f"{action}: {obj.get('message', 'Gone')}", status=410, reason="Expired"
                    )
                raise KubeError(
                    f"{action}: {obj.get('message', obj)}", status=code, reason=str(obj.get("reason", ""))
                )
            # A BOOKMARK only moves the resourceVersion on; it is handed up too, for that.
            yield WatchEvent(kind, obj, received)
    except KubeError:
        raise
    except Exception as e:
        from urllib3.exceptions import ReadTimeoutError

        if isinstance(e, ReadTimeoutError):
            return  # silence for IDLE_S: the caller re-opens from the same version
        raise translate(e, action) from e
    finally:
        resp.release_conn()
