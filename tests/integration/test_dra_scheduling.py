"""DRA on the session's control plane: the simulated fleets published as NVIDIA-driver devices, claims
allocated by the real kube-scheduler (``matchAttribute`` on the PCIe root; a TP group in one node's NVLink
island by the node's pool, as NVIDIA's driver publishes no NVLink attribute), pods run by KWOK,
placements read back from the claims' ``status.allocation``, provisioning timed from watch events, and the
faults: an unsatisfiable claim, a ResourceSlice removed while waiting, kube-apiserver restarting while
waiting."""

from __future__ import annotations

import contextlib
import math
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from gpuplace.inventory import load_inventory
from gpuplace.k8s import Api
from gpuplace.k8s.dra import DEVICE_LEVEL, NODE_LEVEL, pending_reason, read_placements
from gpuplace.k8s.nodes import register_node
from gpuplace.k8s.provisioning import PodTimer, ProvisioningTimeout
from gpuplace.k8s.retry import Deadline
from gpuplace.testenv import ControlPlane
from gpuplace.testenv import dra as testenv_dra
from gpuplace.testenv.nodes import PLACEHOLDER_NAMESPACE, node_object
from gpuplace.types import GpuDevice, Node, Taint

pytestmark = [pytest.mark.integration, pytest.mark.controlplane]
RESOURCE = "resource.k8s.io/v1"
UNSATISFIABLE = "cannot allocate all claims"


def claim_template(name: str, count: int, match: str = "", cls: str = "gpu.nvidia.com") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "devices": {
            "requests": [
                {
                    "name": "gpus",
                    "exactly": {"deviceClassName": cls, "allocationMode": "ExactCount", "count": count},
                }
            ]
        }
    }
    if match:
        spec["devices"]["constraints"] = [{"requests": ["gpus"], "matchAttribute": match}]
    return {
        "apiVersion": RESOURCE,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": spec},
    }


def pod(name: str, *, node: str = "", template: str = "", gpus: int = 0) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "tolerations": [{"operator": "Exists"}],
        "containers": [{"name": "server", "image": "registry.k8s.io/pause:3.10", "resources": {}}],
    }
    if node:
        term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
        spec["affinity"] = {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
        }
    if template:
        spec["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": template}]
        spec["containers"][0]["resources"]["claims"] = [{"name": "gpus"}]
    if gpus:
        spec["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": str(gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"test": name}},
        "spec": spec,
    }


def attribute(api: Api, node: str, device: str, name: str) -> Any:
    (slice_,) = api.list(
        RESOURCE, "ResourceSlice", field_selector=f"spec.nodeName={node}", deadline=Deadline(10)
    )
    dev = next(d for d in slice_["spec"]["devices"] if d["name"] == device)
    return next(iter(dev["attributes"][name].values()))


def test_fleets_are_published_and_held_devices_allocated(kube_api: Api) -> None:
    deadline = Deadline(30)
    classes = {c["metadata"]["name"] for c in kube_api.list(RESOURCE, "DeviceClass", deadline=deadline)}
    assert {"gpu.nvidia.com", "mig.nvidia.com"} <= classes
    slices = kube_api.list(
        RESOURCE, "ResourceSlice", field_selector="spec.driver=gpu.nvidia.com", deadline=deadline
    )
    published = {s["spec"]["nodeName"]: len(s["spec"]["devices"]) for s in slices}
    mixed = load_inventory("mixed-a100-h100-l4")
    for fleet in (load_inventory("h100-nvlink"), mixed):
        for node in fleet.nodes:
            assert published[node.name] == len(node.gpus)
    held = read_placements(
        kube_api,
        PLACEHOLDER_NAMESPACE,
        label_selector="gpuplace.io/placeholder=true",
        deadline=deadline,
        inventory=mixed,
    )
    by_node = {p.node: p for p in held if p.level == DEVICE_LEVEL}
    for node in mixed.nodes:
        allocated = sorted(g.id for g in node.gpus if g.allocated > 0)
        if allocated:
            assert by_node[node.name].gpu_ids == tuple(allocated)
    # The extended-resource placeholders are there too, and say only where they are.
    assert any(p.level == NODE_LEVEL and not p.gpu_ids for p in held)


def test_pcie_root_constraint_allocates_gpus_behind_one_switch(kube_api: Api, kube_namespace: str) -> None:
    kube_api.create(claim_template("pair", 2, "resource.kubernetes.io/pcieRoot"), kube_namespace)
    with PodTimer(kube_api, kube_namespace, label_selector="test=llm") as timer:
        kube_api.create(pod("llm", node="h100-a-0", template="pair"), kube_namespace)
        (times,) = timer.wait(1, deadline=Deadline(60))
    (placement,) = read_placements(
        kube_api,
        kube_namespace,
        label_selector="test=llm",
        deadline=Deadline(10),
        inventory=load_inventory("h100-nvlink"),
    )
    assert placement.node == "h100-a-0" and placement.level == DEVICE_LEVEL
    indices = sorted(d.gpu_index for d in placement.devices if d.gpu_index is not None)
    assert len(indices) == 2 and indices[0] // 2 == indices[1] // 2  # HGX: GPUs 2k and 2k+1 share a switch
    assert placement.gpu_ids == tuple(f"h100-a-0/gpu{i}" for i in indices)
    roots = {
        attribute(kube_api, "h100-a-0", d.device, "resource.kubernetes.io/pcieRoot")
        for d in placement.devices
    }
    assert len(roots) == 1
    assert times.seen_created and times.node == "h100-a-0"
    assert times.created_s <= times.scheduled_s <= times.ready_s and times.provisioning_s < 30


def test_a_tp_claim_stays_in_its_nodes_nvlink_island_by_the_pool(kube_api: Api, kube_namespace: str) -> None:
    # No attribute says NVLink (the driver publishes none): the claim's devices come from the pool of the
    # node the pod runs on, which is one NVSwitch island on an HGX board.
    kube_api.create(claim_template("island", 4), kube_namespace)
    with PodTimer(kube_api, kube_namespace, label_selector="test=llm") as timer:
        kube_api.create(pod("llm", node="a100-0", template="island"), kube_namespace)
        timer.wait(1, deadline=Deadline(60))
    (placement,) = read_placements(kube_api, kube_namespace, label_selector="test=llm", deadline=Deadline(10))
    assert len(placement.gpu_ids) == 4 and {d.pool for d in placement.devices} == {"a100-0"}
    # a100-0's GPUs 0 and 1 are held by the fleet's allocated workload: never handed out again.
    assert not {"a100-0/gpu0", "a100-0/gpu1"} & set(placement.gpu_ids)
    islands = {g.nvlink_island for g in load_inventory("mixed-a100-h100-l4").node("a100-0").gpus}
    assert islands == {"nvswitch"}


def test_an_unsatisfiable_claim_leaves_the_pod_pending_with_the_schedulers_reason(
    kube_api: Api, kube_namespace: str
) -> None:
    # l4-a-0 has two GPUs under each PCIe root: no three of them share one.
    kube_api.create(claim_template("island", 3, "resource.kubernetes.io/pcieRoot"), kube_namespace)
    with PodTimer(kube_api, kube_namespace, label_selector="test=llm") as timer:
        kube_api.create(pod("llm", node="l4-a-0", template="island"), kube_namespace)
        with pytest.raises(ProvisioningTimeout) as failed:
            timer.wait(1, deadline=Deadline(4))
    assert UNSATISFIABLE in str(failed.value) and failed.value.reasons
    reason = pending_reason(kube_api, kube_namespace, "llm", deadline=Deadline(10))
    assert reason.startswith("Unschedulable: ") and UNSATISFIABLE in reason
    (placement,) = read_placements(kube_api, kube_namespace, label_selector="test=llm", deadline=Deadline(10))
    assert placement.node == "" and placement.gpu_ids == ()
    assert any("not allocated" in n for n in placement.notes)


def test_device_plugin_gpus_are_node_level_only(kube_api: Api, kube_namespace: str) -> None:
    with PodTimer(kube_api, kube_namespace, label_selector="test=llm") as timer:
        kube_api.create(pod("llm", node="h100-b-0", gpus=2), kube_namespace)
        timer.wait(1, deadline=Deadline(60))
    (placement,) = read_placements(kube_api, kube_namespace, label_selector="test=llm", deadline=Deadline(10))
    assert placement.node == "h100-b-0" and placement.level == NODE_LEVEL
    assert placement.gpu_ids == () and placement.device_plugin_gpus == 2
    assert any("node level only" in n for n in placement.notes)


# --- faults -----------------------------------------------------------------------------------------------


@pytest.fixture
def spare_node(kube_api: Api) -> Iterator[Node]:
    """A two-GPU node of the test's own: its ResourceSlice can go without touching the fleets."""
    name = f"dra-spare-{uuid.uuid4().hex[:6]}"
    gpus = tuple(
        GpuDevice(
            id=f"{name}/gpu{i}",
            index=i,
            gpu="H100-SXM5-80GB",
            product="NVIDIA-H100-80GB-HBM3",
            memory_gib=80,
            pcie_switch="pcie0",
            nvlink_island="nvswitch",
        )
        for i in range(2)
    )
    node = Node(name=name, gpus=gpus, taints=(Taint("gpuplace.io/test", "spare", "NoSchedule"),))
    deadline = Deadline(60)
    register_node(kube_api, node_object(node), deadline=deadline)
    while not any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (kube_api.get("v1", "Node", name, deadline=deadline).get("status") or {}).get("conditions")
        or ()
    ):
        time.sleep(0.1)
    yield node
    kube_api.delete(
        {"apiVersion": RESOURCE, "kind": "ResourceSlice", "metadata": {"name": testenv_dra.slice_name(name)}}
    )
    kube_api.delete({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})


def test_resource_slice_removed_during_a_wait(kube_api: Api, kube_namespace: str, spare_node: Node) -> None:
    slice_ = testenv_dra.resource_slice(spare_node)
    assert slice_ is not None
    kube_api.apply(slice_, force=True)
    kube_api.create(claim_template("pair", 2, "resource.kubernetes.io/pcieRoot"), kube_namespace)
    with PodTimer(kube_api, kube_namespace, label_selector="test=llm") as timer:
        assert kube_api.delete(slice_)  # gone before the scheduler could use it
        kube_api.create(pod("llm", node=spare_node.name, template="pair"), kube_namespace)
        with pytest.raises(ProvisioningTimeout) as failed:
            timer.wait(1, deadline=Deadline(4))
        assert UNSATISFIABLE in str(failed.value)
        kube_api.apply(slice_, force=True)  # the driver publishes again: the scheduler retries on its own
        (times,) = timer.wait(1, deadline=Deadline(60))
    assert times.node == spare_node.name
    # Removed after allocation: the pod keeps its devices, and the reading says it cannot name them now.
    kube_api.delete(slice_)
    (placement,) = read_placements(kube_api, kube_namespace, label_selector="test=llm", deadline=Deadline(10))
    assert placement.level == DEVICE_LEVEL and len(placement.devices) == 2 and placement.gpu_ids == ()
    assert all("not published" in n for n in placement.notes)
    assert kube_api.get("v1", "Pod", "llm", kube_namespace)["status"]["phase"] == "Running"


def test_apiserver_restart_while_waiting(
    kube_api: Api, kube_namespace: str, controlplane: ControlPlane
) -> None:
    kube_api.create(claim_template("pair", 2, "resource.kubernetes.io/pcieRoot"), kube_namespace)
    controlplane.stop_process("kube-scheduler")  # the pod waits, unbound, across the restart
    try:
        with PodTimer(kube_api, kube_namespace, label_selector="test=llm") as timer:
            kube_api.create(pod("llm", node="h100-b-1", template="pair"), kube_namespace)
            down_s = controlplane.restart("kube-apiserver")
            controlplane.start_process("kube-scheduler")
            (times,) = timer.wait(1, deadline=Deadline(90))
    finally:
        with contextlib.suppress(Exception):
            if not controlplane.alive().get("kube-scheduler"):
                controlplane.start_process("kube-scheduler")
    assert down_s > 0 and times.seen_created
    assert times.scheduled_s - times.created_s >= down_s * 0.5  # bound only after the restart
    assert not math.isnan(times.ready_s) and times.node == "h100-b-1"
    (placement,) = read_placements(kube_api, kube_namespace, label_selector="test=llm", deadline=Deadline(30))
    assert len(placement.gpu_ids) == 2
