"""What a deploy claims and what it reads back, without a cluster: the per-replica DRA objects that pin the
planned devices, the serving spec read from pods and from a local server's command line, the GPUs a pod
holds, and the KFP task's accelerator outputs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest

from gpuplace.deploy.served import engine_args
from gpuplace.dra import unpublished
from gpuplace.errors import InvalidInput
from gpuplace.inventory import load_inventory
from gpuplace.k8s.dra import AllocatedDevice, PodPlacement
from gpuplace.k8s.measure import gpu_taken, spec_of_pods
from gpuplace.labels import REPLICA_LABEL
from gpuplace.manifests import ServingOptions, build_manifests, kfp_fragments, serving_spec
from gpuplace.manifests.forms import EmitOptions
from gpuplace.manifests.pinned import pinned_dra_objects, shared_config
from gpuplace.types.plan import PlacementPlan
from tests.support.plans import sample_plan

H100 = load_inventory("h100-nvlink")


def _rendered(
    nodes: tuple[str, ...] = ("h100-a-0", "h100-b-0"), gpus: int = 2
) -> tuple[PlacementPlan, tuple[Mapping[str, Any], ...]]:
    plan = sample_plan(nodes=nodes, gpus=gpus)
    plan = replace(plan, serving=serving_spec(plan, H100, ServingOptions()))
    return plan, build_manifests(plan, H100).objects()


def test_pinned_dra_objects_claim_each_replicas_planned_devices_by_uuid() -> None:
    plan, manifests = _rendered()
    published = {g: (f"GPU-{g}", "gpu") for p in plan.placements for g in p.gpu_ids}
    objects = pinned_dra_objects(plan, manifests, published)
    kinds = [o["kind"] for o in objects]
    assert kinds == [
        "ResourceClaim",
        "Deployment",
        "ResourceClaim",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
    ]
    claim, dep = objects[0], objects[1]
    request = claim["spec"]["devices"]["requests"][0]["exactly"]
    assert request["count"] == 2 and request["deviceClassName"] == "gpu.nvidia.com"
    assert request["selectors"][0]["cel"]["expression"] == (
        'device.attributes["gpu.nvidia.com"].uuid in ["GPU-h100-a-0/gpu0", "GPU-h100-a-0/gpu1"]'
    )
    # NVLink has no published attribute: the uuids themselves hold the planned island, no constraint
    assert "constraints" not in claim["spec"]["devices"] and unpublished(claim) == []
    spec = dep["spec"]
    assert spec["replicas"] == 1 and spec["selector"]["matchLabels"][REPLICA_LABEL] == "0"
    pod = spec["template"]["spec"]
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert terms[0]["matchExpressions"][0]["values"] == ["h100-a-0"]
    resources = pod["containers"][0]["resources"]
    assert "nvidia.com/gpu" not in resources["limits"] and resources["claims"] == [{"name": "gpus"}]
    assert pod["resourceClaims"] == [{"name": "gpus", "resourceClaimName": claim["metadata"]["name"]}]
    assert objects[3]["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["h100-b-0"]
    assert manifests[0]["spec"]["replicas"] == 2  # the input is not touched


def test_pinned_dra_objects_refuse_unpublished_devices() -> None:
    plan, manifests = _rendered()
    with pytest.raises(InvalidInput, match="not published in any ResourceSlice"):
        pinned_dra_objects(plan, manifests, {})


@pytest.mark.parametrize("sharing", ["time-slicing", "mps"])
def test_replicas_sharing_a_gpu_share_one_pinned_claim_as_the_plans_dra_form_chose(sharing: str) -> None:
    plan, manifests = _rendered(gpus=1)
    one_gpu = tuple(replace(p, node="h100-a-0", gpu_ids=("h100-a-0/gpu0",)) for p in plan.placements)
    shared = replace(plan, chosen=replace(plan.chosen, kind="shared", share=0.5), placements=one_gpu)
    form = build_manifests(shared, H100, emit=EmitOptions(forms=("dra",), sharing=sharing))
    config = shared_config(form.alternatives["dra.yaml"])
    objects = pinned_dra_objects(shared, manifests, {"h100-a-0/gpu0": ("GPU-0", "gpu")}, config)
    claims = [o for o in objects if o["kind"] == "ResourceClaim"]
    deployments = [o for o in objects if o["kind"] == "Deployment"]
    assert len(claims) == 1 and len(deployments) == 2 and unpublished(claims[0]) == []
    name = claims[0]["metadata"]["name"]
    for dep in deployments:
        assert dep["spec"]["template"]["spec"]["resourceClaims"] == [
            {"name": "gpus", "resourceClaimName": name}
        ]
    if sharing == "time-slicing":  # the driver's default: no config, no feature gate
        assert config == [] and "config" not in claims[0]["spec"]["devices"]
        return
    (config,) = claims[0]["spec"]["devices"]["config"]
    assert config["opaque"]["driver"] == "gpu.nvidia.com"
    mps = config["opaque"]["parameters"]["sharing"]
    memory = next(g.memory_gib for _, g in H100.devices() if g.id == "h100-a-0/gpu0")
    assert mps == {
        "strategy": "MPS",
        "mpsConfig": {
            "defaultActiveThreadPercentage": 50,  # the priced share, as threads and pinned memory
            "defaultPinnedDeviceMemoryLimit": f"{int(0.5 * memory * 1024)}Mi",
        },
    }


def test_the_kfp_accelerator_count_is_a_string() -> None:
    plan, _ = _rendered(gpus=2)
    fragments = kfp_fragments(plan, H100)
    assert fragments["accelerator_type"] == "nvidia.com/gpu" and fragments["accelerator_count"] == "2"


def _pod(limits: dict[str, str] | None = None) -> dict[str, object]:
    container = {
        "name": "server",
        "image": "img:1",
        "command": ["vllm", "serve"],
        "args": ["m", "--tensor-parallel-size", "2", "--served-model-name", "m-served"],
        "ports": [{"containerPort": 8000}],
        "resources": {"limits": limits or {}},
    }
    return {"metadata": {"name": "p0"}, "spec": {"containers": [container]}}


def test_the_spec_is_read_back_from_the_pods_and_dra_devices_are_named_as_the_device_plugin_would() -> None:
    plan, _ = _rendered()
    assert plan.serving is not None
    devices = tuple(
        AllocatedDevice("c", "gpus", "gpu.nvidia.com", "n", f"gpu-{i}", gpu_id=f"n/gpu{i}") for i in (0, 1)
    )
    dra = PodPlacement(pod="p0", node="n", level="device", devices=devices)
    spec = spec_of_pods(plan.serving, [_pod()], {"p0": dra})
    assert (spec.image, spec.tensor_parallel, spec.served_model_name) == ("img:1", 2, "m-served")
    assert (spec.gpu_resource, spec.gpus_per_replica, spec.replicas) == ("nvidia.com/gpu", 2, 1)
    plugin = PodPlacement(pod="p0", node="n", level="node", device_plugin_gpus=2)
    spec2 = spec_of_pods(plan.serving, [_pod({"nvidia.com/gpu": "2", "cpu": "8"})], {"p0": plugin})
    assert spec.differences(spec2) == ()  # one claimed GPU pair and nvidia.com/gpu: 2 serve the same
    assert gpu_taken(dra, _pod()) == ("gpu.nvidia.com", 2)
    assert gpu_taken(plugin, _pod({"nvidia.com/mig-1g.10gb": "1"})) == ("nvidia.com/mig-1g.10gb", 1)


def test_a_local_servers_spec_leaves_out_its_host_and_port() -> None:
    cmdline = [
        "/py",
        "-c",
        "...",
        "serve",
        "/models/tiny",
        "--host",
        "127.0.0.1",
        "--port",
        "41234",
        "--device",
        "auto",
    ]
    assert engine_args(cmdline) == ("serve", "/models/tiny", "--device", "auto")
    assert engine_args([*cmdline[:6], "--port=5"]) == ("serve", "/models/tiny")
