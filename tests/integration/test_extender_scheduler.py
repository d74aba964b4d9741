"""The extender under the real kube-scheduler: filter, prioritize and bind calls, Pending reasons, ignorable.

A second kube-scheduler (profile ``gpuplace-test``, the ``extenders`` stanza of ``gpuplace extender
config``) runs beside the session's control plane, and ``gpuplace extender serve`` runs as its own
process watching the cluster. Three KWOK nodes of our own, labelled and tainted so that no other test's
pods land there: ``*-full`` (8 H100, 7 taken), ``*-empty`` (8 H100, two NVLink islands of 4) and
``*-pcie`` (4 L4, no NVLink). Fake only what cannot run here: the GPUs (simulated nodes).
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuplace.catalog import load_gpu_catalog
from gpuplace.extender.config import ExtenderSettings, scheduler_configuration
from gpuplace.extender.fit import ASSIGNMENT_ANNOTATION
from gpuplace.inventory import parse_fleet
from gpuplace.testenv.controlplane import ControlPlane, free_port
from gpuplace.testenv.env import add_fleet
from gpuplace.testenv.nodes import PLACEHOLDER_NAMESPACE
from tests.support.localsched import LocalScheduler, start_scheduler

pytestmark = [pytest.mark.integration, pytest.mark.controlplane]

SCHEDULER = "gpuplace-test"
H100 = "NVIDIA-H100-80GB-HBM3"
TEST_LABEL = "gpuplace.io/extender-test"


def _hgx(name: str, allocated: list[int]) -> dict[str, Any]:
    return {
        "name": name,
        "numa_nodes": 2,
        "labels": {TEST_LABEL: "true"},
        "taints": [{"key": TEST_LABEL, "value": "true", "effect": "NoSchedule"}],
        "gpus": [
            {
                "product": H100,
                "count": 4,
                "numa_node": 0,
                "pcie_switch": "s0",
                "nvlink_island": "isl0",
                "allocated": allocated[:4],
            },
            {
                "product": H100,
                "count": 4,
                "numa_node": 1,
                "pcie_switch": "s1",
                "nvlink_island": "isl1",
                "allocated": allocated[4:],
            },
        ],
    }


class Extender:
    """``gpuplace extender serve`` as a child process; restartable on the same port."""

    def __init__(self, kubeconfig: Path, log: Path) -> None:
        self.port = free_port()
        self.kubeconfig = kubeconfig
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        cmd = [
            sys.executable,
            "-m",
            "gpuplace",
            "extender",
            "serve",
            "--kubeconfig",
            str(self.kubeconfig),
            "--port",
            str(self.port),
        ]
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        end = time.monotonic() + 60
        while time.monotonic() < end:
            assert self.proc.poll() is None, self.log.read_text()[-2000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"extender not ready: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            self.proc.wait(10)
        self.proc = None

    def stats(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/stats", timeout=5) as r:
            result: dict[str, Any] = json.load(r)
            return result


@pytest.fixture(scope="module")
def cluster(
    controlplane: ControlPlane, kube_api: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    suffix = uuid.uuid4().hex[:5]
    names = {"full": f"ext-{suffix}-full", "empty": f"ext-{suffix}-empty", "pcie": f"ext-{suffix}-pcie"}
    doc = {
        "schema": "gpuplace.io/fleet/v1",
        "nodes": [
            _hgx(names["full"], [1, 1, 1, 1, 1, 1, 1, 0]),
            _hgx(names["empty"], [0] * 8),
            {
                "name": names["pcie"],
                "numa_nodes": 2,
                "labels": {TEST_LABEL: "true"},
                "taints": [{"key": TEST_LABEL, "value": "true", "effect": "NoSchedule"}],
                "gpus": [
                    {"product": "NVIDIA-L4", "count": 2, "numa_node": 0, "pcie_switch": "s0"},
                    {"product": "NVIDIA-L4", "count": 2, "numa_node": 1, "pcie_switch": "s1"},
                ],
            },
        ],
    }
    inventory = dataclasses.replace(parse_fleet(doc, "test", load_gpu_catalog()), source=controlplane.fleet)
    add_fleet(controlplane, inventory)
    work = tmp_path_factory.mktemp("extender")
    extender = Extender(controlplane.kubeconfig, work / "extender.log")
    extender.start()
    settings = ExtenderSettings(
        url=f"http://127.0.0.1:{extender.port}/gpuplace", scheduler_name=SCHEDULER, http_timeout_s=3
    )
    scheduler: LocalScheduler = start_scheduler(
        controlplane, scheduler_configuration(settings), work, name="kube-scheduler-gpuplace"
    )
    try:
        yield {"names": names, "extender": extender, "scheduler": scheduler, "work": work}
    finally:
        scheduler.stop()
        extender.stop()
        for name in names.values():
            kube_api.delete(
                {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"allocated-{name}"}},
                PLACEHOLDER_NAMESPACE,
            )
            kube_api.delete({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})


def gpu_pod(name: str, gpus: int, **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations},
        "spec": {
            "schedulerName": SCHEDULER,
            "nodeSelector": {TEST_LABEL: "true"},
            "tolerations": [{"key": TEST_LABEL, "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {
                        "limits": {"nvidia.com/gpu": str(gpus)},
                        "requests": {"nvidia.com/gpu": str(gpus)},
                    },
                }
            ],
        },
    }


def wait_bound(api: Any, namespace: str, name: str, timeout_s: float = 60) -> dict[str, Any]:
    end = time.monotonic() + timeout_s
    while True:
        pod: dict[str, Any] = api.get("v1", "Pod", name, namespace)
        if pod["spec"].get("nodeName"):
            return pod
        assert time.monotonic() < end, f"pod {name} not bound: {pod.get('status')}"
        time.sleep(0.2)


def test_scheduler_calls_the_extender_and_binds_where_it_scored_best(
    cluster: dict[str, Any], kube_api: Any, kube_namespace: str
) -> None:
    names, extender = cluster["names"], cluster["extender"]
    kube_api.create(gpu_pod("one", 1), kube_namespace)
    pod = wait_bound(kube_api, kube_namespace, "one")
    stats = extender.stats()
    decision = stats["pods"][f"{kube_namespace}/one"]
    assert all(stats["calls"].get(v, 0) >= 1 for v in ("filter", "prioritize", "bind"))
    # FGD: the nearly full node's last free GPU is a fragment; taking it beats breaking into an empty node.
    assert decision["best"] == [names["full"]] and decision["scores"][names["full"]] == 10
    assert pod["spec"]["nodeName"] == names["full"] == decision["bound"]
    recorded = json.loads(pod["metadata"]["annotations"][ASSIGNMENT_ANNOTATION])
    assert recorded == {"node": names["full"], "devices": [f"{names['full']}/gpu7"]}


def test_topology_requirement_picks_a_whole_nvlink_island(
    cluster: dict[str, Any], kube_api: Any, kube_namespace: str
) -> None:
    names = cluster["names"]
    kube_api.create(gpu_pod("island", 4, **{"gpuplace.io/require-topology": "nvlink"}), kube_namespace)
    pod = wait_bound(kube_api, kube_namespace, "island")
    assert pod["spec"]["nodeName"] == names["empty"]
    devices = json.loads(pod["metadata"]["annotations"][ASSIGNMENT_ANNOTATION])["devices"]
    indices = sorted(int(d.rsplit("gpu", 1)[1]) for d in devices)
    assert indices in ([0, 1, 2, 3], [4, 5, 6, 7])
    filtered = cluster["extender"].stats()["pods"][f"{kube_namespace}/island"]
    assert filtered["passed"] == 1 and any("no NVLink island with 4 GPUs" in r for r in filtered["reasons"])


def test_unmeetable_topology_stays_pending_with_the_extenders_reason(
    cluster: dict[str, Any], kube_api: Any, kube_namespace: str
) -> None:
    kube_api.create(gpu_pod("too-big", 8, **{"gpuplace.io/require-topology": "nvlink"}), kube_namespace)
    end = time.monotonic() + 60
    messages: list[str] = []
    while time.monotonic() < end:
        events = kube_api.list("v1", "Event", kube_namespace, field_selector="involvedObject.name=too-big")
        messages = [e.get("message", "") for e in events if e.get("reason") == "FailedScheduling"]
        if any("gpuplace: no NVLink island with 8 GPUs" in m for m in messages):
            break
        time.sleep(0.5)
    assert any("gpuplace: no NVLink island with 8 GPUs" in m for m in messages), messages
    assert not kube_api.get("v1", "Pod", "too-big", kube_namespace)["spec"].get("nodeName")


def test_ignorable_extender_down_scheduling_goes_on(
    cluster: dict[str, Any], kube_api: Any, kube_namespace: str
) -> None:
    extender = cluster["extender"]
    extender.stop()
    try:
        kube_api.create(gpu_pod("no-extender", 1), kube_namespace)
        pod = wait_bound(kube_api, kube_namespace, "no-extender", timeout_s=90)
        assert ASSIGNMENT_ANNOTATION not in (pod["metadata"].get("annotations") or {})
        assert pod["spec"]["nodeName"] in cluster["names"].values()
    finally:
        extender.start()
