"""DRA without a cluster: the devices the testenv publishes (schema-valid for Kubernetes 1.35, named and
attributed as NVIDIA's driver does), the round trip published device → inventory id, claim templates that
keep a replica's GPUs on one PCIe root / NUMA node (NVLink: the node's pool), and reading placements from
API objects (claims and pods as the API server returns them). The driver's attribute table and config
checks: tests/unit/test_dra_driver.py."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import kubernetes_validate
import pytest
from test_manifests import plan_for

from gpuplace import dra as vocab
from gpuplace.inventory import load_inventory
from gpuplace.k8s.dra import (
    DEVICE_LEVEL,
    AllocatedDevice,
    PodPlacement,
    claim_names,
    device_mismatches,
    device_plugin_gpus,
)
from gpuplace.manifests import ServingOptions, build_manifests
from gpuplace.manifests.dra_claims import claim_locality, resource_claim_template
from gpuplace.testenv import dra as testenv_dra
from gpuplace.types.plan import PlacementPlan

K8S = "1.35.0"
FLEETS = ("h100-nvlink", "mixed-a100-h100-l4")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


@pytest.mark.parametrize("fleet", FLEETS)
def test_published_objects_validate_and_cover_every_gpu(fleet: str) -> None:
    inv = load_inventory(fleet)
    slices = testenv_dra.resource_slices(inv)
    for obj in [*testenv_dra.device_classes(), *slices]:
        kubernetes_validate.validate(obj, K8S, strict=True)
    assert len(slices) == sum(1 for n in inv.nodes if n.gpus)
    published = {(s["spec"]["nodeName"], dev["name"]) for s in slices for dev in s["spec"]["devices"]}
    assert len(published) == sum(len(n.gpus) for n in inv.nodes)  # every GPU or MIG slice once
    for _, name in published:
        assert DNS_LABEL.match(name), name
    for s in slices:
        assert s["spec"]["pool"] == {"name": s["spec"]["nodeName"], "generation": 1, "resourceSliceCount": 1}
        for dev in s["spec"]["devices"]:
            assert len(dev["attributes"]) + len(dev["capacity"]) <= 32  # the API's per-device limit


@pytest.mark.parametrize("fleet", FLEETS)
def test_every_published_device_maps_back_to_its_inventory_id(fleet: str) -> None:
    inv = load_inventory(fleet)
    for s in testenv_dra.resource_slices(inv):
        node = s["spec"]["nodeName"]
        devices = [vocab.published_device(d) for d in s["spec"]["devices"]]
        ids = [vocab.inventory_id(node, d, devices) for d in devices]
        assert sorted(ids) == sorted(g.id for g in inv.node(node).gpus)


def test_mig_slices_map_by_rank_when_named_the_nvidia_way() -> None:
    # NVIDIA names MIG devices gpu-<parent minor>-mig-<profile>-<giProfileId>-<start> and publishes no
    # parent index: the parent is the name's minor, and the rank of a slice among its GPU's slices of the
    # same profile (by name) is the inventory's n.
    def mig(name: str, profile: str) -> dict[str, Any]:
        return {"name": name, "attributes": {"type": {"string": "mig"}, "profile": {"string": profile}}}

    raw = [
        mig("gpu-4-mig-1g10gb-19-6", "1g.10gb"),
        mig("gpu-4-mig-1g10gb-19-4", "1g.10gb"),
        mig("gpu-4-mig-3g40gb-9-0", "3g.40gb"),
    ]
    devices = [vocab.published_device(d) for d in raw]
    assert [vocab.inventory_id("n", d, devices) for d in devices] == [
        "n/gpu4/1g.10gb-1",
        "n/gpu4/1g.10gb-0",
        "n/gpu4/3g.40gb-0",
    ]


def test_a_device_says_which_gpu_by_its_drivers_name_or_an_older_releases_index() -> None:
    # The current driver publishes no index: its device name gpu-<minor> says which GPU it is.
    def dev(name: str, kind: str, **ints: int) -> vocab.PublishedDevice:
        attrs = {"type": {"string": kind}, **{k: {"int": v} for k, v in ints.items()}}
        return vocab.published_device({"name": name, "attributes": attrs})

    assert dev("gpu-3", "gpu").index == 3 and vocab.inventory_id("n", dev("gpu-3", "gpu")) == "n/gpu3"
    assert dev("gpu-3", "gpu", index=5).index == 5  # an older release's index attribute wins
    assert dev("gpu-3-mig-1g10gb-19-0", "mig", parentIndex=1).index == 1
    # a name not of the driver's form, or of the other kind, says nothing: the id is not guessed
    for unknown in (dev("tpu-3", "gpu"), dev("gpu-3-mig-1g10gb-19-0", "gpu"), dev("gpu-3", "mig")):
        assert unknown.index is None and vocab.inventory_id("n", unknown) == ""


def test_attributes_are_qualified_as_cel_sees_them() -> None:
    attrs = vocab.attributes_of(
        {
            "attributes": {
                "productName": {"string": "x"},
                "resource.kubernetes.io/pcieRoot": {"string": "pci0000:00"},
            }
        }
    )
    assert attrs == {"gpu.nvidia.com/productName": "x", "resource.kubernetes.io/pcieRoot": "pci0000:00"}
    assert vocab.cel_attribute(vocab.PCIE_ROOT) == 'device.attributes["resource.kubernetes.io"].pcieRoot'
    assert vocab.cel_attribute(vocab.PROFILE) == 'device.attributes["gpu.nvidia.com"].profile'


def test_held_devices_are_selected_exactly_by_uuid() -> None:
    inv = load_inventory("mixed-a100-h100-l4")
    holds = {n.name: testenv_dra.placeholder_claim(n) for n in inv.nodes}
    assert {name for name, h in holds.items() if h} == {
        n.name for n in inv.nodes if any(g.allocated for g in n.gpus)
    }
    claim, pod = holds["a100-mig-0"]  # type: ignore[misc]
    kubernetes_validate.validate(claim, K8S, strict=True)
    kubernetes_validate.validate(pod, K8S, strict=True)
    (request,) = claim["spec"]["devices"]["requests"]
    held = [g for g in inv.node("a100-mig-0").gpus if g.allocated]
    assert request["exactly"]["deviceClassName"] == "mig.nvidia.com"
    assert request["exactly"]["count"] == len(held) == 2
    for g in held:
        assert testenv_dra.device_uuid(g) in request["exactly"]["selectors"][0]["cel"]["expression"]


def _multi_gpu(
    plan: PlacementPlan, tp: int, tiers: tuple[str, ...], numa: tuple[int | None, ...]
) -> PlacementPlan:
    base = plan.placements[0]
    placements = tuple(
        replace(base, replica=i, interconnect=t, numa_node=n)
        for i, (t, n) in enumerate(zip(tiers, numa, strict=True))
    )
    return replace(plan, chosen=replace(plan.chosen, tp=tp, replicas=len(tiers)), placements=placements)


@pytest.mark.parametrize(
    ("tiers", "numa", "attribute"),
    [
        (("nvlink", "nvlink"), (0, None), ""),  # no NVLink attribute: the node's pool keeps it
        (("nvlink",), (0,), ""),  # not narrowed to one NUMA node the plan did not need
        (("pcie-switch",), (1,), "resource.kubernetes.io/pcieRoot"),
        (("numa",), (1,), "resource.kubernetes.io/numaNode"),
        (("nvlink", "pcie-switch"), (0, 1), "resource.kubernetes.io/numaNode"),
        (("nvlink", "cross-numa"), (0, None), ""),
    ],
)
def test_claim_template_keeps_the_planned_locality(
    tiers: tuple[str, ...], numa: tuple[int | None, ...], attribute: str
) -> None:
    inv = load_inventory("h100-nvlink")
    plan = _multi_gpu(plan_for(inv, ("whole",)), 4, tiers, numa)
    assert claim_locality(plan) == attribute
    template = resource_claim_template(plan, inv, ServingOptions())
    kubernetes_validate.validate(template, K8S, strict=True)
    assert vocab.unpublished(template) == []
    devices = template["spec"]["spec"]["devices"]
    assert devices["requests"][0]["exactly"]["count"] == 4
    assert devices.get("constraints", []) == (
        [{"requests": ["gpus"], "matchAttribute": attribute}] if attribute else []
    )


def test_single_gpu_and_mig_claims_need_no_constraint_and_validate() -> None:
    mixed = load_inventory("mixed-a100-h100-l4")
    for kinds in (("whole",), ("mig",)):
        plan = plan_for(mixed, kinds, gpus=("A100-SXM4-80GB",))
        assert plan.chosen.gpus_per_replica == 1
        for doc in build_manifests(plan, mixed).alternatives["dra.yaml"]:
            kubernetes_validate.validate(doc, K8S, strict=True)
        template = resource_claim_template(plan, mixed, ServingOptions())
        assert "constraints" not in template["spec"]["spec"]["devices"]
    mig = resource_claim_template(plan_for(mixed, ("mig",)), mixed, ServingOptions())
    exactly = mig["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert exactly["deviceClassName"] == "mig.nvidia.com"
    assert (
        exactly["selectors"][0]["cel"]["expression"]
        == 'device.attributes["gpu.nvidia.com"].profile == "1g.10gb"'
    )


def test_claim_names_come_from_the_spec_or_the_pod_status() -> None:
    pod = {
        "spec": {
            "resourceClaims": [
                {"name": "gpus", "resourceClaimTemplateName": "t"},
                {"name": "x", "resourceClaimName": "shared"},
            ]
        },
        "status": {"resourceClaimStatuses": [{"name": "gpus", "resourceClaimName": "p-gpus-abcde"}]},
    }
    assert claim_names(pod) == [("gpus", "p-gpus-abcde"), ("x", "shared")]
    assert claim_names(
        {"spec": {"resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "t"}]}}
    ) == [("gpus", "")]


def test_device_plugin_gpus_counts_whole_gpus_and_mig_slices() -> None:
    pod = {
        "spec": {
            "containers": [
                {"resources": {"limits": {"nvidia.com/gpu": "2", "cpu": "4"}}},
                {"resources": {"limits": {"nvidia.com/mig-1g.10gb": 1}}},
            ]
        }
    }
    assert device_plugin_gpus(pod) == 3


def _dev(gpu_id: str) -> AllocatedDevice:
    return AllocatedDevice(
        claim="c", request="gpus", driver="gpu.nvidia.com", pool="n", device="d", gpu_id=gpu_id
    )


def test_mismatches_compare_devices_only_when_the_api_has_them() -> None:
    good = PodPlacement("p", "n", DEVICE_LEVEL, (_dev("n/gpu0"), _dev("n/gpu1")))
    assert device_mismatches(good, "n", ["n/gpu1", "n/gpu0"]) == ()
    moved = PodPlacement("p", "n", DEVICE_LEVEL, (_dev("n/gpu0"), _dev("n/gpu2")))
    assert device_mismatches(moved, "n", ["n/gpu0", "n/gpu1"]) == ("pod p got n/gpu2 instead of n/gpu1",)
    node_only = PodPlacement("p", "m", "node", device_plugin_gpus=2)
    assert device_mismatches(node_only, "n", ["n/gpu0", "n/gpu1"]) == ("pod p on m, planned n",)
    assert device_mismatches(PodPlacement("p", "", "none"), "n", []) == ("pod p is not scheduled",)
