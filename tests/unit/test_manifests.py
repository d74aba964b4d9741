"""Placement specs: every manifest validates against Kubernetes 1.34 schemas (strict), carries the plan's
labels and placement, and the KFP fragments are accepted by kfp-kubernetes."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import kubernetes_validate
import pytest
import yaml
from test_planner import PROFILE, SLO, plan_placement, request, synthetic_profile

from gpuplace.catalog import load_gpu_catalog
from gpuplace.inventory import load_inventory, parse_fleet
from gpuplace.manifests import ServingOptions, build_manifests, kfp_fragments
from gpuplace.plandir import to_yaml
from gpuplace.types import Inventory
from gpuplace.types.plan import PlacementPlan, Slo

CATALOG = load_gpu_catalog()
K8S_VERSION = "1.34.0"


SMALL = synthetic_profile("llama-100m", decode_ms=0.5, prefill_ms=2.0)


def plan_for(
    inv: Inventory, kinds: tuple[str, ...], slo: Slo = SLO, gpus: tuple[str, ...] = ()
) -> PlacementPlan:
    """Whole GPUs for llama-3.1-8b; MIG slices and shared GPUs for a 100M model that fits them."""
    profile = PROFILE if kinds == ("whole",) else SMALL
    return plan_placement(profile, inv, CATALOG, request(profile.model.name, slo, kinds=kinds, gpus=gpus))


MIXED = load_inventory("mixed-a100-h100-l4")
CASES = {
    "whole": (MIXED, ("whole",)),
    "mig-mixed": (MIXED, ("mig",)),
    "shared": (MIXED, ("shared",)),
}


def all_docs(
    plan: PlacementPlan, inv: Inventory, options: ServingOptions | None = None
) -> list[dict[str, Any]]:
    ms = build_manifests(plan, inv, options)
    docs = []
    for files in (ms.apply, ms.alternatives):
        for objects in files.values():
            docs += list(yaml.safe_load_all(to_yaml(objects)))
    return docs


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_core_manifest_validates_strictly(case: str) -> None:
    inv, kinds = CASES[case]
    plan = plan_for(inv, kinds)
    for doc in all_docs(plan, inv, ServingOptions(numa_align=True, priority_class="inference-high")):
        if doc["kind"] == "InferenceService":
            continue  # a CRD: kubernetes-validate ships no schema for it (checked structurally below)
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_deployment_pins_planned_nodes_and_labels_everything() -> None:
    plan = plan_for(load_inventory("h100-nvlink"), ("whole",), replace(SLO, rate_rps=40))
    docs = all_docs(plan, load_inventory("h100-nvlink"))
    for doc in docs:
        assert doc["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpuplace"
        assert doc["metadata"]["labels"]["gpuplace.io/plan-id"] == plan.plan_id
        assert "namespace" not in doc["metadata"]
    dep = next(
        d for d in docs if d["kind"] == "Deployment" and "resourceClaims" not in d["spec"]["template"]["spec"]
    )
    spec = dep["spec"]["template"]["spec"]
    term = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ][0]
    expr = term["matchExpressions"][0]
    assert expr["key"] == "kubernetes.io/hostname" and expr["operator"] == "In"
    assert sorted(expr["values"]) == sorted({p.node for p in plan.placements})
    assert dep["spec"]["replicas"] == plan.replicas
    container = spec["containers"][0]
    assert container["image"].startswith("vllm/vllm-openai:v")
    assert container["args"][container["args"].index("--tensor-parallel-size") + 1] == str(plan.chosen.tp)
    res = container["resources"]
    assert res["requests"] == res["limits"] and res["limits"]["nvidia.com/gpu"] == str(plan.chosen.tp)
    assert str(int(res["limits"]["cpu"])) == res["limits"]["cpu"]
    assert spec["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
    ]
    assert container["securityContext"]["runAsNonRoot"] and container["securityContext"]["capabilities"] == {
        "drop": ["ALL"]
    }
    placements = json.loads(dep["metadata"]["annotations"]["gpuplace.io/placements"])
    assert [p["node"] for p in placements] == [p.node for p in plan.placements]


def test_mig_resources_follow_the_strategy() -> None:
    plan = plan_for(MIXED, ("mig",))
    limits = build_manifests(plan, MIXED).apply["10-deployment.yaml"][0]["spec"]["template"]["spec"][
        "containers"
    ][0]["resources"]["limits"]
    assert limits[f"nvidia.com/mig-{plan.chosen.mig_profile}"] == "1" and "nvidia.com/gpu" not in limits
    single = parse_fleet(
        {
            "nodes": [
                {
                    "name": "s",
                    "mig_strategy": "single",
                    "gpus": [{"product": "A100-80GB", "count": 2, "mig": ["3g.40gb", "3g.40gb"]}],
                }
            ]
        },
        "t",
        CATALOG,
    )
    plan = plan_for(single, ("mig",))
    limits = build_manifests(plan, single).apply["10-deployment.yaml"][0]["spec"]["template"]["spec"][
        "containers"
    ][0]["resources"]["limits"]
    assert limits["nvidia.com/gpu"] == "1"


def test_numa_alignment_sizes_cpus_to_the_numa_node_share() -> None:
    inv = load_inventory("h100-nvlink")
    plan = plan_for(inv, ("whole",))
    dep = build_manifests(plan, inv, ServingOptions(numa_align=True)).apply["10-deployment.yaml"][0]
    cpu = dep["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"]
    assert cpu == str(96 // 4 * plan.chosen.tp)  # 192 cores / 2 NUMA nodes / 4 GPUs each


def test_dra_claim_selects_the_planned_gpu_by_cel() -> None:
    plan = plan_for(load_inventory("h100-nvlink"), ("whole",))
    dra = build_manifests(plan, load_inventory("h100-nvlink")).alternatives["dra.yaml"]
    claim = dra[0]
    assert claim["apiVersion"] == "resource.k8s.io/v1" and claim["kind"] == "ResourceClaimTemplate"
    exactly = claim["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert "NVIDIA H100 80GB HBM3" in exactly["selectors"][0]["cel"]["expression"]
    assert exactly["count"] == plan.chosen.tp
    pod = dra[1]["spec"]["template"]["spec"]
    assert pod["resourceClaims"][0]["resourceClaimTemplateName"] == claim["metadata"]["name"]
    assert "nvidia.com/gpu" not in pod["containers"][0]["resources"]["limits"]


def test_kserve_inference_service_structure() -> None:
    plan = plan_for(MIXED, ("whole",))
    isvc = build_manifests(plan, MIXED).alternatives["kserve.yaml"][0]
    assert isvc["apiVersion"] == "serving.kserve.io/v1beta1"
    pred = isvc["spec"]["predictor"]
    assert pred["minReplicas"] == pred["maxReplicas"] == plan.replicas
    assert pred["containers"][0]["name"] == "kserve-container"
    assert pred["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]


def test_kfp_fragments_are_accepted_by_kfp_kubernetes() -> None:
    from google.protobuf import json_format
    from kfp import dsl, kubernetes

    plan = plan_for(MIXED, ("whole",))
    frags = json.loads(json.dumps(kfp_fragments(plan, MIXED)))

    @dsl.component
    def serve():  # type: ignore[no-untyped-def]  # KFP reads string annotations as types: none here
        pass

    @dsl.pipeline
    def pipe():  # type: ignore[no-untyped-def]
        task = serve()
        kubernetes.add_node_affinity_json(task, frags["node_affinity"])
        kubernetes.add_toleration_json(task, frags["tolerations"])
        kubernetes.add_node_selector_json(task, frags["node_selector"])

    # the planned nodes' GPU product as the fleet file spells it (GFD's label), e.g. NVIDIA-L4
    planned = {p.node for p in plan.placements}
    (product,) = {g.product for n in MIXED.nodes if n.name in planned for g in n.gpus}
    assert product.startswith("NVIDIA-") and frags["node_selector"] == {"nvidia.com/gpu.product": product}
    # kfp-kubernetes took each fragment as it is: the compiled platform spec carries them unchanged
    (executor,) = json_format.MessageToDict(pipe.platform_spec)["platforms"]["kubernetes"]["deploymentSpec"][
        "executors"
    ].values()
    assert executor["nodeSelector"]["nodeSelectorJson"]["runtimeValue"]["constant"] == frags["node_selector"]
    assert (
        executor["nodeAffinity"][0]["nodeAffinityJson"]["runtimeValue"]["constant"] == frags["node_affinity"]
    )
    assert executor["tolerations"] == frags["tolerations"]


def test_shared_gpu_limits_vllm_memory_share() -> None:
    plan = plan_for(MIXED, ("shared",))
    args = build_manifests(plan, MIXED).apply["10-deployment.yaml"][0]["spec"]["template"]["spec"][
        "containers"
    ][0]["args"]
    assert args[args.index("--gpu-memory-utilization") + 1] == "0.5"  # vLLM 0.34: 1.0 × the half share


def test_a_deployment_record_holding_the_plans_engine_parameters_round_trips() -> None:
    """The serving spec the paths ran (with the engine parameters and where each came from) is written
    into deployment.json: a record holding it serialises and reads back equal."""
    from gpuplace.manifests import serving_spec
    from gpuplace.types import DeploymentRecord

    inv = load_inventory("h100-nvlink")
    plan = plan_for(inv, ("whole",))
    spec = serving_spec(plan, inv, ServingOptions())
    assert spec.engine_params is not None and spec.engine_params.sources
    record = DeploymentRecord("kubernetes", "d", "ns", "http://x", plan.model, True, (), serving=spec)
    data = json.loads(json.dumps(record.to_json_dict()))
    assert DeploymentRecord.from_json_dict(data).serving == spec
    with pytest.raises(TypeError, match="read-only"):
        spec.engine_params.sources["max_num_seqs"] = "changed"  # type: ignore[index]
