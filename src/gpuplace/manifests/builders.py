"""Builders of the serving specs for a :class:`~gpuplace.types.plan.PlacementPlan` (docs/placement.md).

Every object carries ``app.kubernetes.io/managed-by: gpuplace`` and ``gpuplace.io/plan-id``. The pod
template pins replicas to the planned nodes with required node affinity on ``kubernetes.io/hostname``
and spreads them one skew at most per node (``DoNotSchedule``), so when the plan puts one replica per
node — which the planner prefers — the scheduler has exactly the planned multiset of nodes left; zones
are spread with ``ScheduleAnyway``. Resources are Guaranteed QoS (integer CPUs, requests = limits); GPU
resources follow the node's device-plugin strategy: ``nvidia.com/gpu`` for whole GPUs, time-sliced
shares and MIG under the ``single`` strategy, ``nvidia.com/mig-<profile>`` under ``mixed``. No
Namespace objects are made: apply into the namespace of your choice.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuplace.errors import InvalidInput
from gpuplace.labels import (
    APP,
    GPU_RESOURCE,
    HOSTNAME,
    MANAGED_BY,
    MANAGER,
    MIG_RESOURCE_PREFIX,
    PLAN_LABEL,
    PRODUCT,
    ZONE,
    gfd_labels,
)
from gpuplace.serving.runtime import vllm_args
from gpuplace.types import Inventory, Node
from gpuplace.types.engines import CLUSTER_ENGINE
from gpuplace.types.plan import PlacementPlan
from gpuplace.types.serving import ServingSpec

VLLM_IMAGE = CLUSTER_ENGINE.image  # the release whose defaults the plan records
PORT = 8000
CACHE_DIR = "/cache"


@dataclass(frozen=True, slots=True)
class ServingOptions:
    """How the serving runtime runs; the defaults suit vLLM's OpenAI server image."""

    image: str = VLLM_IMAGE
    model_path: str = ""  # what vLLM loads (a Hugging Face id or a path); default: the plan's model
    served_model_name: str = ""  # default: the plan's model
    cpus_per_gpu: int = 4
    memory_gib_per_gpu: int = 16
    numa_align: bool = False  # size CPUs to the GPUs' share of their NUMA node (static CPU manager)
    priority_class: str = ""
    extra_args: tuple[str, ...] = ()
    dra_device_class: str = "gpu.nvidia.com"
    mig_device_class: str = "mig.nvidia.com"

    def __post_init__(self) -> None:
        if self.cpus_per_gpu < 1 or self.memory_gib_per_gpu < 1:
            raise InvalidInput(
                "cpus_per_gpu/memory_gib_per_gpu", (self.cpus_per_gpu, self.memory_gib_per_gpu), "must be ≥ 1"
            )
        if not self.image or any(c.isspace() for c in self.image):
            raise InvalidInput("image", self.image, "is not an image reference", f"e.g. {VLLM_IMAGE}")


@dataclass(frozen=True, slots=True)
class ManifestSet:
    """Files to write: name → objects, applied in name order; alternatives are not applied by default."""

    apply: Mapping[str, tuple[Mapping[str, Any], ...]]
    alternatives: Mapping[str, tuple[Mapping[str, Any], ...]] = field(default_factory=dict)
    left_out: Mapping[str, str] = field(default_factory=dict)  # form → why it cannot express the plan
    forms: tuple[str, ...] = ()  # the forms written (``left_out`` not among them)
    notes: tuple[str, ...] = ()  # what the written forms keep and need, for the plan's notes

    def objects(self) -> tuple[Mapping[str, Any], ...]:
        return tuple(o for name in sorted(self.apply) for o in self.apply[name])


def _labels(plan: PlacementPlan) -> dict[str, str]:
    return {
        APP: plan.deployment_name,
        "app.kubernetes.io/component": "inference-server",
        MANAGED_BY: MANAGER,
        PLAN_LABEL: plan.plan_id,
    }


def _selector(plan: PlacementPlan) -> dict[str, str]:
    return {APP: plan.deployment_name, MANAGED_BY: MANAGER}


def _planned_nodes(plan: PlacementPlan, inventory: Inventory) -> list[Node]:
    nodes = []
    for name in plan.nodes:
        try:
            nodes.append(inventory.node(name))
        except KeyError:
            raise InvalidInput(
                "inventory",
                inventory.source,
                f"has no node {name!r} that the plan uses",
                "Render with the inventory the plan was made from",
            ) from None
    return nodes


def node_affinity(plan: PlacementPlan) -> dict[str, Any]:
    """Required node affinity to the planned nodes (the kfp-kubernetes ``node_affinity_json`` shape)."""
    return {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": list(plan.nodes)}]}
            ]
        }
    }


def tolerations(plan: PlacementPlan, inventory: Inventory) -> list[dict[str, str]]:
    """Tolerations for the hard taints of the planned nodes (the planner only picks tolerated ones)."""
    seen: dict[tuple[str, str, str], dict[str, str]] = {}
    for node in _planned_nodes(plan, inventory):
        for t in node.taints:
            if t.effect == "PreferNoSchedule":
                continue
            tol = (
                {"key": t.key, "operator": "Equal", "value": t.value, "effect": t.effect}
                if t.value
                else {
                    "key": t.key,
                    "operator": "Exists",
                    "effect": t.effect,
                }
            )
            seen[(t.key, t.value, t.effect)] = tol
    return [seen[k] for k in sorted(seen)]


def node_selector(plan: PlacementPlan, inventory: Inventory) -> dict[str, str]:
    """The GPU product label every planned node shares (a coarse guard beside the node affinity)."""
    products = {gfd_labels(n).get(PRODUCT, "") for n in _planned_nodes(plan, inventory)}
    return {PRODUCT: products.pop()} if len(products) == 1 and "" not in products else {}


def gpu_resources(plan: PlacementPlan, inventory: Inventory) -> dict[str, str]:
    chosen = plan.chosen
    if chosen.kind == "mig":
        strategies = {n.mig_strategy for n in _planned_nodes(plan, inventory)}
        if len(strategies) != 1:
            raise InvalidInput(
                "plan.placements",
                sorted(strategies),
                "MIG replicas on nodes with different MIG strategies",
                "Re-plan on nodes of one strategy",
            )
        if strategies.pop() == "mixed":
            return {MIG_RESOURCE_PREFIX + chosen.mig_profile: "1"}
        return {GPU_RESOURCE: "1"}
    return {GPU_RESOURCE: str(chosen.gpus_per_replica)}


def serving_spec(plan: PlacementPlan, inventory: Inventory, options: ServingOptions) -> ServingSpec:
    """What every replica of ``plan`` runs on a cluster: vLLM's OpenAI server with the planned shape and
    the engine parameters the prediction assumed (``plan.engine``), so the deployment runs what was
    predicted."""
    chosen = plan.chosen
    if plan.engine is None:
        raise InvalidInput(
            "plan.engine", None, "the plan has no engine parameters to serve with", "Plan it again"
        )
    resources = gpu_resources(plan, inventory)
    ((resource, count),) = resources.items()
    served = options.served_model_name or plan.model
    args = vllm_args(
        model=options.model_path or plan.model,
        served_model_name=served,
        tensor_parallel_size=chosen.tp,
        port=PORT,
        engine_args=plan.engine.to_vllm_args(),
    )
    return ServingSpec(
        engine=CLUSTER_ENGINE.name,
        image=options.image,
        model=plan.model,
        model_source=options.model_path or plan.model,
        served_model_name=served,
        args=(*args, *options.extra_args),
        gpu_resource=resource,
        gpus_per_replica=int(count),
        tensor_parallel=chosen.tp,
        mig_profile=chosen.mig_profile,
        gpu_share=chosen.share if chosen.kind == "shared" else 1.0,
        replicas=plan.replicas,
        port=PORT,
        engine_params=plan.engine,
    )


def cpu_count(plan: PlacementPlan, inventory: Inventory, options: ServingOptions) -> int:
    gpus = plan.chosen.gpus_per_replica
    if not options.numa_align:
        return options.cpus_per_gpu * gpus
    per_gpu = []
    for node in _planned_nodes(plan, inventory):
        physical = max(node.physical_gpu_count, 1)
        numa_gpus = max(1, -(-physical // max(node.numa_nodes, 1)))
        per_gpu.append(max(1, node.cpus_per_numa_node() // numa_gpus))
    return min(per_gpu) * gpus


def _container(
    plan: PlacementPlan, inventory: Inventory, options: ServingOptions, *, dra: bool = False
) -> dict[str, Any]:
    serving = plan.serving or serving_spec(plan, inventory, options)
    cpus = str(cpu_count(plan, inventory, options))
    memory = f"{options.memory_gib_per_gpu * plan.chosen.gpus_per_replica}Gi"
    limits: dict[str, str] = {"cpu": cpus, "memory": memory}
    if not dra:
        limits |= {serving.gpu_resource: str(serving.gpus_per_replica)}
    resources: dict[str, Any] = {"requests": dict(limits), "limits": dict(limits)}
    if dra:
        resources["claims"] = [{"name": "gpus"}]
    probe = {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 10, "timeoutSeconds": 5}
    return {
        "name": "server",
        "image": serving.image,
        "imagePullPolicy": "Always",
        "command": list(CLUSTER_ENGINE.command),
        "args": list(serving.args),
        "ports": [{"name": "http", "containerPort": serving.port, "protocol": "TCP"}],
        "env": [
            {"name": "HOME", "value": CACHE_DIR},
            {"name": "HF_HOME", "value": f"{CACHE_DIR}/huggingface"},
            {"name": "VLLM_CACHE_ROOT", "value": f"{CACHE_DIR}/vllm"},
            {"name": "XDG_CACHE_HOME", "value": CACHE_DIR},
        ],
        "resources": resources,
        "startupProbe": probe | {"failureThreshold": 90},
        "readinessProbe": probe | {"failureThreshold": 3},
        "livenessProbe": probe | {"failureThreshold": 6},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": 10001,
            "runAsGroup": 10001,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [
            {"name": "cache", "mountPath": CACHE_DIR},
            {"name": "tmp", "mountPath": "/tmp"},
            {"name": "dshm", "mountPath": "/dev/shm"},
        ],
    }


def _pod_spec(
    plan: PlacementPlan, inventory: Inventory, options: ServingOptions, *, dra: bool = False
) -> dict[str, Any]:
    selector = _selector(plan)
    spec: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 60,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 10001,
            "runAsGroup": 10001,
            "fsGroup": 10001,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "affinity": {"nodeAffinity": node_affinity(plan)},
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": HOSTNAME,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": selector},
            },
            {
                "maxSkew": 1,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": selector},
            },
        ],
        "tolerations": tolerations(plan, inventory),
        "containers": [_container(plan, inventory, options, dra=dra)],
        "volumes": [
            {"name": "cache", "emptyDir": {"sizeLimit": "50Gi"}},
            {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}},
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}},
        ],
    }
    if options.priority_class:
        spec["priorityClassName"] = options.priority_class
    if dra:
        spec["resourceClaims"] = [
            {"name": "gpus", "resourceClaimTemplateName": f"{plan.deployment_name}-gpus"}
        ]
    return spec


def _meta(plan: PlacementPlan, name: str) -> dict[str, Any]:
    return {"name": name, "labels": _labels(plan)}


def deployment(
    plan: PlacementPlan, inventory: Inventory, options: ServingOptions, *, dra: bool = False
) -> dict[str, Any]:
    placements = [{"replica": p.replica, "node": p.node, "gpu_ids": list(p.gpu_ids)} for p in plan.placements]
    meta = _meta(plan, plan.deployment_name)
    meta["annotations"] = {"gpuplace.io/placements": json.dumps(placements, separators=(",", ":"))}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "replicas": plan.replicas,
            "revisionHistoryLimit": 3,
            # GPUs are planned exactly: a surge replica would have nowhere to go.
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": _selector(plan)},
            "template": {
                "metadata": {
                    "labels": _labels(plan),
                    "annotations": {"gpuplace.io/shape": plan.chosen.label},
                },
                "spec": _pod_spec(plan, inventory, options, dra=dra),
            },
        },
    }


def service(plan: PlacementPlan) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(plan, plan.deployment_name),
        "spec": {
            "type": "ClusterIP",
            "selector": _selector(plan),
            "ports": [{"name": "http", "port": PORT, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def pod_disruption_budget(plan: PlacementPlan) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _meta(plan, plan.deployment_name),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": _selector(plan)}},
    }


def inference_service(plan: PlacementPlan, inventory: Inventory, options: ServingOptions) -> dict[str, Any]:
    """A KServe InferenceService running the same container with the same placement."""
    pod = _pod_spec(plan, inventory, options)
    container = dict(pod["containers"][0])
    container["name"] = "kserve-container"
    predictor = {
        "minReplicas": plan.replicas,
        "maxReplicas": plan.replicas,
        "affinity": pod["affinity"],
        "tolerations": pod["tolerations"],
        "securityContext": pod["securityContext"],
        "automountServiceAccountToken": False,
        "containers": [container],
        "volumes": pod["volumes"],
    }
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": _meta(plan, plan.deployment_name)
        | {"annotations": {"serving.kserve.io/deploymentMode": "RawDeployment"}},
        "spec": {"predictor": predictor},
    }


def kfp_fragments(plan: PlacementPlan, inventory: Inventory) -> dict[str, Any]:
    """JSON for kfp-kubernetes ``add_node_affinity_json``, ``add_toleration_json`` and
    ``add_node_selector_json``, and the task's ``set_accelerator_type`` / ``set_accelerator_limit``: the
    replica's GPU resource and count, the count a *string* (KFP's driver resolves only string values
    there: a number gives no GPU limit at all)."""
    ((resource, count),) = gpu_resources(plan, inventory).items()
    return {
        "node_affinity": node_affinity(plan),
        "tolerations": tolerations(plan, inventory),
        "node_selector": node_selector(plan, inventory),
        "accelerator_type": resource,
        "accelerator_count": str(count),
    }
