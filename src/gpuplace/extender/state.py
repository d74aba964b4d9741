"""What the extender knows of the cluster: Node objects, the GPU pods bound to them, and per-node fits.

Nodes are read the way :mod:`gpuplace.inventory.cluster` reads them (GFD labels, allocatable GPU
resources, the ``gpuplace.io/gpu-topology`` annotation). A node's GPUs are taken by the pods bound to
it: the devices named in a pod's ``gpuplace.io/gpu-assignment`` annotation when it has one for that
node (the extender wrote it at bind time), otherwise — a pod bound while the extender was down or by
another binder — the lowest free indices, as the inventory reader counts them. Each change bumps the
node's version and is logged; each request shape keeps a view of its fits (and their ranking keys) per
node, and a scheduling cycle first drops from the view the nodes changed since it last looked — so a
cycle over a fleet in which one node changed computes one fit and otherwise reads one dict entry per
node. Thread-safe: the HTTP handlers and the watch threads share it.
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from gpuplace import labels as L
from gpuplace.catalog import GpuCatalog, load_gpu_catalog
from gpuplace.errors import InvalidInput
from gpuplace.extender.fit import node_fit, rank_key, read_assignment
from gpuplace.inventory.cluster import inventory_from_objects, pod_gpu_requests, quantity
from gpuplace.planner.fragmentation import DEFAULT_LLM_MIX, FragmentationModel, TaskClass
from gpuplace.types import GpuDevice, Node
from gpuplace.types.extender import GpuRequest, NodeFit

VIEWS = 256  # request shapes whose fits are kept
CHANGE_LOG = 100_000  # node changes remembered; a view older than that starts again
# More GPU devices than any node has (time-slicing included): a Node object claiming more is refused
# before the inventory reader would build one device per unit.
MAX_DEVICES_PER_NODE = 4096
TERMINAL_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class PodGpus:
    """A GPU pod bound to a node: what it holds, and the devices the extender recorded for it."""

    node: str
    requests: Mapping[str, int]
    devices: tuple[str, ...] = ()


def pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}"


def bound_gpus(pod: Mapping[str, Any]) -> PodGpus | None:
    """The GPUs a pod object holds, or None when it is unbound, finished or asks for none."""
    node = (pod.get("spec") or {}).get("nodeName")
    if not node or (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
        return None
    try:
        requests = {k: n for k, n in pod_gpu_requests(pod).items() if n > 0}
    except ValueError:  # InvalidInput included
        return None  # the API server admitted it, so this cannot hold GPUs the device plugin counts
    if not requests:
        return None
    devices = read_assignment((pod.get("metadata") or {}).get("annotations"), str(node))
    return PodGpus(str(node), requests, devices)


def allocate(node: Node, pods: Iterable[PodGpus]) -> Node:
    """``node`` with its devices' ``allocated`` shares set from the pods bound to it."""
    share: dict[str, float] = {g.id: 0.0 for g in node.gpus}
    by_id = {g.id: g for g in node.gpus}
    slot = {g.id: (1.0 / node.gpu_sharing if not g.mig_profile else 1.0) for g in node.gpus}
    unrecorded: Counter[str] = Counter()
    for p in pods:
        if p.devices and all(d in by_id for d in p.devices):
            for d in p.devices:
                share[d] += slot[d]
        else:
            unrecorded.update(p.requests)
    for resource, n in sorted(unrecorded.items()):
        units = [
            g for g in sorted(node.gpus, key=lambda g: (g.index, g.id)) if L.resource_of(node, g) == resource
        ]
        for g in units:
            while n > 0 and share[g.id] + slot[g.id] <= 1.0 + 1e-9:
                share[g.id] += slot[g.id]
                n -= 1
    return replace(
        node, gpus=tuple(replace(g, allocated=min(1.0, share[g.id])) if share[g.id] else g for g in node.gpus)
    )


def _too_many_devices(obj: Mapping[str, Any]) -> str:
    status = obj.get("status") or {}
    alloc = status.get("allocatable") or status.get("capacity") or {}
    if not isinstance(alloc, Mapping):
        return ""
    for key, value in alloc.items():
        if key == L.GPU_RESOURCE or str(key).startswith(L.MIG_RESOURCE_PREFIX):
            try:
                n = quantity(value, str(key))
            except ValueError:
                continue  # the reader reports it
            if n > MAX_DEVICES_PER_NODE:
                return f"{key}={value}"
    return ""


@dataclass
class _View:
    """One request shape's fits and ranking keys per node, valid as of change ``seen``."""

    seen: int
    fits: dict[str, NodeFit]
    keys: dict[str, tuple[float, ...]]


class ClusterState:
    """Nodes and bound GPU pods, updated by watches (or by the caller) and read by the HTTP handlers."""

    def __init__(
        self, *, catalog: GpuCatalog | None = None, task_mix: tuple[TaskClass, ...] = DEFAULT_LLM_MIX
    ) -> None:
        self.catalog = catalog or load_gpu_catalog()
        self.frag = FragmentationModel(tuple(task_mix))
        self.lock = threading.RLock()
        self.synced = threading.Event()  # set once both watches have listed
        self._node_objs: dict[str, Mapping[str, Any]] = {}
        self._parsed: dict[str, Node | str] = {}  # without allocations; str = why it has no usable GPUs
        self._pods: dict[str, PodGpus] = {}
        self._pods_on: dict[str, set[str]] = {}
        self._version: dict[str, int] = {}
        self._states: dict[str, Node | str] = {}
        self._views: OrderedDict[GpuRequest, _View] = OrderedDict()
        self._changes: list[str] = []  # node names in the order they changed
        self._changes_base = 0  # change number of _changes[0]
        # The last node list's fits: prioritize follows filter for the same pod and nodes.
        self._last: (
            tuple[GpuRequest, tuple[str, ...], int, list[NodeFit], list[tuple[float, ...] | None]] | None
        )
        self._last = None

    # --- updates ----------------------------------------------------------------------------------
    def _touch(self, name: str) -> None:
        self._version[name] = self._version.get(name, 0) + 1
        self._states.pop(name, None)
        self._changes.append(name)
        if len(self._changes) > CHANGE_LOG:
            drop = len(self._changes) // 2
            del self._changes[:drop]
            self._changes_base += drop

    def set_node(self, obj: Mapping[str, Any]) -> None:
        name = str((obj.get("metadata") or {}).get("name", ""))
        with self.lock:
            self._node_objs[name] = obj
            self._parsed.pop(name, None)
            self._touch(name)

    def ensure_node(self, obj: Mapping[str, Any]) -> None:
        """Take a Node object from a request unless the same version is already known."""
        meta = obj.get("metadata") or {}
        name = str(meta.get("name", ""))
        known = self._node_objs.get(name)
        rv = meta.get("resourceVersion")
        if known is not None and (
            known is obj or (rv and (known.get("metadata") or {}).get("resourceVersion") == rv)
        ):
            return
        self.set_node(obj)

    def remove_node(self, name: str) -> None:
        with self.lock:
            self._node_objs.pop(name, None)
            self._parsed.pop(name, None)
            self._touch(name)

    def replace_nodes(self, objs: Iterable[Mapping[str, Any]]) -> None:
        with self.lock:
            seen = set()
            for obj in objs:
                seen.add(str((obj.get("metadata") or {}).get("name", "")))
                self.ensure_node(obj)
            for name in set(self._node_objs) - seen:
                self.remove_node(name)

    def set_pod(self, pod: Mapping[str, Any]) -> None:
        self.put_pod(pod_key(pod), bound_gpus(pod))

    def put_pod(self, key: str, gpus: PodGpus | None) -> None:
        with self.lock:
            old = self._pods.pop(key, None)
            if old is not None:
                self._pods_on.get(old.node, set()).discard(key)
                self._touch(old.node)
            if gpus is not None:
                self._pods[key] = gpus
                self._pods_on.setdefault(gpus.node, set()).add(key)
                self._touch(gpus.node)

    def remove_pod(self, key: str) -> None:
        self.put_pod(key, None)

    def replace_pods(self, pods: Iterable[Mapping[str, Any]]) -> None:
        with self.lock:
            seen = set()
            for pod in pods:
                key = pod_key(pod)
                seen.add(key)
                self.put_pod(key, bound_gpus(pod))
            for key in set(self._pods) - seen:
                self.remove_pod(key)

    def pod(self, key: str) -> PodGpus | None:
        return self._pods.get(key)

    # --- reads --------------------------------------------------------------------------------------
    def node_names(self) -> list[str]:
        with self.lock:
            return sorted(self._node_objs)

    def node_object(self, name: str) -> Mapping[str, Any] | None:
        return self._node_objs.get(name)

    def _parse(self, name: str) -> Node | str:
        parsed = self._parsed.get(name)
        if parsed is None:
            obj = self._node_objs.get(name)
            if obj is None:
                parsed = "gpuplace: node not (yet) known to the extender"
            elif too_many := _too_many_devices(obj):
                parsed = f"gpuplace: node advertises {too_many}, more than {MAX_DEVICES_PER_NODE} devices"
            else:
                try:
                    inventory = inventory_from_objects([obj], catalog=self.catalog)
                    parsed = inventory.nodes[0] if inventory.nodes else "gpuplace: node has no GPUs"
                except ValueError as e:  # InvalidInput, or a quantity the reader's pattern lets through
                    problem = e.problem if isinstance(e, InvalidInput) else ""
                    parsed = (
                        "gpuplace: node has no GPUs (no GPU labels or allocatable nvidia.com/gpu)"
                        if "has no GPUs" in problem
                        else f"gpuplace: node object unreadable: {e}"
                    )
            self._parsed[name] = parsed
        return parsed

    def state(self, name: str) -> Node | str:
        """The node with its current allocations, or why the extender cannot use it."""
        with self.lock:
            state = self._states.get(name)
            if state is None:
                parsed = self._parse(name)
                if isinstance(parsed, str):
                    state = parsed
                else:
                    state = allocate(parsed, (self._pods[k] for k in sorted(self._pods_on.get(name, ()))))
                self._states[name] = state
            return state

    @property
    def changes(self) -> int:
        """How many times a node or its pods changed: answers computed at the same count still hold."""
        return self._changes_base + len(self._changes)

    def _view(self, req: GpuRequest) -> _View:
        """The request shape's view, with the nodes changed since it was last read dropped from it."""
        now = self._changes_base + len(self._changes)
        view = self._views.get(req)
        if view is None or view.seen < self._changes_base:
            view = _View(now, {}, {})
        elif view.seen < now:
            for name in self._changes[view.seen - self._changes_base :]:
                view.fits.pop(name, None)
                view.keys.pop(name, None)
            view.seen = now
        self._views[req] = view
        self._views.move_to_end(req)
        if len(self._views) > VIEWS:
            self._views.popitem(last=False)
        return view

    def _compute(self, name: str, req: GpuRequest) -> NodeFit:
        state = self.state(name)
        if isinstance(state, str):
            return NodeFit(name, reason=state, unresolvable=name in self._node_objs)
        return node_fit(state, req, self.frag)

    def fit(self, name: str, req: GpuRequest) -> NodeFit:
        return self.fits_and_keys((name,), req)[0][0]

    def fits(self, names: Iterable[str], req: GpuRequest) -> list[NodeFit]:
        """:meth:`fit` of each node, under one acquisition of the lock."""
        return self.fits_and_keys(names, req)[0]

    def fits_and_keys(
        self, names: Iterable[str], req: GpuRequest
    ) -> tuple[list[NodeFit], list[tuple[float, ...] | None]]:
        """Each node's fit and its ranking key (:func:`~gpuplace.extender.fit.rank_key`; None: no fit)."""
        names = tuple(names)
        with self.lock:
            last = self._last
            if last is not None and last[0] == req and last[2] == self.changes and last[1] == names:
                return last[3], last[4]
            view = self._view(req)
            fits, keys = view.fits, view.keys
            out_fits: list[NodeFit] = []
            out_keys: list[tuple[float, ...] | None] = []
            for name in names:
                fit = fits.get(name)
                if fit is None:
                    fit = fits[name] = self._compute(name, req)
                    if fit.fits:
                        keys[name] = rank_key(fit)
                out_fits.append(fit)
                out_keys.append(keys.get(name))
            self._last = (req, names, self.changes, out_fits, out_keys)
            return out_fits, out_keys

    def devices(self, name: str) -> dict[str, GpuDevice]:
        state = self.state(name)
        return {} if isinstance(state, str) else {g.id: g for g in state.gpus}
