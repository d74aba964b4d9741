"""What a cluster needs to run the extender: the KubeSchedulerConfiguration and the extender's manifests.

:func:`scheduler_configuration` is kube-scheduler's ``--config`` with one ``extenders:`` entry
(``urlPrefix``, ``filterVerb``, ``prioritizeVerb``, ``bindVerb``, ``weight``, ``nodeCacheCapable``,
``managedResources``, ``ignorable``, ``httpTimeout``); :func:`manifests` are the Deployment, Service,
ServiceAccount and RBAC that run ``gpuplace extender serve`` in-cluster. Pure builders.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuplace import __version__
from gpuplace import labels as L
from gpuplace.errors import InvalidInput
from gpuplace.extender.server import DEFAULT_PORT, DEFAULT_PREFIX

NAME = "gpuplace-extender"
DEFAULT_NAMESPACE = "kube-system"
DEFAULT_IMAGE = f"ghcr.io/gpuplace/gpuplace-cpu:{__version__}"
# Each extender priority step (0–10) is worth weight × 10 on kube-scheduler's 0–100 plugin scale: 20 makes
# one step outweigh the default scoring plugins together, so the best fit wins unless it ties.
DEFAULT_WEIGHT = 20


@dataclass(frozen=True, slots=True)
class ExtenderSettings:
    url: str = f"http://127.0.0.1:{DEFAULT_PORT}{DEFAULT_PREFIX}"
    weight: int = DEFAULT_WEIGHT
    node_cache_capable: bool = True
    ignorable: bool = True
    bind: bool = True
    http_timeout_s: float = 5.0
    managed_resources: tuple[str, ...] = (L.GPU_RESOURCE,)
    scheduler_name: str = "default-scheduler"
    kubeconfig: str = ""  # clientConnection.kubeconfig; "" = in-cluster
    tls_ca_file: str = ""
    profile_plugins: dict[str, Any] = field(default_factory=dict)  # extra profile settings, as YAML

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise InvalidInput(
                "url",
                self.url,
                "is not an http(s) URL",
                f"e.g. http://127.0.0.1:{DEFAULT_PORT}{DEFAULT_PREFIX}",
            )
        if self.weight < 1:
            raise InvalidInput(
                "weight", self.weight, "must be a positive integer", f"The default is {DEFAULT_WEIGHT}"
            )
        if not self.http_timeout_s > 0:
            raise InvalidInput("http_timeout_s", self.http_timeout_s, "must be positive", "e.g. 5")
        if not self.managed_resources:
            raise InvalidInput("managed_resources", (), "is empty", f"e.g. {L.GPU_RESOURCE}")
        bad = [
            r
            for r in self.managed_resources
            if r != L.GPU_RESOURCE and not r.startswith(L.MIG_RESOURCE_PREFIX)
        ]
        if bad:
            raise InvalidInput(
                "managed_resources",
                bad,
                "not GPU resources",
                "Use nvidia.com/gpu and nvidia.com/mig-<profile>",
            )


def extender_stanza(s: ExtenderSettings) -> dict[str, Any]:
    """One entry of KubeSchedulerConfiguration ``extenders``."""
    stanza: dict[str, Any] = {
        "urlPrefix": s.url,
        "filterVerb": "filter",
        "prioritizeVerb": "prioritize",
        "weight": s.weight,
        "nodeCacheCapable": s.node_cache_capable,
        "enableHTTPS": s.url.startswith("https://"),
        "httpTimeout": f"{s.http_timeout_s:g}s",
        "ignorable": s.ignorable,
        # The extender is asked only about pods that request these; others never wait on it.
        "managedResources": [{"name": r, "ignoredByScheduler": False} for r in s.managed_resources],
    }
    if s.bind:
        stanza["bindVerb"] = "bind"
    if s.tls_ca_file:
        stanza["tlsConfig"] = {"caFile": s.tls_ca_file}
    return stanza


def scheduler_configuration(s: ExtenderSettings) -> dict[str, Any]:
    """A complete KubeSchedulerConfiguration (``kubescheduler.config.k8s.io/v1``) using the extender."""
    profile: dict[str, Any] = {"schedulerName": s.scheduler_name, **s.profile_plugins}
    config: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [profile],
        "extenders": [extender_stanza(s)],
    }
    if s.kubeconfig:
        config["clientConnection"] = {"kubeconfig": s.kubeconfig}
    return config


def rbac_rules() -> list[dict[str, Any]]:
    """What the extender does: watch nodes and pods, read a pod it is asked to bind, bind it."""
    return [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
        {"apiGroups": [""], "resources": ["pods/binding", "bindings"], "verbs": ["create"]},
    ]


def _container(image: str, port: int, task_mix: str) -> dict[str, Any]:
    """The Deployment's one container: ``gpuplace extender serve`` in-cluster on ``port``, locked down."""
    args = ["extender", "serve", "--host", "0.0.0.0", "--port", str(port), "--in-cluster"]
    if task_mix:
        args += ["--task-mix", task_mix]
    return {
        "name": "extender",
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["gpuplace"],
        "args": args,
        "ports": [{"name": "http", "containerPort": port, "protocol": "TCP"}],
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "http"}, "periodSeconds": 5},
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 10},
        "resources": {
            "requests": {"cpu": "500m", "memory": "512Mi"},
            "limits": {"cpu": "2", "memory": "2Gi"},
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": 65532,
            "capabilities": {"drop": ["ALL"]},
        },
    }


def manifests(
    *,
    namespace: str = DEFAULT_NAMESPACE,
    image: str = DEFAULT_IMAGE,
    port: int = DEFAULT_PORT,
    replicas: int = 1,
    task_mix: str = "",
) -> list[dict[str, Any]]:
    """ServiceAccount, ClusterRole, ClusterRoleBinding, Deployment and Service for the extender."""
    if not 0 < port < 65536:
        raise InvalidInput("port", port, "is not a TCP port", f"e.g. {DEFAULT_PORT}")
    if replicas != 1:
        # Assignments are chosen from one process's view; two replicas could hand out the same GPUs.
        raise InvalidInput("replicas", replicas, "must be 1", "Run one extender per scheduler")
    labels = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/managed-by": "gpuplace"}
    meta = {"name": NAME, "namespace": namespace, "labels": labels}
    container = _container(image, port, task_mix)
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": NAME, "labels": labels},
            "rules": rbac_rules(),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": NAME, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}],
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta,
            "spec": {
                "replicas": replicas,
                # Never two extenders at once (see replicas), also not during a rollout.
                "strategy": {"type": "Recreate"},
                "selector": {"matchLabels": {"app.kubernetes.io/name": NAME}},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "serviceAccountName": NAME,
                        "priorityClassName": "system-cluster-critical",
                        "containers": [container],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": meta,
            "spec": {
                "selector": {"app.kubernetes.io/name": NAME},
                "ports": [{"name": "http", "port": port, "targetPort": "http", "protocol": "TCP"}],
            },
        },
    ]


def service_url(namespace: str = DEFAULT_NAMESPACE, port: int = DEFAULT_PORT) -> str:
    return f"http://{NAME}.{namespace}.svc:{port}{DEFAULT_PREFIX}"


def render(docs: Sequence[dict[str, Any]]) -> str:
    import yaml

    return "---\n".join(yaml.safe_dump(d, sort_keys=False) for d in docs)
