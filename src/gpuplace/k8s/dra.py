"""Where pods landed, read back from the API: the node from ``spec.nodeName`` and, through DRA, the GPU
devices from their ResourceClaims' ``status.allocation``; and why a pod is still Pending.

A claim's allocation names (driver, pool, device) for each request; the device's attributes in its
ResourceSlice say which GPU it is (:mod:`gpuplace.dra`), so a placement reads as inventory ids
(``h100-0/gpu3``, ``a100-mig-0/gpu4/1g.10gb-0``) that compare directly with a plan's. Nothing is copied
from a plan. A GPU requested through the device plugin (``nvidia.com/gpu``, ``nvidia.com/mig-*``) has no
device in the API: such a pod's placement is "node level only" (:data:`NODE_LEVEL`) and carries no GPU ids.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuplace import dra as vocab
from gpuplace.k8s.api import Api
from gpuplace.k8s.errors import NotFound
from gpuplace.k8s.retry import Deadline
from gpuplace.labels import GPU_RESOURCE, MIG_RESOURCE_PREFIX
from gpuplace.types import Inventory
from gpuplace.types.deploy import DEVICE_LEVEL, NO_GPU, NODE_LEVEL

RESOURCE_API = "resource.k8s.io/v1"
DEVICE_PLUGIN_PREFIXES = (GPU_RESOURCE, MIG_RESOURCE_PREFIX)


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    """One device the scheduler's DRA allocator picked for a claim."""

    claim: str
    request: str
    driver: str
    pool: str
    device: str
    node: str = ""  # the node of the device's ResourceSlice; "" when it is not published any more
    gpu_id: str = ""  # inventory id; "" when the published attributes do not say which GPU
    gpu_index: int | None = None  # physical GPU index (a MIG slice's parent)
    mig_profile: str = ""
    uuid: str = ""


@dataclass(frozen=True, slots=True)
class PodPlacement:
    """Where one pod is, as the API says: node, level of detail, and GPU devices when DRA allocated them."""

    pod: str
    node: str  # spec.nodeName; "" while unscheduled
    level: str  # DEVICE_LEVEL | NODE_LEVEL | NO_GPU
    devices: tuple[AllocatedDevice, ...] = ()
    device_plugin_gpus: int = 0  # GPUs and MIG slices asked for through the device plugin
    notes: tuple[str, ...] = field(default=())

    @property
    def gpu_ids(self) -> tuple[str, ...]:
        """The inventory ids of the allocated devices that could be identified (sorted)."""
        return tuple(sorted(d.gpu_id for d in self.devices if d.gpu_id))


def claim_names(pod: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(name in the pod, ResourceClaim name) of the pod's claims; a template's claim is named in the pod's
    status once the resource-claim controller has made it ("" until then)."""
    made = {
        s.get("name"): s.get("resourceClaimName") or ""
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or ()
    }
    out = []
    for c in (pod.get("spec") or {}).get("resourceClaims") or ():
        name = str(c.get("name", ""))
        out.append((name, str(c.get("resourceClaimName") or made.get(name) or "")))
    return out


def device_plugin_gpus(pod: Mapping[str, Any]) -> int:
    """GPUs and MIG slices the pod's containers take through the device plugin (limits, as required)."""
    total = 0
    for c in (pod.get("spec") or {}).get("containers") or ():
        for key, value in ((c.get("resources") or {}).get("limits") or {}).items():
            if key.startswith(DEVICE_PLUGIN_PREFIXES):
                try:
                    total += int(str(value))
                except ValueError:
                    continue
    return total


class _Slices:
    """ResourceSlices by (driver, pool), listed once per driver per reading."""

    def __init__(self, api: Api, deadline: Deadline) -> None:
        self.api = api
        self.deadline = deadline
        self._by_driver: dict[str, list[dict[str, Any]]] = {}

    def pool(self, driver: str, pool: str) -> tuple[str, list[Mapping[str, Any]]]:
        """(node, devices) of a pool; ("", []) when no slice of it exists."""
        if driver not in self._by_driver:
            self._by_driver[driver] = self.api.list(
                RESOURCE_API, "ResourceSlice", field_selector=f"spec.driver={driver}", deadline=self.deadline
            )
        node, devices = "", []
        for s in self._by_driver[driver]:
            spec = s.get("spec") or {}
            if (spec.get("pool") or {}).get("name") == pool:
                node = node or str(spec.get("nodeName") or "")
                devices += list(spec.get("devices") or ())
        return node, devices


def _identify(
    claim: str, result: Mapping[str, Any], slices: _Slices, inventory: Inventory | None
) -> tuple[AllocatedDevice, str]:
    driver, pool, name = (
        str(result.get("driver", "")),
        str(result.get("pool", "")),
        str(result.get("device", "")),
    )
    base = AllocatedDevice(
        claim=claim, request=str(result.get("request", "")), driver=driver, pool=pool, device=name
    )
    node, devices = slices.pool(driver, pool)
    raw = next((dev for dev in devices if dev.get("name") == name), None)
    if raw is None:
        return (
            base,
            f"device {driver}/{pool}/{name} of claim {claim} is not published in any ResourceSlice now",
        )
    published = vocab.published_device(raw)
    gpu_id = ""
    note = ""
    if driver == vocab.DRIVER:
        gpu_id = vocab.inventory_id(node, published, [vocab.published_device(x) for x in devices])
        if not gpu_id:
            note = f"device {driver}/{pool}/{name} does not say which GPU it is (no index attribute)"
        elif inventory is not None and not any(g.id == gpu_id for _, g in inventory.devices()):
            note = f"device {driver}/{pool}/{name} is {gpu_id}, which the inventory does not have"
            gpu_id = ""
    return (
        AllocatedDevice(
            claim=claim,
            request=base.request,
            driver=driver,
            pool=pool,
            device=name,
            node=node,
            gpu_id=gpu_id,
            gpu_index=published.index,
            mig_profile=published.mig_profile,
            uuid=published.uuid,
        ),
        note,
    )


@dataclass(frozen=True, slots=True)
class PublishedGpu:
    """A GPU or MIG slice the DRA driver publishes, by the inventory id it maps to."""

    gpu_id: str
    node: str
    device: str  # the device name in its ResourceSlice
    uuid: str
    kind: str  # "gpu" | "mig"


def published_gpus(api: Api, *, deadline: Deadline) -> dict[str, PublishedGpu]:
    """Every device NVIDIA's GPU driver publishes that maps to an inventory id, by that id.

    Raises :class:`~gpuplace.k8s.errors.NotFound` when the cluster serves no ``resource.k8s.io/v1`` and
    :class:`~gpuplace.k8s.errors.Forbidden` when this identity may not list ResourceSlices.
    """
    slices = api.list(
        RESOURCE_API, "ResourceSlice", field_selector=f"spec.driver={vocab.DRIVER}", deadline=deadline
    )
    out: dict[str, PublishedGpu] = {}
    for s in slices:
        spec = s.get("spec") or {}
        node = str(spec.get("nodeName") or (spec.get("pool") or {}).get("name") or "")
        devices = [vocab.published_device(d) for d in spec.get("devices") or ()]
        for dev in devices:
            gpu_id = vocab.inventory_id(node, dev, devices)
            if gpu_id:
                out[gpu_id] = PublishedGpu(gpu_id, node, dev.name, dev.uuid, dev.kind or "gpu")
    return out


def placement_of(
    api: Api,
    pod: Mapping[str, Any],
    *,
    deadline: Deadline,
    inventory: Inventory | None = None,
    _slices: _Slices | None = None,
) -> PodPlacement:
    """The placement of ``pod`` (a Pod object as read from the API)."""
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace", ""))
    name = str(meta.get("name", ""))
    node = str((pod.get("spec") or {}).get("nodeName") or "")
    slices = _slices or _Slices(api, deadline)
    devices: list[AllocatedDevice] = []
    notes: list[str] = []
    for in_pod, claim_name in claim_names(pod):
        if not claim_name:
            notes.append(f"claim {in_pod}: no ResourceClaim made for it yet")
            continue
        claim = api.get_or_none(RESOURCE_API, "ResourceClaim", claim_name, namespace, deadline=deadline)
        if claim is None:
            notes.append(f"claim {in_pod}: ResourceClaim {claim_name} does not exist")
            continue
        allocation = (claim.get("status") or {}).get("allocation")
        if not allocation:
            notes.append(f"claim {in_pod}: ResourceClaim {claim_name} is not allocated")
            continue
        for result in (allocation.get("devices") or {}).get("results") or ():
            device, note = _identify(claim_name, result, slices, inventory)
            devices.append(device)
            if note:
                notes.append(note)
    plugin = device_plugin_gpus(pod)
    if devices:
        level = DEVICE_LEVEL
    elif plugin and node:
        level = NODE_LEVEL
        notes.append(
            f"{plugin} GPU(s) or MIG slice(s) through the device plugin: the API says which node, "
            "not which devices (node level only)"
        )
    else:
        level = NO_GPU
    return PodPlacement(
        pod=name,
        node=node,
        level=level,
        devices=tuple(devices),
        device_plugin_gpus=plugin,
        notes=tuple(notes),
    )


def read_placements(
    api: Api,
    namespace: str,
    *,
    label_selector: str,
    deadline: Deadline,
    inventory: Inventory | None = None,
) -> tuple[PodPlacement, ...]:
    """The placement of every live pod matching ``label_selector`` in ``namespace``, by pod name."""
    pods = api.list("v1", "Pod", namespace, label_selector=label_selector, deadline=deadline)
    slices = _Slices(api, deadline)
    live = [p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")]
    return tuple(
        placement_of(api, p, deadline=deadline, inventory=inventory, _slices=slices)
        for p in sorted(live, key=lambda p: p["metadata"]["name"])
    )


def device_mismatches(
    placement: PodPlacement, planned_node: str, planned_gpu_ids: Sequence[str]
) -> tuple[str, ...]:
    """How a measured placement differs from the plan's; empty when it matches as far as the API can tell.

    At node level only the node is compared: the GPUs the device plugin picked are not in the API, and
    treating the plan's ids as measured would be inventing them.
    """
    out: list[str] = []
    if not placement.node:
        return (f"pod {placement.pod} is not scheduled",)
    if planned_node and placement.node != planned_node:
        out.append(f"pod {placement.pod} on {placement.node}, planned {planned_node}")
    if placement.level == DEVICE_LEVEL and planned_gpu_ids:
        got, want = set(placement.gpu_ids), set(planned_gpu_ids)
        if len(placement.gpu_ids) != len(placement.devices):
            out.append(
                f"pod {placement.pod}: {len(placement.devices) - len(got)} allocated device(s) not identified"
            )
        if got != want:
            extra, missing = sorted(got - want), sorted(want - got)
            out.append(
                f"pod {placement.pod} got {', '.join(extra) or '-'} instead of {', '.join(missing) or '-'}"
            )
    return tuple(out)


def pending_reason(api: Api, namespace: str, pod: str, *, deadline: Deadline) -> str:
    """Why kube-scheduler has not bound ``pod``: its ``PodScheduled=False`` condition, else its latest
    ``FailedScheduling`` event; "" when the pod is bound or the scheduler has not said anything yet.

    Raises :class:`~gpuplace.k8s.errors.NotFound` when the pod does not exist.
    """
    obj = api.get("v1", "Pod", pod, namespace, deadline=deadline)
    if (obj.get("spec") or {}).get("nodeName"):
        return ""
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("message"):
            return f"{c.get('reason') or 'Unschedulable'}: {c['message']}"
    try:
        events = api.list(
            "v1",
            "Event",
            namespace,
            field_selector=f"involvedObject.kind=Pod,involvedObject.name={pod},reason=FailedScheduling",
            deadline=deadline,
        )
    except NotFound:
        return ""
    if not events:
        return ""
    last = max(events, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
    return f"{last.get('reason')}: {last.get('message')}"
