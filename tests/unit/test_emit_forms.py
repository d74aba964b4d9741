"""The forms of one plan (``--emit``) without a cluster: names, what each writes, and the refusals of forms
that cannot express a plan. A multi-node (GB200-class) plan is made by hand to exercise the form builders
on exact shapes, and planned by ``gpuplace plan`` on the bundled ``gb200-nvl72`` fleet, whose LeaderWorkerSet
comes from the planner's own placement."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import kubernetes_validate
import pytest
from test_manifests import plan_for

from gpuplace.errors import InvalidInput
from gpuplace.inventory import load_inventory
from gpuplace.labels import NVLINK_CLIQUE
from gpuplace.manifests import FORMS, EmitOptions, build_manifests
from gpuplace.plandir import read_plan_dir
from gpuplace.steps.plan_params import emit_options
from gpuplace.types import GpuDevice, Inventory, Node
from gpuplace.types.plan import Placement, PlacementPlan

K8S = "1.35.0"
BUILT_IN = ("v1", "apps/v1", "policy/v1", "rbac.authorization.k8s.io/v1", "resource.k8s.io/v1")
MIXED = load_inventory("mixed-a100-h100-l4")


def test_emit_names_are_checked_and_ordered() -> None:
    assert EmitOptions().forms == ("manifests", "dra", "kserve")
    opts = emit_options({"emit": "llm-d,kserve-llmisvc"})
    assert opts.forms == ("kserve-llmisvc", "llm-d") and opts.explicit
    with pytest.raises(InvalidInput, match=r"emit='helm'.*Choose from manifests,dra"):
        emit_options({"emit": "helm"})
    with pytest.raises(InvalidInput, match="kube_version"):
        EmitOptions(kube_version="latest")


@pytest.mark.parametrize("kinds", [("whole",), ("mig",)])
def test_every_form_is_written_and_built_ins_validate(kinds: tuple[str, ...]) -> None:
    plan = plan_for(MIXED, kinds)
    forms = tuple(f for f in FORMS if f != "lws" or kinds == ("whole",))
    ms = build_manifests(plan, MIXED, emit=EmitOptions(forms=forms, explicit=True))
    assert sorted(ms.alternatives) == sorted(f"{f}.yaml" for f in forms if f != "manifests")
    for objs in [*ms.apply.values(), *ms.alternatives.values()]:
        for obj in objs:
            if obj["apiVersion"] in BUILT_IN:
                kubernetes_validate.validate(obj, K8S, strict=True)
    (isvc,) = ms.alternatives["kserve-llmisvc.yaml"]
    assert isvc["apiVersion"] == "serving.kserve.io/v1alpha2"
    assert isvc["spec"]["replicas"] == plan.replicas and isvc["spec"]["parallelism"] == {
        "tensor": plan.chosen.tp
    }
    assert isvc["spec"]["template"]["containers"][0]["name"] == "main"
    assert isvc["spec"]["router"] == {"gateway": {}, "route": {}, "scheduler": {}}
    pool = ms.alternatives["llm-d.yaml"][-1]
    assert pool["kind"] == "InferencePool" and pool["spec"]["targetPorts"] == [{"number": 8000}]
    kueue = {o["kind"]: o for o in ms.alternatives["kueue.yaml"]}
    levels = [lv["nodeLabel"] for lv in kueue["Topology"]["spec"]["levels"]]
    assert levels[-1] == "kubernetes.io/hostname" and levels[0] == "topology.kubernetes.io/zone"
    template = kueue["Deployment"]["spec"]["template"]["metadata"]
    assert template["annotations"]["kueue.x-k8s.io/podset-required-topology"] == "kubernetes.io/hostname"
    assert template["labels"]["kueue.x-k8s.io/queue-name"] == kueue["LocalQueue"]["metadata"]["name"]


def test_mig_claim_selects_the_planned_profile_through_the_mig_class() -> None:
    plan = plan_for(MIXED, ("mig",))
    template, _ = build_manifests(plan, MIXED, emit=EmitOptions(forms=("dra",))).alternatives["dra.yaml"]
    exactly = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert exactly["deviceClassName"] == "mig.nvidia.com"
    assert f'profile == "{plan.chosen.mig_profile}"' in exactly["selectors"][0]["cel"]["expression"]


def _free_shared(plan: PlacementPlan) -> PlacementPlan:
    return replace(
        plan,
        placements=tuple(
            replace(p, gpu_ids=("l4-shared-1/gpu1",), node="l4-shared-1") for p in plan.placements
        ),
    )


def test_shared_plans_claim_as_priced_and_mps_or_capacity_only_when_asked() -> None:
    busy = plan_for(MIXED, ("shared",))
    assert busy.chosen.kind == "shared"
    # A GPU another workload uses in part needs consumable capacity, which is emitted only when asked.
    with pytest.raises(InvalidInput, match=r"--gpu-sharing consumable-capacity") as refused:
        build_manifests(busy, MIXED, emit=EmitOptions(forms=("dra",), explicit=True))
    assert "ConsumableShares" in refused.value.fix
    assert "dra" in build_manifests(busy, MIXED).left_out  # of the default set: left out, with the reason
    capacity = EmitOptions(forms=("dra",), explicit=True, sharing="consumable-capacity")
    with pytest.raises(InvalidInput, match=r"older than 1.36") as old:
        build_manifests(busy, MIXED, emit=capacity)
    assert old.value.field == "gpu_sharing"
    newer = build_manifests(busy, MIXED, emit=replace(capacity, kube_version="1.36"))
    template = newer.alternatives["dra.yaml"][0]
    exactly = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    memory = next(g.memory_gib for _, g in MIXED.devices() if g.id == busy.placements[0].gpu_ids[0])
    assert exactly["capacity"] == {"requests": {"memory": f"{int(busy.chosen.share * memory * 1024)}Mi"}}
    assert any("ConsumableShares" in n for n in newer.notes)
    # A free GPU, by default: one claim its replicas share, no config (CUDA time-slicing, as priced).
    free = _free_shared(busy)
    default = build_manifests(free, MIXED, emit=EmitOptions(forms=("dra",)))
    claim, dep = default.alternatives["dra.yaml"]
    kubernetes_validate.validate(claim, K8S, strict=True)
    assert "config" not in claim["spec"]["devices"]
    assert dep["spec"]["template"]["spec"]["resourceClaims"] == [
        {"name": "gpus", "resourceClaimName": claim["metadata"]["name"]}
    ]
    assert any("time-slicing, which needs no feature gate" in n for n in default.notes)
    # MPS when asked: the driver's GpuConfig at the priced share, and the gate named.
    asked = build_manifests(free, MIXED, emit=EmitOptions(forms=("dra",), sharing="mps"))
    claim = asked.alternatives["dra.yaml"][0]
    kubernetes_validate.validate(claim, K8S, strict=True)
    mps = claim["spec"]["devices"]["config"][0]["opaque"]["parameters"]["sharing"]
    assert mps["strategy"] == "MPS"
    assert mps["mpsConfig"]["defaultActiveThreadPercentage"] == round(busy.chosen.share * 100)
    assert any("MPSSupport" in n for n in asked.notes)


def test_a_sharing_mode_gpuplace_does_not_know_is_refused_naming_the_choices() -> None:
    with pytest.raises(InvalidInput) as refused:
        EmitOptions(sharing="vgpu")
    assert refused.value.field == "gpu_sharing" and refused.value.value == "vgpu"
    assert "time-slicing, mps, consumable-capacity" in refused.value.fix
    assert emit_options({"gpu_sharing": "mps"}).sharing == "mps"
    assert emit_options({}).sharing == "time-slicing"


def test_old_kubernetes_and_lws_for_a_slice_are_refused_with_the_reason() -> None:
    plan = plan_for(MIXED, ("whole",))
    with pytest.raises(InvalidInput, match=r"does not serve resource.k8s.io/v1"):
        build_manifests(plan, MIXED, emit=EmitOptions(forms=("dra",), kube_version="1.33", explicit=True))
    mig = plan_for(MIXED, ("mig",))
    with pytest.raises(InvalidInput, match="never spans nodes"):
        build_manifests(mig, MIXED, emit=EmitOptions(forms=("lws",), explicit=True))


def _gb200(clique: tuple[str, str]) -> tuple[PlacementPlan, Inventory]:
    nodes = tuple(
        Node(
            name=f"gb200-{i}",
            gpus=tuple(
                GpuDevice(
                    id=f"gb200-{i}/gpu{g}", index=g, gpu="H100-SXM5-80GB", memory_gib=80, nvlink_island="nvl"
                )
                for g in range(4)
            ),
            labels={NVLINK_CLIQUE: clique[i]},
            rack="rack-0",
        )
        for i in range(2)
    )
    inv = Inventory(nodes=nodes, source="gb200-test")
    base = plan_for(load_inventory("h100-nvlink"), ("whole",))
    chosen = replace(base.chosen, tp=8, replicas=1)
    ids = tuple(f"gb200-{i}/gpu{g}" for i in range(2) for g in range(4))
    plan = replace(base, chosen=chosen, placements=(Placement(0, "gb200-0", ids, "nvlink", None, 1.0, 0.0),))
    return plan, inv


def test_a_replica_across_one_nvlink_domain_is_a_leader_worker_set_with_a_compute_domain() -> None:
    plan, inv = _gb200(("c1", "c1"))
    with pytest.raises(InvalidInput, match="spans 2 nodes and manifests runs each replica"):
        build_manifests(plan, inv, emit=EmitOptions(forms=("manifests",), explicit=True))
    ms = build_manifests(plan, inv, emit=EmitOptions(forms=("lws", "kueue", "kserve-llmisvc"), explicit=True))
    domain, lws = ms.alternatives["lws.yaml"]
    assert domain["kind"] == "ComputeDomain" and lws["spec"]["leaderWorkerTemplate"]["size"] == 2
    worker = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    assert worker["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "4"
    assert "--headless" in worker["containers"][0]["args"]
    assert (
        worker["resourceClaims"][0]["resourceClaimTemplateName"]
        == domain["spec"]["channel"]["resourceClaimTemplate"]["name"]
    )
    assert (
        worker["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"]
        == NVLINK_CLIQUE
    )
    kueue = {o["kind"]: o for o in ms.alternatives["kueue.yaml"]}
    assert NVLINK_CLIQUE in [lv["nodeLabel"] for lv in kueue["Topology"]["spec"]["levels"]]
    leader = kueue["LeaderWorkerSet"]["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["metadata"]
    assert leader["annotations"]["kueue.x-k8s.io/podset-required-topology"] == NVLINK_CLIQUE
    assert "worker" in ms.alternatives["kserve-llmisvc.yaml"][-1]["spec"]


def test_a_tp_group_never_crosses_an_nvlink_domain() -> None:
    plan, inv = _gb200(("c1", "c2"))
    with pytest.raises(InvalidInput, match="never crosses an NVLink domain"):
        build_manifests(plan, inv, emit=EmitOptions(forms=("lws",), explicit=True))


# llama-3.1-70b at ≤ 10.5 ms p99 TPOT: only TP 8 meets it, and a GB200 tray has 4 GPUs (the planner test)
GB200_PLAN = ["plan", "--model", "llama-3.1-70b", "--inventory", "gb200-nvl72", "--kinds", "whole"]
GB200_PLAN += ["--slo-tpot-ms", "10.5", "--slo-ttft-ms", "1000", "--rate", "2"]


def test_gpuplace_plan_writes_the_planners_multi_node_replica_as_a_leader_worker_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpuplace.cli import main

    assert main([*GB200_PLAN, "--emit", "lws", "--out", str(tmp_path / "lws")]) == 0
    written = read_plan_dir(tmp_path / "lws")
    (p,) = written.plan.placements
    assert written.forms == ("lws",) and p.nodes == ("gb200-a-0", "gb200-a-1")
    domain, lws = written.alternative("lws")
    assert domain["kind"] == "ComputeDomain" and lws["kind"] == "LeaderWorkerSet"
    template = lws["spec"]["leaderWorkerTemplate"]
    assert template["size"] == 2 and lws["spec"]["replicas"] == 1
    for role in ("leaderTemplate", "workerTemplate"):
        pod = template[role]["spec"]
        assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "4"
        (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ]
        assert term["matchExpressions"][0]["values"] == ["gb200-a-0", "gb200-a-1"]
    assert "replica 0: gb200-a-0+gb200-a-1" in capsys.readouterr().out
    # the manifests form runs a replica as one pod: refused by name, nothing written
    assert main([*GB200_PLAN, "--emit", "manifests", "--out", str(tmp_path / "m")]) != 0
    assert "spans 2 nodes and manifests runs each replica as one pod" in capsys.readouterr().err
    assert not (tmp_path / "m").exists()
    # the default forms: lws stands in for the single-node ones, and the plan says so
    assert main([*GB200_PLAN, "--out", str(tmp_path / "default")]) == 0
    default = read_plan_dir(tmp_path / "default")
    assert default.forms == ("lws",) and default.manifests == ()
    assert default.alternative("lws") == written.alternative("lws")
    with pytest.raises(InvalidInput, match=r"Read PlanDir\.manifests"):  # not "was not emitted"
        default.alternative("manifests")
    with pytest.raises(InvalidInput, match="was not emitted"):
        default.alternative("kserve")
    notes = "\n".join(default.plan.notes)
    assert "form manifests left out" in notes and "the default forms for it: lws" in notes
    assert "the kubeflow path (kfp/) runs a replica as one pod" in notes
