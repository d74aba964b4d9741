"""gpuplace against NVIDIA's DRA driver as its source defines it (gpuplace.dra records the files read): the
testenv publishes exactly the driver's attributes (names, domains, types), every claim gpuplace emits (whole
GPUs, tensor-parallel groups, MIG slices, shared GPUs in each sharing mode, the pinned claims of
``deploy --gpu-api dra``) names only what the driver publishes, and the opaque ``GpuConfig`` is refused
where the driver's decoding, ``Normalize`` and ``Validate`` refuse it, field by field."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from test_dra import _multi_gpu
from test_manifests import plan_for

from gpuplace import dra as vocab
from gpuplace.errors import InvalidInput
from gpuplace.inventory import load_inventory
from gpuplace.manifests import ServingOptions, build_manifests
from gpuplace.manifests.dra_claims import dra_notes, sharing_config
from gpuplace.manifests.forms import EmitOptions
from gpuplace.manifests.pinned import pinned_dra_objects, shared_config
from gpuplace.testenv import dra as testenv_dra
from gpuplace.types import Inventory
from gpuplace.types.plan import PlacementPlan

MIXED = load_inventory("mixed-a100-h100-l4")
H100 = load_inventory("h100-nvlink")
CLAIMS = ("ResourceClaim", "ResourceClaimTemplate")


@pytest.mark.parametrize("fleet", ["h100-nvlink", "mixed-a100-h100-l4", "gb200-nvl72"])
def test_the_testenv_publishes_exactly_the_drivers_attributes(fleet: str) -> None:
    simulated_absent = {vocab.full_name(vocab.ADDRESSING_MODE)}  # coherent-memory systems only
    for s in testenv_dra.resource_slices(load_inventory(fleet)):
        for dev in s["spec"]["devices"]:
            kind = dev["attributes"]["type"]["string"]
            names = {vocab.full_name(k): v for k, v in dev["attributes"].items()}
            expected = {n for n, a in vocab.PUBLISHED.items() if kind in a.devices} - simulated_absent
            assert set(names) == expected, dev["name"]
            for name, value in names.items():
                assert list(value) == [vocab.PUBLISHED[name].type], (dev["name"], name)
            assert set(dev["capacity"]) <= {c for c, k in vocab.CAPACITIES.items() if kind in k}


def _claims(objects: Any) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] in CLAIMS]


def _emitted(plan: PlacementPlan, inv: Inventory, **emit: Any) -> list[dict[str, Any]]:
    options = EmitOptions(forms=("manifests", "dra"), explicit=True, **emit)
    return _claims(build_manifests(plan, inv, emit=options).alternatives["dra.yaml"])


def _free_shared() -> PlacementPlan:
    busy = plan_for(MIXED, ("shared",))
    return replace(
        busy,
        placements=tuple(
            replace(p, gpu_ids=("l4-shared-1/gpu1",), node="l4-shared-1") for p in busy.placements
        ),
    )


def _every_claim() -> dict[str, list[dict[str, Any]]]:
    tp = plan_for(H100, ("whole",))
    out = {
        "whole": _emitted(plan_for(MIXED, ("whole",)), MIXED),
        "mig": _emitted(plan_for(MIXED, ("mig",)), MIXED),
        "shared time-slicing": _emitted(_free_shared(), MIXED),
        "shared mps": _emitted(_free_shared(), MIXED, sharing="mps"),
        "shared consumable-capacity": _emitted(
            plan_for(MIXED, ("shared",)), MIXED, sharing="consumable-capacity", kube_version="1.36"
        ),
    }
    for tiers, numa in (
        (("nvlink",), (0,)),
        (("pcie-switch",), (0,)),
        (("numa",), (1,)),
        (("nvlink", "numa"), (0, 1)),
    ):
        out[f"tp {'+'.join(tiers)}"] = _emitted(_multi_gpu(tp, 2, tiers, numa), H100)
    plan = _free_shared()
    manifests = build_manifests(plan, MIXED).objects()
    published = {g: (f"GPU-{g}", "gpu") for p in plan.placements for g in p.gpu_ids}
    config = shared_config(out["shared mps"])
    out["pinned mps"] = _claims(pinned_dra_objects(plan, manifests, published, config))
    return out


def test_every_claim_gpuplace_emits_names_only_what_the_driver_publishes() -> None:
    claims = _every_claim()
    for shape, objects in claims.items():
        assert objects, shape
        for claim in objects:
            assert vocab.unpublished(claim) == [], (shape, claim)
    constraints = [c for o in claims["tp pcie-switch"] for c in o["spec"]["spec"]["devices"]["constraints"]]
    assert constraints == [{"requests": ["gpus"], "matchAttribute": vocab.PCIE_ROOT}]
    assert "constraints" not in claims["tp nvlink"][0]["spec"]["spec"]["devices"]


@pytest.mark.parametrize(
    ("devices", "found"),
    [
        (  # gpuplace's old stand-in for NVLink: no driver publishes it
            {"constraints": [{"requests": ["gpus"], "matchAttribute": "gpuplace.io/nvlinkDomain"}]},
            "attribute gpuplace.io/nvlinkDomain",
        ),
        ({"cel": 'device.attributes["gpu.nvidia.com"].index == 0'}, "attribute gpu.nvidia.com/index"),
        ({"cel": 'device.attributes["gpu.nvidia.com"].profile == "1g.10gb"'}, "profile is not published"),
        ({"capacity": {"memorySlice0": "1"}}, "capacity gpu.nvidia.com/memorySlice0"),
        ({"capacity": {"example.com/memory": "1Gi"}}, "capacity example.com/memory"),
    ],
)
def test_a_claim_naming_what_the_driver_does_not_publish_is_caught(
    devices: dict[str, Any], found: str
) -> None:
    exactly: dict[str, Any] = {
        "deviceClassName": "gpu.nvidia.com",
        "allocationMode": "ExactCount",
        "count": 2,
    }
    if "cel" in devices:
        exactly["selectors"] = [{"cel": {"expression": devices.pop("cel")}}]
    if "capacity" in devices:
        exactly["capacity"] = {"requests": devices.pop("capacity")}
    claim = {
        "kind": "ResourceClaim",
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": exactly}], **devices}},
    }
    (problem,) = vocab.unpublished(claim)
    assert found in problem and "on gpu devices" in problem


def _config(**sharing: Any) -> dict[str, Any]:
    return {"apiVersion": vocab.GPU_CONFIG_API, "kind": "GpuConfig", "sharing": sharing}


def _mps(**fields: Any) -> dict[str, Any]:
    return _config(strategy="MPS", mpsConfig=fields)


MPS_FIELD = "config.sharing.mpsConfig"


def test_the_driver_takes_its_configs_and_each_needs_its_gate() -> None:
    assert vocab.gpu_config_gates({"apiVersion": vocab.GPU_CONFIG_API, "kind": "GpuConfig"}) == ()
    assert vocab.gpu_config_gates(_config(strategy="TimeSlicing")) == ("TimeSlicingSettings",)
    slicing = _config(strategy="TimeSlicing", timeSlicingConfig={"interval": "Long"})
    assert vocab.gpu_config_gates(slicing) == ("TimeSlicingSettings",)
    mps = {
        "defaultActiveThreadPercentage": 0,
        "defaultPinnedDeviceMemoryLimit": "1Mi",
        "defaultPerDevicePinnedMemoryLimit": {"1": "10Gi", "GPU-x": 2**20},
    }
    assert vocab.gpu_config_gates(_config(strategy="MPS", mpsConfig=mps), devices=2) == ("MPSSupport",)
    emitted = sharing_config("mps", 0.25, 24.0)
    assert emitted is not None and vocab.gpu_config_gates(emitted["opaque"]["parameters"]) == ("MPSSupport",)
    assert sharing_config("time-slicing", 0.25, 24.0) is None  # the default needs no config


@pytest.mark.parametrize(
    ("config", "field", "problem"),
    [
        ([], "config", "is not an object"),
        (
            {**_config(strategy="MPS"), "apiVersion": "resource.nvidia.com/v1"},
            "config.apiVersion",
            "config API",
        ),
        ({**_config(strategy="MPS"), "kind": "MigDeviceConfig"}, "config.kind", "whole-GPU"),
        ({**_config(strategy="MPS"), "sharingg": {}}, "config.sharingg", "not a field"),  # strict decoding
        (_config(strategy="mps"), "config.sharing.strategy", "not a GPU sharing strategy"),
        (_config(strategy="Fabric"), "config.sharing.strategy", "does not enable"),
        (_config(strategy="MPS", extra=1), "config.sharing.extra", "not a field"),
        (
            _config(strategy="TimeSlicing", mpsConfig={}),
            "config.sharing.mpsConfig",
            "cannot be used with the TimeSlicing strategy",
        ),
        (
            _config(strategy="MPS", timeSlicingConfig={}),
            "config.sharing.timeSlicingConfig",
            "cannot be used with the MPS strategy",
        ),
        (
            _config(strategy="TimeSlicing", timeSlicingConfig={"interval": "VeryLong"}),
            "config.sharing.timeSlicingConfig.interval",
            "not a time-slice interval",
        ),
        (
            _config(strategy="TimeSlicing", timeSlicingConfig={"period": "Long"}),
            "config.sharing.timeSlicingConfig.period",
            "not a field",
        ),
        *(
            (
                _mps(defaultActiveThreadPercentage=bad),
                f"{MPS_FIELD}.defaultActiveThreadPercentage",
                "from 0 to 100",
            )
            for bad in (-1, 101, 50.5, True)
        ),
        (
            _mps(defaultPinnedDeviceMemoryLimit="lots"),
            f"{MPS_FIELD}.defaultPinnedDeviceMemoryLimit",
            "not a Kubernetes quantity",
        ),
        (
            _mps(defaultPinnedDeviceMemoryLimit="1023Ki"),
            f"{MPS_FIELD}.defaultPinnedDeviceMemoryLimit",
            "below 1Mi",
        ),
        (
            _mps(defaultPerDevicePinnedMemoryLimit={"2": "1Gi"}),
            f"{MPS_FIELD}.defaultPerDevicePinnedMemoryLimit.2",
            "index below 2",
        ),
        (
            _mps(defaultPerDevicePinnedMemoryLimit={"GPU-a": "1k"}),
            f"{MPS_FIELD}.defaultPerDevicePinnedMemoryLimit.GPU-a",
            "below 1Mi",
        ),
    ],
)
def test_each_config_the_driver_refuses_is_refused_naming_the_field(
    config: Any, field: str, problem: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        vocab.gpu_config_gates(config, "config", devices=2)
    assert refused.value.field == field and problem in refused.value.problem and refused.value.fix


def test_an_emitted_claim_with_a_config_the_driver_refuses_is_caught() -> None:
    (claim,) = _every_claim()["shared mps"]
    claim["spec"]["devices"]["config"][0]["opaque"]["parameters"]["sharing"]["strategy"] = "Fabric"
    with pytest.raises(InvalidInput, match="does not enable"):
        vocab.unpublished(claim)


def test_the_notes_say_how_a_group_is_kept_and_what_sharing_needs() -> None:
    tp = plan_for(H100, ("whole",))
    (nvlink,) = dra_notes(_multi_gpu(tp, 4, ("nvlink",), (0,)), H100)
    assert "publishes no NVLink attribute" in nvlink and "pool" in nvlink and "islands" not in nvlink
    # a node of two NVLink islands (bridged pairs): no published attribute tells them apart
    node = H100.node("h100-a-0")
    pairs = tuple(replace(g, nvlink_island=f"pair{g.index // 2}") for g in node.gpus)
    split = replace(H100, nodes=tuple(replace(n, gpus=pairs) if n is node else n for n in H100.nodes))
    base = _multi_gpu(tp, 2, ("nvlink",), (0,))
    on_a = tuple(
        replace(p, node="h100-a-0", gpu_ids=("h100-a-0/gpu0", "h100-a-0/gpu1")) for p in base.placements
    )
    plan = replace(base, placements=on_a)
    (note,) = dra_notes(plan, split)
    assert "h100-a-0 (4 islands)" in note and "--gpu-api dra" in note
    (pcie,) = dra_notes(_multi_gpu(tp, 2, ("pcie-switch",), (0,)), H100)
    assert vocab.PCIE_ROOT in pcie
    shared = _free_shared()
    assert "no feature gate" in dra_notes(shared, MIXED)[0]
    assert "MPSSupport" in dra_notes(shared, MIXED, "mps")[0]
    assert "ConsumableShares" in dra_notes(shared, MIXED, "consumable-capacity")[0]
    assert dra_notes(plan_for(MIXED, ("mig",)), MIXED) == ()
    assert ServingOptions()  # the default serving options build every claim above
