"""Guards that keep the cluster paths from stranding a user, checked without a cluster: a --fleet that does
not match the cluster is refused naming both, a model too big for this machine is refused with its size,
a pod that will never serve is told apart from a slow one (the pod objects are the API's own shapes), and
the stand-in's servers registered with a testenv are stopped by its `down` (a real process stands in for
the server; no model is loaded), and a --state-dir too long for the real node's unix sockets is refused
before anything starts."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gpuplace.deploy.memory import require_fits_memory
from gpuplace.deploy.standin import register_with_testenv
from gpuplace.errors import InvalidInput
from gpuplace.inventory import load_inventory
from gpuplace.jobs.cluster import check_fleet_matches
from gpuplace.k8s.podfaults import UNSCHEDULABLE_GRACE_S, pod_failure
from gpuplace.testenv.env import SERVERS_DIR, stop_registered_servers
from gpuplace.testenv.realnode import require_short_sockets
from gpuplace.types import DeploymentRecord


def test_a_fleet_the_cluster_does_not_have_is_refused_naming_both() -> None:
    cluster = load_inventory("h100-nvlink")
    with pytest.raises(InvalidInput) as refused:
        check_fleet_matches(load_inventory("mixed-a100-h100-l4"), "mixed-a100-h100-l4", cluster, "/k/config")
    message = str(refused.value)
    assert "fleet='mixed-a100-h100-l4'" in message and "does not match the cluster of /k/config" in message
    assert "h100-a-0" in message  # the cluster's own GPU nodes
    assert "Leave --fleet out" in message
    check_fleet_matches(cluster, "h100-nvlink", cluster, "/k/config")  # the same fleet passes


def test_a_model_bigger_than_this_machines_memory_is_refused_with_its_size() -> None:
    with pytest.raises(InvalidInput, match=r"8\.0 B parameters are about 29\.9 GiB in fp32.*20\.0 GiB"):
        require_fits_memory("llama-3.1-8b", available_gib=20.0)
    require_fits_memory("tiny", available_gib=1.0)


def _pod(status: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"nodeName": "n1", "containers": [{"name": "server", "image": "gpuplace.local/x:1"}]},
        "status": status,
    }


UNSCHEDULABLE = {
    "conditions": [
        {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/5 nodes are available: 5 Insufficient nvidia.com/gpu.",
        }
    ]
}


def _node(name: str, gpus: str, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"taints": taints or []},
        "status": {"allocatable": {"nvidia.com/gpu": gpus, "cpu": "64", "memory": "512Gi"}},
    }


def _gpu_pod(gpus: str, node: str = "h100-a-0") -> dict[str, Any]:
    pod = _pod(UNSCHEDULABLE)
    pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    term = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}
    pod["spec"]["affinity"] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
    }
    pod["spec"]["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    return pod


def test_an_unschedulable_pod_fails_after_the_grace_only_when_no_node_could_ever_take_it() -> None:
    taint = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    nodes = [_node("h100-a-0", "8", taint), _node("h100-a-1", "8", taint)]
    grace = UNSCHEDULABLE_GRACE_S

    def failure(pod: dict[str, Any], after_s: float) -> Any:
        return pod_failure(None, pod, unschedulable_for_s=after_s, nodes=lambda: nodes)  # type: ignore[arg-type]

    assert failure(_gpu_pod("9"), 1.0) is None  # within the grace
    # waiting for GPUs other pods hold: it may be scheduled when they go, so it waits for the deadline
    assert failure(_gpu_pod("8"), grace) is None
    never = failure(_gpu_pod("9"), grace)  # more than any node has
    assert never is not None and never.kind == "unschedulable"
    assert failure(_gpu_pod("1", node="l4-shared-0"), grace) is not None  # pinned to a node that is not there
    untolerated = _gpu_pod("1")
    untolerated["spec"]["tolerations"] = []
    assert failure(untolerated, grace) is not None
    assert "kube-scheduler: 0/5 nodes are available: 5 Insufficient nvidia.com/gpu." in str(never)
    assert pod_failure(None, _pod({"phase": "Pending"}), unschedulable_for_s=60) is None  # type: ignore[arg-type]


def test_a_missing_image_names_the_image_and_the_command_that_builds_it() -> None:
    waiting = {
        "state": {
            "waiting": {"reason": "ErrImageNeverPull", "message": "not present with pull policy of Never"}
        }
    }
    status = {"containerStatuses": [{"name": "server", **waiting}]}
    failure = pod_failure(None, _pod(status), unschedulable_for_s=0)  # type: ignore[arg-type]
    assert failure is not None and failure.kind == "image"
    assert "gpuplace.local/x:1" in str(failure) and "make images" in str(failure)


def test_testenv_down_stops_the_standin_servers_registered_with_it(tmp_path: Path) -> None:
    # argv carries "transformers" and "serve", as teardown_local's guard against a reused PID expects
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)", "transformers", "serve"],
        start_new_session=True,
    )
    try:
        record = DeploymentRecord("local", "kwok-p", "", "http://127.0.0.1:1", "tiny", True, pid=proc.pid)
        register_with_testenv(tmp_path / SERVERS_DIR, record)
        assert (tmp_path / SERVERS_DIR / "kwok-p.json").is_file()
        assert stop_registered_servers(tmp_path) == 1
        end = time.monotonic() + 10
        while proc.poll() is None and time.monotonic() < end:
            time.sleep(0.05)
        assert proc.poll() is not None
        assert not list((tmp_path / SERVERS_DIR).glob("*.json"))
        assert stop_registered_servers(tmp_path) == 0  # nothing left to stop
    finally:
        proc.kill()


def test_a_state_dir_too_long_for_the_kubelets_sockets_is_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    long_dir = tmp_path / ("d" * (130 - len(str(tmp_path))))
    up = ("testenv", "up", "--real-node", "--fleet", "none", "--state-dir", str(long_dir))
    result = subprocess.run(
        [sys.executable, "-m", "gpuplace", *up],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    said = result.stderr + result.stdout
    assert f"state_dir='{long_dir}'" in said, said
    assert "device-plugins/kubelet.sock" in said and "108 at most" in said
    assert "--state-dir of at most" in said and "/tmp" in said
    assert not long_dir.exists()  # nothing was started or written
    # a short one passes (not tmp_path: under pytest-xdist's popen-gwN level it is itself too long)
    require_short_sockets(Path("/tmp/gprn-short"))


def test_testenv_up_without_a_fleet_starts_the_default_one() -> None:
    from gpuplace.cli import build_parser

    args = build_parser().parse_args(["testenv", "up"])
    assert args.fleet == "mixed-a100-h100-l4"  # `up` prints "N simulated nodes of fleet <name>"
    assert build_parser().parse_args(["testenv", "up", "--fleet", "none"]).fleet == "none"


def test_a_testenv_deploy_of_a_model_too_big_for_this_machine_is_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    """The kubeconfig names a testenv (its context) at a port where nothing listens: the refusal comes
    before any connection, so nothing was applied and no stand-in or container started."""
    import yaml

    from gpuplace.deploy import deploy
    from gpuplace.testenv.controlplane import KUBECONFIG_CONTEXT
    from tests.support.plans import rendered_plan_dir, sample_plan

    kubeconfig = tmp_path / "kubeconfig"
    cluster = {"name": "c", "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}}
    context = {"name": KUBECONFIG_CONTEXT, "context": {"cluster": "c", "user": "u"}}
    config = {"apiVersion": "v1", "kind": "Config", "clusters": [cluster], "contexts": [context]}
    config |= {"current-context": KUBECONFIG_CONTEXT, "users": [{"name": "u", "user": {"token": "x"}}]}
    kubeconfig.write_text(yaml.safe_dump(config))
    plan = sample_plan(model="llama-3.1-70b", nodes=("h100-a-0",), gpus=4)
    planned = rendered_plan_dir(tmp_path / "plan", plan, load_inventory("h100-nvlink"))
    too_big = r"model='llama-3\.1-70b'.*70\.6 B parameters are about 26\d\.\d GiB"
    with pytest.raises(InvalidInput, match=too_big):
        deploy(planned, kubeconfig=str(kubeconfig), workdir=tmp_path / "w")
    assert not (tmp_path / "w").exists()
