"""The local control plane itself: `gpuplace testenv up|status|kubeconfig|down` from the command line, and
the simulated fleets kube-scheduler sees (GPU and MIG resources, GFD labels, taints, allocated GPUs) on the
session's control plane. Real processes: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, KWOK.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from gpuplace.cli import main
from gpuplace.k8s import Api
from gpuplace.testenv import ControlPlane
from gpuplace.testenv.nodes import PLACEHOLDER_NAMESPACE

pytestmark = [pytest.mark.integration, pytest.mark.controlplane]


def test_cli_up_status_kubeconfig_down(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], controlplane: ControlPlane
) -> None:
    # `controlplane` only guarantees the binaries exist (it fails clearly when they do not); this test
    # starts a second, separate control plane through the CLI.
    state = tmp_path / "state"
    assert main(["testenv", "--state-dir", str(state), "up", "--fleet", "h100-nvlink"]) == 0
    try:
        out = capsys.readouterr().out.strip().splitlines()
        assert "4 simulated nodes" in out[0]
        kubeconfig = Path(out[-1])
        assert kubeconfig == state / "kubeconfig" and kubeconfig.is_file()
        assert main(["testenv", "--state-dir", str(state), "kubeconfig"]) == 0
        assert capsys.readouterr().out.strip() == str(kubeconfig)
        assert main(["testenv", "--state-dir", str(state), "status"]) == 0
        status = json.loads(capsys.readouterr().out)
        assert all(status["ready"].values()) and len(status["ready"]) == 5
        assert status["start_s"] > 0  # recorded; how fast it starts is tests/benchmarks/bench_testenv.py's
        # A second `up` on a running state directory is refused, not a second cluster.
        assert main(["testenv", "--state-dir", str(state), "up"]) == 2
        assert "already runs" in capsys.readouterr().err
    finally:
        assert main(["testenv", "--state-dir", str(state), "down"]) == 0
    cp = ControlPlane.load(state)
    assert not any(cp.alive().values())
    assert (state / "logs" / "kube-apiserver.log").stat().st_size > 0  # logs stay after down
    assert main(["testenv", "--state-dir", str(state), "kubeconfig"]) == 2


def _node(api: Api, name: str) -> dict[str, Any]:
    return api.get("v1", "Node", name)


def test_h100_fleet_nodes_are_ready_with_gpus_labels_and_taints(kube_api: Api) -> None:
    node = _node(kube_api, "h100-a-0")
    labels = node["metadata"]["labels"]
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert labels["nvidia.com/gpu.count"] == "8"
    assert labels["topology.kubernetes.io/zone"] == "zone-a"
    assert {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"} in node["spec"]["taints"]
    ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
    assert ready and ready[0]["status"] == "True"  # KWOK keeps it Ready


def test_mixed_fleet_has_mig_resources_and_allocated_gpus_are_taken(
    kube_api: Api, kube_namespace: str
) -> None:
    from gpuplace.inventory import load_inventory

    inv = load_inventory("mixed-a100-h100-l4")
    mig_nodes = [n for n in inv.nodes if n.mig_slices and n.mig_strategy == "mixed"]
    assert mig_nodes, "the bundled mixed fleet should have a MIG node"
    mig = mig_nodes[0]
    profile = mig.mig_slices[0].mig_profile
    node = _node(kube_api, mig.name)
    assert int(node["status"]["allocatable"][f"nvidia.com/mig-{profile}"]) == sum(
        1 for s in mig.mig_slices if s.mig_profile == profile
    )
    placeholders = kube_api.list("v1", "Pod", PLACEHOLDER_NAMESPACE)
    assert placeholders and {p["spec"]["nodeName"] for p in placeholders} <= {n.name for n in inv.nodes}

    # kube-scheduler binds a pod asking for a MIG slice to the MIG node, and KWOK runs it.
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "mig-user"},
        "spec": {
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {"name": "c", "image": "x", "resources": {"limits": {f"nvidia.com/mig-{profile}": "1"}}}
            ],
        },
    }
    kube_api.create(pod, kube_namespace)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        got = kube_api.get("v1", "Pod", "mig-user", kube_namespace)
        if got.get("status", {}).get("phase") == "Running":
            break
        time.sleep(0.2)
    assert got["spec"].get("nodeName") in {n.name for n in mig_nodes}
    assert got["status"]["phase"] == "Running"
