"""The ``llm-d`` form: an ``InferencePool`` (inference.networking.k8s.io/v1) that selects the plan's serving
pods, and the endpoint picker (EPP, llm-d's inference scheduler) that the pool names, with its settings.

The pool selects the pods of the Deployment form (same labels; apply ``manifests/`` or the ``dra`` form
for the servers) on the vLLM port. The EPP runs as its own Deployment and Service (gRPC ext-proc on
9002) with a ConfigMap holding its ``EndpointPickerConfig``: queue, KV-cache and prefix-cache scorers and
a saturation detector whose queue-depth threshold is the concurrency the plan sized each replica for (its
99th percentile), so the picker treats a replica as saturated where the prediction stops holding. The
EPP's Role lets it watch pods and pools in the namespace. A Gateway and HTTPRoute that send traffic to the
pool are the platform's (the Gateway API CRDs are not part of this form). Pure functions.
"""

from __future__ import annotations

from typing import Any

import yaml

from gpuplace.labels import APP, MANAGED_BY, MANAGER
from gpuplace.manifests.builders import PORT, _labels, _meta, _selector
from gpuplace.types.plan import PlacementPlan

POOL_API = "inference.networking.k8s.io/v1"
EPP_CONFIG_API = "inference.networking.x-k8s.io/v1alpha1"
EPP_IMAGE = "ghcr.io/llm-d/llm-d-inference-scheduler:v0.3.2"
EPP_GRPC_PORT = 9002
EPP_HEALTH_PORT = 9003
EPP_METRICS_PORT = 9090
KV_CACHE_UTIL_THRESHOLD = 0.8
CONFIG_FILE = "epp.yaml"


def epp_name(plan: PlacementPlan) -> str:
    return f"{plan.deployment_name}-epp"


def _epp_labels(plan: PlacementPlan) -> dict[str, str]:
    return {APP: epp_name(plan), MANAGED_BY: MANAGER, "app.kubernetes.io/component": "endpoint-picker"}


def queue_depth_threshold(plan: PlacementPlan) -> int:
    pred = plan.chosen.prediction
    return max(1, int(pred.max_batch)) if pred is not None else 5


def endpoint_picker_config(plan: PlacementPlan) -> dict[str, Any]:
    """The EPP's ``EndpointPickerConfig``: scorers, the picker, and the plan's saturation thresholds."""
    scorers = (("queue-scorer", 2), ("kv-cache-utilization-scorer", 2), ("prefix-cache-scorer", 3))
    return {
        "apiVersion": EPP_CONFIG_API,
        "kind": "EndpointPickerConfig",
        "plugins": [{"type": t} for t, _ in scorers] + [{"type": "max-score-picker"}],
        "schedulingProfiles": [
            {
                "name": "default",
                "plugins": [{"pluginRef": t, "weight": w} for t, w in scorers]
                + [{"pluginRef": "max-score-picker"}],
            }
        ],
        "saturationDetector": {
            "queueDepthThreshold": queue_depth_threshold(plan),
            "kvCacheUtilThreshold": KV_CACHE_UTIL_THRESHOLD,
        },
    }


def inference_pool(plan: PlacementPlan) -> dict[str, Any]:
    return {
        "apiVersion": POOL_API,
        "kind": "InferencePool",
        "metadata": _meta(plan, plan.deployment_name),
        "spec": {
            "selector": {"matchLabels": _selector(plan)},
            "targetPorts": [{"number": PORT}],
            "endpointPickerRef": {
                "name": epp_name(plan),
                "port": {"number": EPP_GRPC_PORT},
                "failureMode": "FailClose",
            },
        },
    }


def _epp_deployment(plan: PlacementPlan, image: str) -> dict[str, Any]:
    name = epp_name(plan)
    labels = _epp_labels(plan)
    probe = {"grpc": {"port": EPP_HEALTH_PORT, "service": "inference-extension"}, "periodSeconds": 10}
    container = {
        "name": "epp",
        "image": image,
        "args": [
            "--pool-name",
            plan.deployment_name,
            "--pool-namespace",
            "$(POD_NAMESPACE)",
            "--config-file",
            f"/config/{CONFIG_FILE}",
            "--grpc-port",
            str(EPP_GRPC_PORT),
            "--grpc-health-port",
            str(EPP_HEALTH_PORT),
            "--metrics-port",
            str(EPP_METRICS_PORT),
        ],
        "env": [{"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}],
        "ports": [
            {"name": "grpc", "containerPort": EPP_GRPC_PORT, "protocol": "TCP"},
            {"name": "grpc-health", "containerPort": EPP_HEALTH_PORT, "protocol": "TCP"},
            {"name": "metrics", "containerPort": EPP_METRICS_PORT, "protocol": "TCP"},
        ],
        "resources": {
            "requests": {"cpu": "1", "memory": "1Gi"},
            "limits": {"cpu": "1", "memory": "1Gi"},
        },
        "readinessProbe": probe,
        "livenessProbe": probe | {"failureThreshold": 6},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [{"name": "config", "mountPath": "/config", "readOnly": True}],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels | {"gpuplace.io/plan-id": plan.plan_id}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": name,
                    "containers": [container],
                    "volumes": [{"name": "config", "configMap": {"name": name}}],
                },
            },
        },
    }


def llmd_objects(plan: PlacementPlan, *, image: str = EPP_IMAGE) -> list[dict[str, Any]]:
    """The ``llm-d`` form's objects: RBAC, the EPP's config, Service and Deployment, then the pool."""
    name = epp_name(plan)
    meta = {"name": name, "labels": _labels(plan) | _epp_labels(plan)}
    rules = [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
        {
            "apiGroups": ["inference.networking.k8s.io"],
            "resources": ["inferencepools"],
            "verbs": ["get", "list", "watch"],
        },
        {
            "apiGroups": ["inference.networking.x-k8s.io"],
            "resources": ["inferenceobjectives"],
            "verbs": ["get", "list", "watch"],
        },
    ]
    config = yaml.safe_dump(endpoint_picker_config(plan), sort_keys=False)
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": dict(meta)},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": dict(meta),
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": dict(meta),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name}],
        },
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": dict(meta), "data": {CONFIG_FILE: config}},
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": dict(meta),
            "spec": {
                "type": "ClusterIP",
                "selector": _epp_labels(plan),
                "ports": [
                    {"name": "grpc", "port": EPP_GRPC_PORT, "targetPort": "grpc", "protocol": "TCP"},
                    {"name": "metrics", "port": EPP_METRICS_PORT, "targetPort": "metrics", "protocol": "TCP"},
                ],
            },
        },
        _epp_deployment(plan, image),
        inference_pool(plan),
    ]
