"""The real testenv node (`gpuplace testenv up --real-node`): containerd + runc + a kubelet built from
k8s.io/kubernetes, registered beside the KWOK GPU nodes; a pod on it runs a real container whose readiness
probe passes and whose IP this machine reaches over the CNI bridge; `testenv down` leaves no process,
container, mount, network namespace, link, iptables rule or sysctl change behind. Everything is real here
(root, Debian's containerd/runc/CNI plugins from `make node-deps`); the only image is made locally from
Debian's busybox-static (:mod:`gpuplace.testenv.localimages`), since no registry is reachable.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from gpuplace.cli import main
from gpuplace.inventory import load_inventory
from gpuplace.k8s import Api, connect
from gpuplace.testenv import nodeclean
from gpuplace.testenv.localimages import busybox_image
from gpuplace.testenv.nodes import FLEET_LABEL
from gpuplace.testenv.realnode import REAL_NODE_LABEL, RealNode

pytestmark = [
    pytest.mark.integration,
    pytest.mark.controlplane,
    pytest.mark.realnode,
    pytest.mark.usefixtures("real_node_slot"),
]


def httpd_pod(node: str, image: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "httpd", "namespace": "default"},
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "httpd",
                    "image": image,
                    "imagePullPolicy": "Never",
                    "command": [
                        "/bin/sh",
                        "-c",
                        "mkdir -p /tmp/www && echo hello > /tmp/www/index.html "
                        "&& exec /bin/busybox httpd -f -p 8080 -h /tmp/www",
                    ],
                    "ports": [{"containerPort": 8080}],
                    "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 1},
                }
            ],
        },
    }


def wait_ready(api: Api, name: str, timeout_s: float = 120.0) -> dict[str, Any]:
    end = time.monotonic() + timeout_s
    while True:
        pod = api.get("v1", "Pod", name, "default")
        conditions = (pod.get("status") or {}).get("conditions") or ()
        if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
            return pod
        assert time.monotonic() < end, f"pod {name} not Ready: {pod.get('status')}"
        time.sleep(0.5)


def test_real_node_beside_kwok_nodes_runs_a_container_and_down_leaves_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The kubelet's unix sockets go under the state directory (108 bytes at most): pytest's tmp_path can be
    # longer once its counter has three digits, so a short directory of /tmp, removed at the end.
    state = Path(tempfile.mkdtemp(prefix="gprn-", dir="/tmp")) / "state"
    # no --fleet: the default fleet, said so (a control plane with no nodes would strand a first run)
    assert main(["testenv", "--state-dir", str(state), "up", "--real-node"]) == 0
    out = capsys.readouterr().out
    fleet = load_inventory("mixed-a100-h100-l4")
    assert f"{len(fleet.nodes)} simulated nodes of fleet mixed-a100-h100-l4" in out
    node = RealNode.load(state)
    assert node is not None and f"real node {node.name} Ready" in out
    try:
        api = Api(connect(state / "kubeconfig"))
        nodes = {n["metadata"]["name"]: n for n in api.list("v1", "Node")}
        real = nodes[node.name]
        assert real["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")
        assert real["metadata"]["labels"][REAL_NODE_LABEL] == "true"
        kwok = [n for n in nodes.values() if n["metadata"]["labels"].get(FLEET_LABEL) == "true"]
        assert len(kwok) == len(fleet.nodes)  # the fleet's simulated GPU nodes, beside the real one
        api.create(httpd_pod(node.name, busybox_image()), "default")
        pod = wait_ready(api, "httpd")
        with urllib.request.urlopen(f"http://{pod['status']['podIP']}:8080/", timeout=10) as resp:
            assert resp.read().decode().strip() == "hello"  # this machine reaches the pod over the bridge
        api.client.close()
    finally:
        assert main(["testenv", "--state-dir", str(state), "down"]) == 0
    left = nodeclean.leftovers(node.host_before, owned_dirs=node.owned_dirs(), shim_address=str(node.socket))
    assert left == []
    assert nodeclean.processes_mentioning(str(state)) == []
    shutil.rmtree(state.parent)


def test_the_service_route_goes_before_one_a_killed_node_left() -> None:
    """A node killed before it cleaned up leaves its DNAT rule for the kubernetes Service, pointing at its
    API server's port, now closed. The next node's rule must be the one iptables matches first, or every
    in-cluster call from its pods is refused (a CI run of 2026-12-04). Real iptables, on a subnet and Service
    address of this test's own, removed at the end."""
    subnet, service = "10.91.0.0/24", "10.92.0.1:443"
    stale = ["-s", subnet, "-d", "10.92.0.1/32", "-p", "tcp", "--dport", "443", "-j", "DNAT"]
    stale += ["--to-destination", "10.91.0.1:1"]
    env = {"PATH": nodeclean.host_path()}
    subprocess.run(["iptables", "-t", "nat", "-A", "PREROUTING", *stale], check=True, env=env)
    try:
        nodeclean.route_service(subnet, service, "10.91.0.1:6443")
        nodeclean.route_service(subnet, service, "10.91.0.1:6443")  # again: still one rule of ours, first
        routes = nodeclean.service_routes(service)
        assert len(routes) == 2 and routes[0].endswith("--to-destination 10.91.0.1:6443"), routes
    finally:
        for rule in nodeclean.service_routes(service):
            subprocess.run(["iptables", "-t", "nat", "-D", *rule.split()[1:]], check=True, env=env)
    assert nodeclean.service_routes(service) == []
