"""The planner's real output deployed on the real local control plane: `gpuplace profile` → `gpuplace plan`
on the bundled fleet `mixed-a100-h100-l4` → `gpuplace deploy` (as the least-privilege ServiceAccount), and
kube-scheduler binds every replica to the node the plan named, with KWOK running it."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from gpuplace.cli import main
from gpuplace.k8s import Api
from gpuplace.k8s.rbac import deployer_rbac, service_account_kubeconfig
from gpuplace.types import DeploymentRecord

pytestmark = [pytest.mark.integration, pytest.mark.controlplane]


def test_planner_output_deploys_where_it_was_planned(
    kube_api: Api, kube_namespace: str, tmp_path: Path
) -> None:
    profile = tmp_path / "profile.parquet"
    assert (
        main(
            [
                "profile",
                "--model",
                "tiny",
                "--device",
                "cpu",
                "--repeats",
                "2",
                "--out",
                str(profile),
                "--quiet",
            ]
        )
        == 0
    )
    plan_dir = tmp_path / "plan"
    plan_args = ["plan", "--model", "tiny", "--profile", str(profile), "--inventory", "mixed-a100-h100-l4"]
    assert (
        main(
            [
                *plan_args,
                "--slo-tpot-ms",
                "50",
                "--slo-ttft-ms",
                "500",
                "--rate",
                "20",
                "--out",
                str(plan_dir),
            ]
        )
        == 0
    )
    plan = json.loads((plan_dir / "plan.json").read_text())

    for obj in deployer_rbac(kube_namespace):
        kube_api.apply(obj, kube_namespace)
    kubeconfig = service_account_kubeconfig(kube_api, kube_namespace, tmp_path / "sa.kubeconfig")
    out = tmp_path / "out"
    common = ["--kubeconfig", str(kubeconfig), "--namespace", kube_namespace]
    assert (
        main(["deploy", str(plan_dir), *common, "--out", str(out), "--timeout", "90", "--runtime", "none"])
        == 0
    )

    record = DeploymentRecord.from_json_dict(json.loads((out / "deployment.json").read_text()))
    assert record.plan_id == plan["plan_id"]
    assert len(record.pods) == plan["replicas"]
    assert Counter(p.node for p in record.pods) == Counter(p["node"] for p in plan["placements"])
    assert all(p.phase == "Running" and p.node == p.planned_node for p in record.pods)
    planned = {g for p in plan["placements"] for g in p["gpu_ids"]}
    if record.gpu_api == "dra":  # the devices kube-scheduler's DRA allocator gave, read from the claims
        assert {g for p in record.pods for g in p.gpu_ids} == planned
    else:  # a time-sliced share: through the device plugin, node level only
        assert all(p.gpu_ids == () and p.placement_level == "node" for p in record.pods)

    assert main(["teardown", str(plan_dir), *common]) == 0
    assert (
        kube_api.list("v1", "Pod", kube_namespace, label_selector=f"gpuplace.io/plan-id={plan['plan_id']}")
        == []
    )
