"""DRA devices for a simulated fleet: the ``DeviceClass``es and per-node ``ResourceSlice``s NVIDIA's DRA
driver would publish, so the real kube-scheduler allocates GPUs to ResourceClaims and KWOK runs the pods.

Kubernetes 1.35 serves ``resource.k8s.io/v1`` and runs DRA (GA, locked on) with no flags. Each GPU node gets
one slice, pool = node name, with exactly the attributes the driver publishes (:data:`gpuplace.dra.PUBLISHED`,
names, domains and types; tests/unit/test_dra.py holds every published device to that table), nothing of
gpuplace's own:

- a whole GPU is ``gpu-<index>`` (class ``gpu.nvidia.com``): ``type``, ``uuid``, ``productName``,
  ``brand``, ``architecture`` and ``cudaComputeCapability`` (from the catalog), ``driverVersion`` and
  ``cudaDriverVersion`` (:data:`DRIVER_VERSIONS`, one driver release for the whole fleet),
  ``resource.kubernetes.io/pciBusID``, ``resource.kubernetes.io/pcieRoot`` (one root per PCIe switch of the
  fleet file), ``resource.kubernetes.io/numaNode``; capacity ``memory``. ``addressingMode``, published only
  on coherent-memory (Grace) systems, is not simulated;
- a MIG slice is a device of its own (class ``mig.nvidia.com``, ``type: mig``, ``profile``,
  ``parentUUID``, its GPU's other attributes), and its GPU is not published whole, as the driver does for
  GPUs that are MIG-enabled with a fixed layout; capacity ``memory`` (the profile's; the engine counts and
  memory slices the driver adds are not simulated). Dynamic MIG (partitionable devices with shared
  counters, KEP-4815) is the alpha gate ``DRAPartitionableDevices`` in 1.35, off by default, and not used.

The driver publishes no NVLink attribute, so neither does this: a claim keeps a tensor-parallel group in one
node's NVLink island by its pool (the node), not by an attribute (gpuplace.manifests.dra_claims).
UUIDs are deterministic (uuid5 of the device id).
Devices the inventory marks as allocated (any share) are held by a ResourceClaim per node, selected by
UUID, and a pause pod in ``gpuplace-system`` that the scheduler places, so its allocator sees them in use
exactly as it would a running workload's. The device-plugin view (``nvidia.com/gpu`` on the Node) and the
DRA view are independent here: a real node runs one of the two per GPU.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gpuplace import dra as d
from gpuplace.catalog.gpus import GpuCatalog
from gpuplace.testenv.nodes import PLACEHOLDER_LABEL, PLACEHOLDER_NAMESPACE
from gpuplace.types import GpuDevice, Inventory, Node

if TYPE_CHECKING:
    from gpuplace.k8s import Api
    from gpuplace.k8s.retry import Deadline

RESOURCE_API = "resource.k8s.io/v1"
_UUID_NAMESPACE = uuid.UUID("5d1c9a4e-3f0b-4c1e-9a4b-6b7f2d0e8c11")
# The driver's versions as it publishes them (semver of NVML's strings): R580 with CUDA 13.0
DRIVER_VERSIONS = {d.DRIVER_VERSION: {"version": "580.95.5"}, d.CUDA_DRIVER_VERSION: {"version": "13.0.0"}}


def device_classes() -> list[dict[str, Any]]:
    """``gpu.nvidia.com`` and ``mig.nvidia.com``, with the selectors of NVIDIA's Helm chart."""
    return [
        {
            "apiVersion": RESOURCE_API,
            "kind": "DeviceClass",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": "gpuplace"}},
            "spec": {
                "selectors": [
                    {
                        "cel": {
                            "expression": f"device.driver == '{d.DRIVER}' && "
                            f"device.attributes['{d.DRIVER}'].type == '{kind}'"
                        }
                    }
                ]
            },
        }
        for name, kind in ((d.GPU_CLASS, "gpu"), (d.MIG_CLASS, "mig"))
    ]


def device_uuid(device: GpuDevice) -> str:
    prefix = "MIG" if device.mig_profile else "GPU"
    return f"{prefix}-{uuid.uuid5(_UUID_NAMESPACE, device.id)}"


def _pcie_roots(node: Node) -> dict[str, str]:
    """One PCIe root per switch of the fleet file, ``pci<domain>:<bus>`` as sysfs names them."""
    order: list[str] = []
    for g in sorted(node.gpus, key=lambda g: (g.index, g.id)):
        key = g.pcie_switch or f"gpu{g.index}"
        if key not in order:
            order.append(key)
    return {key: f"pci{k:04x}:00" for k, key in enumerate(order)}


def _catalog_facts(device: GpuDevice, catalog: GpuCatalog) -> dict[str, dict[str, str]]:
    spec = catalog.gpus.get(device.gpu)
    if spec is None:
        return {}
    major, _, minor = spec.compute_capability.partition(".")
    return {
        d.ARCHITECTURE: {"string": spec.architecture.capitalize()},
        d.CUDA_COMPUTE_CAPABILITY: {"version": f"{major}.{minor or 0}.0"},
    }


def _device(
    g: GpuDevice, roots: Mapping[str, str], parents: Mapping[int, GpuDevice], catalog: GpuCatalog
) -> dict[str, Any]:
    root = roots[g.pcie_switch or f"gpu{g.index}"]
    domain = int(root[3:7], 16)
    attrs: dict[str, Any] = {
        d.TYPE: {"string": "mig" if g.mig_profile else "gpu"},
        d.UUID: {"string": device_uuid(g)},
        d.PRODUCT_NAME: {"string": d.product_name(g)},
        d.BRAND: {"string": "Nvidia"},
        **_catalog_facts(g, catalog),
        **DRIVER_VERSIONS,
        d.PCIE_ROOT: {"string": root},
        d.PCI_BUS_ID: {"string": f"{domain:04x}:{0x10 + g.index:02x}:00.0"},
        d.NUMA_NODE: {"int": g.numa_node},
    }
    if g.mig_profile:
        attrs[d.PROFILE] = {"string": g.mig_profile}
        parent = parents.get(g.index)
        attrs[d.PARENT_UUID] = {"string": device_uuid(parent) if parent else ""}
    return {
        "name": d.device_name(g),
        "attributes": attrs,
        "capacity": {d.MEMORY: {"value": f"{round(g.memory_gib * 1024)}Mi"}},
    }


def resource_slice(node: Node, catalog: GpuCatalog | None = None) -> dict[str, Any] | None:
    """The node's ResourceSlice (None for a node without GPUs); ``catalog`` defaults to the bundled one."""
    if not node.gpus:
        return None
    if catalog is None:
        from gpuplace.catalog import load_gpu_catalog

        catalog = load_gpu_catalog()
    roots = _pcie_roots(node)
    # The parent of a MIG slice is the physical GPU with that index, whether or not it is published.
    parents = {
        g.index: GpuDevice(id=f"{node.name}/gpu{g.index}", index=g.index, gpu=g.gpu, product=g.product)
        for g in node.gpus
    }
    devices = [_device(g, roots, parents, catalog) for g in sorted(node.gpus, key=lambda g: (g.index, g.id))]
    return {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceSlice",
        "metadata": {
            "name": slice_name(node.name),
            "labels": {"app.kubernetes.io/managed-by": "gpuplace"},
        },
        "spec": {
            "driver": d.DRIVER,
            "nodeName": node.name,
            "pool": {"name": node.name, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def slice_name(node: str) -> str:
    return f"{node}-{d.DRIVER}"


def resource_slices(inventory: Inventory, catalog: GpuCatalog | None = None) -> list[dict[str, Any]]:
    if catalog is None:
        from gpuplace.catalog import load_gpu_catalog

        catalog = load_gpu_catalog()
    return [s for s in (resource_slice(n, catalog) for n in inventory.nodes) if s is not None]


def placeholder_claim(node: Node) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(ResourceClaim, Pod) holding the node's allocated devices through DRA; None if none are."""
    held = [g for g in node.gpus if g.allocated > 0]
    if not held:
        return None
    name = f"allocated-dra-{node.name}"[:253]
    requests = []
    for req, cls, devices in (
        ("gpus", d.GPU_CLASS, [g for g in held if not g.mig_profile]),
        ("migs", d.MIG_CLASS, [g for g in held if g.mig_profile]),
    ):
        if not devices:
            continue
        uuids = ", ".join(f"'{device_uuid(g)}'" for g in devices)
        requests.append(
            {
                "name": req,
                "exactly": {
                    "deviceClassName": cls,
                    "allocationMode": "ExactCount",
                    "count": len(devices),
                    "selectors": [{"cel": {"expression": f"{d.cel_attribute(d.UUID)} in [{uuids}]"}}],
                },
            }
        )
    labels = {PLACEHOLDER_LABEL: "true", "app.kubernetes.io/managed-by": "gpuplace"}
    claim = {
        "apiVersion": RESOURCE_API,
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": PLACEHOLDER_NAMESPACE, "labels": labels},
        "spec": {"devices": {"requests": requests}},
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": PLACEHOLDER_NAMESPACE, "labels": labels},
        "spec": {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchFields": [
                                    {"key": "metadata.name", "operator": "In", "values": [node.name]}
                                ]
                            }
                        ]
                    }
                }
            },
            "tolerations": [{"operator": "Exists"}],
            "resourceClaims": [{"name": "held", "resourceClaimName": name}],
            "containers": [
                {
                    "name": "allocated",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"claims": [{"name": "held"}]},
                }
            ],
        },
    }
    return claim, pod


def publish(api: Api, inventory: Inventory, *, deadline: Deadline) -> dict[str, int]:
    """Apply the DeviceClasses and the fleet's ResourceSlices, hold its allocated devices, and wait until
    the scheduler has allocated those holds; counts of what was published."""
    from gpuplace.k8s.errors import Conflict

    for obj in device_classes():
        api.apply(obj, force=True, deadline=deadline)
    slices = resource_slices(inventory)
    for obj in slices:
        api.apply(obj, force=True, deadline=deadline)
    holds = [h for h in (placeholder_claim(n) for n in inventory.nodes) if h is not None]
    if holds:
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PLACEHOLDER_NAMESPACE}}
        api.apply(ns, deadline=deadline)
        account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
        api.apply(account, PLACEHOLDER_NAMESPACE, deadline=deadline)
    for claim, pod in holds:
        for obj in (claim, pod):
            with contextlib.suppress(Conflict):  # held since an earlier add_fleet of the same fleet
                api.create(obj, PLACEHOLDER_NAMESPACE, deadline=deadline)
    waiting = {c["metadata"]["name"] for c, _ in holds}
    while waiting:
        for name in sorted(waiting):
            claim = api.get(RESOURCE_API, "ResourceClaim", name, PLACEHOLDER_NAMESPACE, deadline=deadline)
            if (claim.get("status") or {}).get("allocation"):
                waiting.discard(name)
        if waiting and deadline.expired:
            from gpuplace.testenv.controlplane import ControlPlaneError

            raise ControlPlaneError(
                f"the scheduler did not allocate the held devices of {sorted(waiting)} in time; "
                "see the kube-scheduler log"
            )
        if waiting:
            time.sleep(0.1)
    return {
        "device_classes": 2,
        "resource_slices": len(slices),
        "dra_devices": sum(len(s["spec"]["devices"]) for s in slices),
        "held_claims": len(holds),
    }
