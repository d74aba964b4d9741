"""Node objects for a simulated fleet: one Kubernetes ``Node`` per :class:`gpuplace.types.Node`.

What kube-scheduler sees must be what the planner planned for, so each Node carries what the NVIDIA
device plugin and GPU Feature Discovery publish on a real node — resources, GFD labels, zone and rack —
as :mod:`gpuplace.labels` defines them (the same module reads them back from a live cluster),
plus the fleet's taints and the annotation ``kwok.x-k8s.io/node: fake`` that tells KWOK to keep the node
Ready and run its pods. GPUs the inventory marks as allocated become one placeholder pod per node, bound
to it directly, so they are used exactly as a real workload would use them. Pure functions.
"""

from __future__ import annotations

import re
from typing import Any

from gpuplace import labels as gfd
from gpuplace.types import Inventory, Node

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_ANNOTATION_VALUE = "fake"
FLEET_LABEL = "gpuplace.io/simulated"
PLACEHOLDER_NAMESPACE = "gpuplace-system"
PLACEHOLDER_LABEL = "gpuplace.io/placeholder"
# Nodes with no CPU/memory in the inventory still have to fit a serving pod's requests.
DEFAULT_CPU_CORES = 64
DEFAULT_MEMORY_GIB = 512

_LABEL_VALUE_BAD = re.compile(r"[^A-Za-z0-9._-]+")


def label_value(text: str) -> str:
    """``text`` as a valid label value, as GFD writes products ("NVIDIA H100 80GB" → "NVIDIA-H100-80GB")."""
    return _LABEL_VALUE_BAD.sub("-", text.strip())[:63].strip("-._")


def node_object(node: Node) -> dict[str, Any]:
    """The ``v1/Node`` manifest (status included) for one simulated node."""
    labels = {
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "type": "kwok",
        FLEET_LABEL: "true",
        **{k: label_value(v) for k, v in gfd.gfd_labels(node).items()},
    }
    resources = gfd.node_resources(node)
    if not node.cpu_cores:
        resources["cpu"] = str(DEFAULT_CPU_CORES)
    if not node.memory_gib:
        resources["memory"] = f"{DEFAULT_MEMORY_GIB}Gi"
    spec: dict[str, Any] = {}
    if node.taints:
        spec["taints"] = [{"key": t.key, "value": t.value, "effect": t.effect} for t in node.taints]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "labels": labels,
            "annotations": {
                KWOK_ANNOTATION: KWOK_ANNOTATION_VALUE,
                "node.alpha.kubernetes.io/ttl": "0",
                **gfd.topology_annotations(node),
            },
        },
        "spec": spec,
        "status": {"capacity": dict(resources), "allocatable": dict(resources)},
    }


def placeholder_pod(node: Node) -> dict[str, Any] | None:
    """A pod holding the GPUs the inventory says are already allocated on ``node`` (None if none are)."""
    used = gfd.used_resources(node)
    if not used:
        return None
    amounts = {k: str(v) for k, v in used.items()}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"allocated-{node.name}"[:253],
            "namespace": PLACEHOLDER_NAMESPACE,
            "labels": {PLACEHOLDER_LABEL: "true", "app.kubernetes.io/managed-by": "gpuplace"},
        },
        "spec": {
            "nodeName": node.name,  # bound directly: these GPUs were taken before gpuplace looked
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {
                    "name": "allocated",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"limits": amounts, "requests": amounts},
                }
            ],
        },
    }


def node_objects(inventory: Inventory) -> list[dict[str, Any]]:
    return [node_object(n) for n in inventory.nodes]


def placeholder_pods(inventory: Inventory) -> list[dict[str, Any]]:
    return [p for p in (placeholder_pod(n) for n in inventory.nodes) if p is not None]
