"""How a node's GPUs look to Dynamic Resource Allocation: the devices NVIDIA's DRA driver publishes, as one
table (:data:`PUBLISHED`, :data:`CAPACITIES`), and the driver's own checks of its opaque ``GpuConfig``.

Read from the driver's source (kubernetes-sigs/dra-driver-nvidia-gpu, formerly NVIDIA/k8s-dra-driver-gpu;
facts only, no code), 2026-12-04:

- ``cmd/gpu-kubelet-plugin/deviceinfo.go`` (``GpuInfo.Attributes``/``GetDevice``, ``MigDeviceInfo.GetDevice``;
  the release with ``addDeviceAttribute`` and the ``FabricManagerPartitioning`` gate; earlier at
  bbcbdfbe05a359f46744a429ac7e302d3616d291), ``cmd/gpu-kubelet-plugin/mig.go`` at
  88b3014fd216109e64927749031d1be0ed03c78e (``CommonAttributesMig``, ``CommonCapacitiesMig``, the
  canonical MIG name), ``nvlib.go`` and ``numa.go`` at 0545e9e55d69ba07ccc288283e144efbc9d292fa
  (where each value comes from), ``consumable_shares.go`` at f49e778e258dbe880d5f3303c386df652c91b298;
- ``api/nvidia.com/resource/v1beta1`` of NVIDIA/k8s-dra-driver-gpu: ``sharing.go`` at
  06756cbb9405fbd3b28abfca886d3c95e43eea3d, ``validate.go`` at 1b3fb8ac59d160ee9148fc1e245e9a9731c24f2b,
  ``gpuconfig.go`` (``Normalize``, ``Validate``), ``api.go`` (the strict decoder for user configs);
- ``pkg/featuregates``: ``TimeSlicingSettings``, ``MPSSupport``, ``ConsumableShares`` are alpha, off.

One ``ResourceSlice`` per node, its pool named after the node. A whole GPU is device ``gpu-<minor>``; on a
GPU with MIG enabled each MIG device is ``gpu-<parent minor>-mig-<profile>-<GI profile id>-<placement
start>`` and the GPU itself is not published. The driver publishes **no** ``index``/``minor`` attribute
(older releases did), no NVLink attribute and no clique: the multi-node NVLink domain is GFD's node label
``nvidia.com/gpu.clique`` and the driver's ``ComputeDomain`` (``gpuplace.manifests.lws``).

This module also holds the one mapping both directions use: from an inventory device to its DRA device
name (what the local control plane publishes) and from a published device back to the inventory id (what
:mod:`gpuplace.k8s.dra` reads from claim allocations). Pure functions.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuplace.errors import InvalidInput
from gpuplace.types import GpuDevice

DRIVER = "gpu.nvidia.com"
GPU_CLASS = "gpu.nvidia.com"  # DeviceClass names as NVIDIA's Helm chart creates them
MIG_CLASS = "mig.nvidia.com"
STANDARD = "resource.kubernetes.io"  # the domain of the attributes Kubernetes standardises
TYPE = "type"
UUID = "uuid"
PARENT_UUID = "parentUUID"
PROFILE = "profile"
PRODUCT_NAME = "productName"
BRAND = "brand"
ARCHITECTURE = "architecture"
CUDA_COMPUTE_CAPABILITY = "cudaComputeCapability"
DRIVER_VERSION = "driverVersion"
CUDA_DRIVER_VERSION = "cudaDriverVersion"
ADDRESSING_MODE = "addressingMode"
PCIE_ROOT = f"{STANDARD}/pcieRoot"
PCI_BUS_ID = f"{STANDARD}/pciBusID"
NUMA_NODE = f"{STANDARD}/numaNode"
MEMORY = "memory"  # a capacity, not an attribute
# Read only, from releases before the current one (never published now, never used in a claim).
INDEX = "index"
MINOR = "minor"
PARENT_INDEX = "parentIndex"


@dataclass(frozen=True, slots=True)
class DriverAttribute:
    """One attribute the driver publishes: its CEL type and on which devices (``type`` gpu / mig)."""

    type: str  # the ResourceSlice value key: "string" | "int" | "bool" | "version"
    devices: frozenset[str]
    when: str = ""  # "" always; else when the driver publishes it


_BOTH = frozenset({"gpu", "mig"})
_MIG = frozenset({"mig"})
# Every attribute the driver publishes for a GPU or MIG device by default (no alpha gate), by the name CEL
# reads (``<domain>/<name>``). Gated, and never used by gpuplace: ``gpuModuleID`` and ``partition<N>``
# (FabricManagerPartitioning), a list-valued ``numaNode`` (DRAListTypeAttributes).
PUBLISHED: Mapping[str, DriverAttribute] = {
    f"{DRIVER}/{TYPE}": DriverAttribute("string", _BOTH),
    f"{DRIVER}/{UUID}": DriverAttribute("string", _BOTH),
    f"{DRIVER}/{PRODUCT_NAME}": DriverAttribute("string", _BOTH),
    f"{DRIVER}/{BRAND}": DriverAttribute("string", _BOTH),
    f"{DRIVER}/{ARCHITECTURE}": DriverAttribute("string", _BOTH),
    f"{DRIVER}/{CUDA_COMPUTE_CAPABILITY}": DriverAttribute("version", _BOTH),
    f"{DRIVER}/{DRIVER_VERSION}": DriverAttribute("version", _BOTH),
    f"{DRIVER}/{CUDA_DRIVER_VERSION}": DriverAttribute("version", _BOTH),
    f"{DRIVER}/{ADDRESSING_MODE}": DriverAttribute(
        "string", _BOTH, "on coherent-memory (Grace) systems only: HMM, ATS or None"
    ),
    f"{DRIVER}/{PARENT_UUID}": DriverAttribute("string", _MIG),
    f"{DRIVER}/{PROFILE}": DriverAttribute("string", _MIG),
    PCI_BUS_ID: DriverAttribute("string", _BOTH),
    PCIE_ROOT: DriverAttribute("string", _BOTH, "when the GPU's PCIe root is found"),
    NUMA_NODE: DriverAttribute("int", _BOTH, "where the kernel reports the GPU's NUMA node"),
}
# Capacities, by name in the driver's domain: a MIG device's engines and memory slices, and ``shares``
# only with ConsumableShares set to a number of shares.
CAPACITIES: Mapping[str, frozenset[str]] = {
    MEMORY: _BOTH,
    **{c: _MIG for c in ("multiprocessors", "copyEngines", "decoders", "encoders", "jpegEngines")},
    "ofaEngines": _MIG,
    "shares": frozenset({"gpu"}),
}
_MEMORY_SLICE = re.compile(r"^memorySlice\d+$")  # MIG: one per memory slice it occupies
_DRIVER_NAME = re.compile(r"^gpu-(\d+)(?:-mig-.+)?$")  # gpu-<minor>, gpu-<parent minor>-mig-...
_MIG_NAME = re.compile(r"^gpu-(\d+)-mig-(.+)-(\d+)$")


def qualified(attribute: str) -> tuple[str, str]:
    """(domain, name) of an attribute as CEL reads it: ``device.attributes[domain].name``."""
    domain, sep, name = attribute.rpartition("/")
    return (domain, name) if sep else (DRIVER, attribute)


def full_name(attribute: str) -> str:
    """``<domain>/<name>``: ``productName`` and ``gpu.nvidia.com/productName`` are the same attribute."""
    return "/".join(qualified(attribute))


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
    them): NVIDIA's ``gpu-<minor>-mig-<profile>-<giProfileId>-<start>`` needs GPU-instance placements a
    fleet file does not have. Both begin ``gpu-<minor>``, which is how a device says which GPU it is.
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
    index: int | None  # physical GPU index on the node (a MIG slice's parent); None when not said
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
    """A ResourceSlice device's attributes as plain values, by :func:`full_name`."""
    return {full_name(key): _value(attr) for key, attr in (device.get("attributes") or {}).items()}


def published_device(device: Mapping[str, Any]) -> PublishedDevice:
    """The GPU behind a published device: its index from an ``index``/``minor``/``parentIndex`` attribute
    where an older driver release publishes one, else from the driver's canonical name ``gpu-<minor>``
    (``gpu-<parent minor>-mig-...``), the GPU's minor number, which the inventory counts GPUs by."""
    attrs = attributes_of(device)
    name = str(device.get("name", ""))
    kind = str(attrs.get(full_name(TYPE)) or "")
    keys = (PARENT_INDEX,) if kind == "mig" else (INDEX, MINOR)
    raw = next((attrs[full_name(k)] for k in keys if isinstance(attrs.get(full_name(k)), int)), None)
    named = _DRIVER_NAME.match(name)
    if raw is None and named and kind in ("gpu", "mig") and ("-mig-" in name) == (kind == "mig"):
        raw = int(named.group(1))
    return PublishedDevice(
        name=name,
        kind=kind,
        index=raw,
        mig_profile=str(attrs.get(full_name(PROFILE)) or "") if kind == "mig" else "",
        uuid=str(attrs.get(full_name(UUID)) or ""),
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


# --- what a claim asks of the driver ----------------------------------------------------------------------

_CEL_REF = re.compile(r"device\.(attributes|capacity)\[\s*[\"']([^\"']+)[\"']\s*\]\.(\w+)")
_CLASS_KINDS = {GPU_CLASS: frozenset({"gpu"}), MIG_CLASS: _MIG}


def _publishes(what: str, name: str, kinds: frozenset[str]) -> bool:
    if what == "attributes":
        spec = PUBLISHED.get(name)
        return spec is not None and kinds <= spec.devices
    domain, short = qualified(name)
    if domain != DRIVER:
        return False
    if _MEMORY_SLICE.match(short):
        return kinds <= _MIG
    return short in CAPACITIES and kinds <= CAPACITIES[short]


def unpublished(claim: Mapping[str, Any]) -> list[str]:
    """What a ResourceClaim or ResourceClaimTemplate for NVIDIA's driver refers to that the driver does not
    publish on the devices its requests' classes select (CEL selectors, capacity requests,
    ``matchAttribute`` constraints), one line each; empty when the driver can allocate it. A claim that
    names such an attribute never allocates: a device without it does not satisfy the constraint.

    Its opaque ``GpuConfig`` is checked too (:func:`gpu_config_gates` raises on what the driver refuses).
    """
    spec = claim.get("spec") or {}
    if claim.get("kind") == "ResourceClaimTemplate":
        spec = spec.get("spec") or {}
    devices = spec.get("devices") or {}
    kinds: dict[str, frozenset[str]] = {}
    refs: list[tuple[str, str, str, frozenset[str]]] = []  # (where, what, name, kinds)
    for request in devices.get("requests") or ():
        name, exactly = str(request.get("name", "")), request.get("exactly") or {}
        kinds[name] = _CLASS_KINDS.get(str(exactly.get("deviceClassName", "")), _BOTH)
        for selector in exactly.get("selectors") or ():
            cel = str((selector.get("cel") or {}).get("expression", ""))
            for what, domain, attr in _CEL_REF.findall(cel):
                refs.append((f"request {name}", what, f"{domain}/{attr}", kinds[name]))
        for cap in (exactly.get("capacity") or {}).get("requests") or {}:
            refs.append((f"request {name}", "capacity", full_name(str(cap)), kinds[name]))
    for constraint in devices.get("constraints") or ():
        if "matchAttribute" in constraint:
            names = list(constraint.get("requests") or kinds)
            union = frozenset().union(*(kinds.get(n, _BOTH) for n in names))
            attr = full_name(str(constraint["matchAttribute"]))
            refs.append((f"constraint over {','.join(names)}", "attributes", attr, union))
    for k, config in enumerate(devices.get("config") or ()):
        opaque = config.get("opaque") or {}
        if opaque.get("driver") == DRIVER:
            gpu_config_gates(opaque.get("parameters"), f"spec.devices.config[{k}].opaque.parameters")
    return [
        f"{where}: {what[:-1] if what == 'attributes' else what} {name} is not published by NVIDIA's DRA "
        f"driver on {'/'.join(sorted(k))} devices"
        for where, what, name, k in refs
        if not _publishes(what, name, k)
    ]


# --- the driver's opaque config (GpuConfig, resource.nvidia.com/v1beta1) ---------------------------------

GPU_CONFIG_API = "resource.nvidia.com/v1beta1"
TIME_SLICING = "TimeSlicing"
MPS = "MPS"
INTERVALS = ("Default", "Short", "Medium", "Long")
# the driver feature gate each strategy needs (alpha, off by default); no sharing config needs none
STRATEGY_GATES = {TIME_SLICING: "TimeSlicingSettings", MPS: "MPSSupport"}
_CONFIG_FIX = "Write it as the driver's GpuConfig (resource.nvidia.com/v1beta1) takes it"
_BYTES = {"": 1.0, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_BYTES |= {f"{p}i": 1024.0 ** (n + 1) for n, p in enumerate("KMGTPE")}
_QUANTITY = re.compile(r"^(\d+(?:\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$")


def _object(value: object, field: str, keys: frozenset[str]) -> Mapping[str, Any]:
    """``value`` as an object with only ``keys`` (the driver decodes user configs strictly)."""
    if not isinstance(value, Mapping):
        raise InvalidInput(field, value, "is not an object", _CONFIG_FIX)
    unknown = sorted(set(value) - keys)
    if unknown:
        raise InvalidInput(
            f"{field}.{unknown[0]}",
            value[unknown[0]],
            "is not a field of the driver's API",
            f"Use {sorted(keys)}",
        )
    return value


def _mebibytes(value: object, field: str) -> int:
    """A pinned-memory limit in whole MiB, as the driver passes it to MPS (it refuses less than 1 MiB)."""
    m = _QUANTITY.match(str(value).strip()) if isinstance(value, (str, int)) else None
    if m is None or isinstance(value, bool):
        raise InvalidInput(field, value, "is not a Kubernetes quantity", "e.g. 8Gi or 20480Mi")
    mib = math.ceil(float(m.group(1)) * _BYTES[m.group(2) or ""]) // 2**20  # bytes rounded up, as Value()
    if mib < 1:
        raise InvalidInput(field, value, "is below 1Mi, which the driver refuses as too low", "e.g. 8Gi")
    return mib


def gpu_config_gates(params: object, field: str = "config", devices: int = 1) -> tuple[str, ...]:
    """The driver feature gates a ``GpuConfig`` needs (none without ``sharing``: the default CUDA
    time-slicing of the pods that share one claim); refuses, naming the field, what the driver's strict
    decoding, ``Normalize`` and ``Validate`` refuse. ``devices``: how many devices the claim allocates
    (a per-device limit's index must be one of them)."""
    config = _object(params, field, frozenset({"apiVersion", "kind", "sharing"}))
    if config.get("apiVersion") != GPU_CONFIG_API:
        raise InvalidInput(
            f"{field}.apiVersion",
            config.get("apiVersion"),
            "is not the driver's config API",
            f"Use {GPU_CONFIG_API}",
        )
    if config.get("kind") != "GpuConfig":
        raise InvalidInput(f"{field}.kind", config.get("kind"), "is not a whole-GPU config", "Use GpuConfig")
    if config.get("sharing") is None:
        return ()
    field = f"{field}.sharing"
    sharing = _object(config["sharing"], field, frozenset({"strategy", "timeSlicingConfig", "mpsConfig"}))
    strategy = sharing.get("strategy")
    if strategy not in STRATEGY_GATES:
        why = (
            "is a strategy the driver does not enable"
            if strategy == "Fabric"
            else "is not a GPU sharing strategy"
        )
        raise InvalidInput(f"{field}.strategy", strategy, why, f"Use {' or '.join(STRATEGY_GATES)}")
    other = "mpsConfig" if strategy == TIME_SLICING else "timeSlicingConfig"
    if sharing.get(other) is not None:
        raise InvalidInput(
            f"{field}.{other}",
            sharing[other],
            f"cannot be used with the {strategy} strategy",
            f"Remove it, or set strategy to {MPS if strategy == TIME_SLICING else TIME_SLICING}",
        )
    if strategy == TIME_SLICING:
        _check_time_slicing(sharing, field)
    else:
        _check_mps(sharing, field, devices)
    return (STRATEGY_GATES[strategy],)


def _check_time_slicing(sharing: Mapping[str, Any], field: str) -> None:
    """Refuse a ``timeSlicingConfig`` the driver refuses: unknown fields or an unknown interval."""
    slicing = _object(
        sharing.get("timeSlicingConfig") or {}, f"{field}.timeSlicingConfig", frozenset({"interval"})
    )
    interval = slicing.get("interval", INTERVALS[0])  # Normalize: the Default interval
    if interval not in INTERVALS:
        raise InvalidInput(
            f"{field}.timeSlicingConfig.interval",
            interval,
            "is not a time-slice interval",
            f"Use one of {', '.join(INTERVALS)}",
        )


def _check_mps(sharing: Mapping[str, Any], field: str, devices: int) -> None:
    """Refuse an ``mpsConfig`` the driver refuses: unknown fields, a bad thread share or memory limit."""
    keys = frozenset(
        {
            "defaultActiveThreadPercentage",
            "defaultPinnedDeviceMemoryLimit",
            "defaultPerDevicePinnedMemoryLimit",
        }
    )
    field = f"{field}.mpsConfig"
    mps = _object(sharing.get("mpsConfig") or {}, field, keys)
    percent = mps.get("defaultActiveThreadPercentage")
    if percent is not None and (
        isinstance(percent, bool) or not isinstance(percent, int) or not 0 <= percent <= 100
    ):
        raise InvalidInput(
            f"{field}.defaultActiveThreadPercentage",
            percent,
            "must be a whole number from 0 to 100",
            "e.g. 50 for half the GPU's threads",
        )
    if mps.get("defaultPinnedDeviceMemoryLimit") is not None:
        _mebibytes(mps["defaultPinnedDeviceMemoryLimit"], f"{field}.defaultPinnedDeviceMemoryLimit")
    per_device = mps.get("defaultPerDevicePinnedMemoryLimit") or {}
    if not isinstance(per_device, Mapping):
        raise InvalidInput(
            f"{field}.defaultPerDevicePinnedMemoryLimit", per_device, "is not an object", 'e.g. {"0": "8Gi"}'
        )
    for key, limit in per_device.items():
        at = f"{field}.defaultPerDevicePinnedMemoryLimit.{key}"
        if not (str(key).startswith(("GPU-", "MIG-")) or (str(key).isdigit() and int(key) < devices)):
            raise InvalidInput(
                at,
                key,
                f"is neither a device UUID nor an index below {devices}, the devices the claim allocates",
                "Key it by a device's uuid or its index in the claim",
            )
        _mebibytes(limit, at)
