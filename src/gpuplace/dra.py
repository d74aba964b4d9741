"""How a node's GPUs look to Dynamic Resource Allocation: the devices NVIDIA's DRA driver publishes.

NVIDIA's DRA driver for GPUs (``gpu.nvidia.com``, kubernetes-sigs/dra-driver-nvidia-gpu) publishes one
``ResourceSlice`` per node, its pool named after the node, with one device per whole GPU (``gpu-<minor>``,
``type: gpu``) or, on a MIG-enabled GPU, one device per MIG slice (``type: mig`` with ``profile``,
``parentUUID``). The attributes in the driver's own domain are ``type``, ``uuid``, ``productName``,
``brand``, ``architecture``, ``cudaComputeCapability`` (older releases also ``index`` and ``minor``, MIG
devices ``parentIndex``); the standard ones are ``resource.kubernetes.io/pcieRoot``,
``resource.kubernetes.io/pciBusID`` and (newer releases) ``resource.kubernetes.io/numaNode``; ``memory``
is a capacity. The driver publishes no attribute for NVLink inside a node, so the NVLink domain is
gpuplace's own attribute, :data:`NVLINK_DOMAIN`, and says so by its prefix.

This module holds that vocabulary and the one mapping both directions use: from an inventory device to
its DRA device name (what the local control plane publishes) and from a published device back to the
inventory id (what :mod:`gpuplace.k8s.dra` reads from claim allocations). Pure functions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuplace.types import GpuDevice

DRIVER = "gpu.nvidia.com"
GPU_CLASS = "gpu.nvidia.com"  # DeviceClass names as NVIDIA's Helm chart creates them
MIG_CLASS = "mig.nvidia.com"
TYPE = "type"
UUID = "uuid"
INDEX = "index"
MINOR = "minor"
PARENT_INDEX = "parentIndex"
PARENT_UUID = "parentUUID"
PROFILE = "profile"
PRODUCT_NAME = "productName"
MEMORY = "memory"  # a capacity, not an attribute
PCIE_ROOT = "resource.kubernetes.io/pcieRoot"
PCI_BUS_ID = "resource.kubernetes.io/pciBusID"
NUMA_NODE = "resource.kubernetes.io/numaNode"
NVLINK_DOMAIN = "gpuplace.io/nvlinkDomain"

_MIG_NAME = re.compile(r"^gpu-(\d+)-mig-(.+)-(\d+)$")


def qualified(attribute: str) -> tuple[str, str]:
    """(domain, name) of an attribute as CEL reads it: ``device.attributes[domain].name``."""
    domain, sep, name = attribute.rpartition("/")
    return (domain, name) if sep else (DRIVER, attribute)


def cel_attribute(attribute: str) -> str:
    domain, name = qualified(attribute)
    return f'device.attributes["{domain}"].{name}'


def product_name(device: GpuDevice) -> str:
    """The product as NVML reports it: GFD's label value with its dashes turned back into spaces."""
    return (device.product or device.gpu or "unknown").replace("-", " ")


def device_name(device: GpuDevice) -> str:
    """The DRA device name the local control plane publishes ``device`` under (a DNS label).

    Whole GPUs are ``gpu-<index>`` as NVIDIA names them (minor = index here). MIG slices are
    ``gpu-<index>-mig-<profile>-<n>`` (the n-th slice of that profile on that GPU, as the inventory counts
    them): NVIDIA's ``gpu-<minor>-mig-<giProfileId>-<start>-<size>`` needs GPU-instance placements a fleet
    file does not have.
    """
    if not device.mig_profile:
        return f"gpu-{device.index}"
    n = device.id.rsplit("-", 1)[-1]
    return f"gpu-{device.index}-mig-{device.mig_profile.replace('.', '-')}-{n}"


@dataclass(frozen=True, slots=True)
class PublishedDevice:
    """What a published device says about the GPU behind it, parsed once from its attributes."""

    name: str
    kind: str  # "gpu" | "mig" | "" (not NVIDIA's GPU driver, or not said)
    index: int | None  # physical GPU index on the node (a MIG slice's parent); None when not published
    mig_profile: str = ""
    uuid: str = ""


def _value(attr: object) -> Any:
    if not isinstance(attr, Mapping):
        return None
    for key in ("string", "int", "bool", "version"):
        if key in attr:
            return attr[key]
    return None


def attributes_of(device: Mapping[str, Any]) -> dict[str, Any]:
    """A ResourceSlice device's attributes as plain values, names qualified the way CEL sees them
    (``productName`` and ``gpu.nvidia.com/productName`` are the same attribute)."""
    out: dict[str, Any] = {}
    for key, attr in (device.get("attributes") or {}).items():
        domain, name = qualified(key)
        out[f"{domain}/{name}"] = _value(attr)
    return out


def published_device(device: Mapping[str, Any]) -> PublishedDevice:
    attrs = attributes_of(device)

    def get(attribute: str) -> Any:
        domain, name = qualified(attribute)
        return attrs.get(f"{domain}/{name}")

    kind = str(get(TYPE) or "")
    raw_index = get(PARENT_INDEX) if kind == "mig" else get(INDEX)
    if raw_index is None:
        raw_index = None if kind == "mig" else get(MINOR)
    return PublishedDevice(
        name=str(device.get("name", "")),
        kind=kind,
        index=int(raw_index) if isinstance(raw_index, int) else None,
        mig_profile=str(get(PROFILE) or "") if kind == "mig" else "",
        uuid=str(get(UUID) or ""),
    )


def inventory_id(node: str, device: PublishedDevice, siblings: Sequence[PublishedDevice] = ()) -> str:
    """The inventory id (``<node>/gpu<i>`` or ``<node>/gpu<i>/<profile>-<n>``, as the fleet-file and
    cluster loaders name devices) of a published device; "" when its attributes do not say which GPU.

    A MIG slice's ``n`` is its rank among the published slices of the same profile on the same GPU
    (``siblings``: every device of the pool), ordered by device name; names of the form this module
    publishes carry ``n`` themselves.
    """
    if device.index is None:
        return ""
    if device.kind != "mig":
        return f"{node}/gpu{device.index}"
    if not device.mig_profile:
        return ""
    own = _MIG_NAME.match(device.name)
    if own and own.group(2) == device.mig_profile.replace(".", "-") and int(own.group(1)) == device.index:
        return f"{node}/gpu{device.index}/{device.mig_profile}-{own.group(3)}"
    same = sorted(
        (
            s.name
            for s in siblings
            if s.kind == "mig" and s.index == device.index and s.mig_profile == device.mig_profile
        ),
        key=_natural,
    )
    if device.name not in same:
        return ""
    return f"{node}/gpu{device.index}/{device.mig_profile}-{same.index(device.name)}"


def _natural(name: str) -> tuple[Any, ...]:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))
