"""Registering Node objects (with their status) through the API: how a simulated fleet enters a cluster.

kube-apiserver keeps ``status`` on create but ignores it on apply and update of the main resource, so
a node that already exists gets its labels and taints re-applied and its status patched separately.
Only the local control plane uses this; on a real cluster the kubelet owns its Node.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gpuplace.k8s.api import Api
from gpuplace.k8s.errors import Conflict
from gpuplace.k8s.retry import Deadline


def register_node(api: Api, obj: Mapping[str, Any], *, deadline: Deadline) -> str:
    """Create ``obj`` (a v1 Node), or bring an existing one in line; returns "created" or "updated"."""
    try:
        api.create(obj, deadline=deadline)
        return "created"
    except Conflict:
        spec_only = {k: v for k, v in obj.items() if k != "status"}
        api.apply(spec_only, force=True, deadline=deadline)
        api.patch_status(obj, obj.get("status") or {}, deadline=deadline)
        return "updated"


def register_nodes(
    api: Api,
    objects: Sequence[Mapping[str, Any]],
    *,
    timeout_s: float = 300.0,
    workers: int = 8,
    on_done: Callable[[str], None] | None = None,
) -> dict[str, int]:
    """Register every node in parallel (the API server is the bottleneck, not us); counts by outcome."""
    deadline = Deadline(timeout_s)
    counts = {"created": 0, "updated": 0}

    def one(obj: Mapping[str, Any]) -> str:
        outcome = register_node(api, obj, deadline=deadline)
        if on_done:
            on_done(obj["metadata"]["name"])
        return outcome

    with ThreadPoolExecutor(max_workers=workers) as pool:
        for outcome in pool.map(one, objects):
            counts[outcome] += 1
    return counts
