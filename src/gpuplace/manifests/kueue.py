"""The ``kueue`` form: the plan queued through Kueue with Topology-Aware Scheduling.

A ``Topology`` (kueue.x-k8s.io/v1beta2) with the levels the fleet's nodes carry, from the widest down:
zone (``topology.kubernetes.io/zone``), rack (``gpuplace.io/rack``), multi-node NVLink domain
(``nvidia.com/gpu.clique``, GB200-class racks) and host (``kubernetes.io/hostname``, always last, as
Kueue requires); a ``ResourceFlavor`` for the planned GPU product on that topology, tolerating the
planned nodes' taints; a ``ClusterQueue`` whose quota is what the plan takes (CPU, memory, GPUs) and a
``LocalQueue``; and the workload labelled with ``kueue.x-k8s.io/queue-name``, its pod templates annotated
with the topology level the plan's locality needs: ``podset-required-topology`` on the host for a replica
on one node (its GPUs were placed there), on the NVLink domain for a replica that spans nodes (a
tensor-parallel group never crosses one). The workload is the Deployment form, or the LeaderWorkerSet
form when a replica spans nodes.
Topology, ResourceFlavor and ClusterQueue are cluster-scoped (an administrator applies them). Pure.
"""

from __future__ import annotations

import copy
from typing import Any

from gpuplace.labels import HOSTNAME, NVLINK_CLIQUE, RACK, ZONE
from gpuplace.manifests.builders import (
    ServingOptions,
    _meta,
    cpu_count,
    deployment,
    gpu_resources,
    node_selector,
    tolerations,
)
from gpuplace.manifests.lws import leader_worker_set, spans_nodes
from gpuplace.types import Inventory
from gpuplace.types.plan import PlacementPlan

KUEUE_API = "kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"


def topology_levels(inventory: Inventory) -> list[str]:
    """The node labels of the fleet's levels, widest first, host last."""
    nodes = [n for n in inventory.nodes if n.gpus]
    levels = []
    if any(n.zone for n in nodes):
        levels.append(ZONE)
    if any(n.rack for n in nodes):
        levels.append(RACK)
    if any(dict(n.labels).get(NVLINK_CLIQUE) for n in nodes):
        levels.append(NVLINK_CLIQUE)
    return [*levels, HOSTNAME]


def required_level(plan: PlacementPlan) -> str:
    return NVLINK_CLIQUE if spans_nodes(plan) else HOSTNAME


def _annotate(template: dict[str, Any], plan: PlacementPlan, queue: str) -> None:
    meta = template.setdefault("metadata", {})
    meta.setdefault("labels", {})[QUEUE_LABEL] = queue
    meta.setdefault("annotations", {})[REQUIRED] = required_level(plan)


def kueue_objects(plan: PlacementPlan, inventory: Inventory, options: ServingOptions) -> list[dict[str, Any]]:
    """Topology, ResourceFlavor, ClusterQueue, LocalQueue, then the queued workload."""
    name = plan.deployment_name
    levels = topology_levels(inventory)
    ((gpu_resource, gpu_count),) = gpu_resources(plan, inventory).items()
    per_pod_gpus = int(gpu_count)
    pods = plan.replicas
    if spans_nodes(plan):
        workload = [o for o in leader_worker_set(plan, inventory, options) if o["kind"] == "LeaderWorkerSet"]
        (lws,) = workload
        group = lws["spec"]["leaderWorkerTemplate"]
        for key in ("leaderTemplate", "workerTemplate"):
            if key in group:
                _annotate(group[key], plan, name)
        lws["metadata"].setdefault("labels", {})[QUEUE_LABEL] = name
        size = group["size"]
        per_pod_gpus = plan.chosen.gpus_per_replica // size
        pods = plan.replicas * size
    else:
        dep = copy.deepcopy(deployment(plan, inventory, options))
        dep["metadata"]["labels"][QUEUE_LABEL] = name
        _annotate(dep["spec"]["template"], plan, name)
        workload = [dep]
    cpus = cpu_count(plan, inventory, options) * pods
    memory = options.memory_gib_per_gpu * plan.chosen.gpus_per_replica * plan.replicas
    flavor: dict[str, Any] = {"nodeLabels": node_selector(plan, inventory) or {HOSTNAME: plan.nodes[0]}}
    flavor["topologyName"] = name
    tolerated = tolerations(plan, inventory)
    if tolerated:
        flavor["tolerations"] = tolerated
    quota = [
        {"name": "cpu", "nominalQuota": str(cpus)},
        {"name": "memory", "nominalQuota": f"{memory}Gi"},
        {"name": gpu_resource, "nominalQuota": str(per_pod_gpus * pods)},
    ]
    return [
        {
            "apiVersion": KUEUE_API,
            "kind": "Topology",
            "metadata": _meta(plan, name),
            "spec": {"levels": [{"nodeLabel": label} for label in levels]},
        },
        {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": _meta(plan, name), "spec": flavor},
        {
            "apiVersion": KUEUE_API,
            "kind": "ClusterQueue",
            "metadata": _meta(plan, name),
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory", gpu_resource],
                        "flavors": [{"name": name, "resources": quota}],
                    }
                ],
            },
        },
        {
            "apiVersion": KUEUE_API,
            "kind": "LocalQueue",
            "metadata": _meta(plan, name),
            "spec": {"clusterQueue": name},
        },
        *workload,
    ]
