"""The least-privilege identity of the deploy step: a ServiceAccount, a Role and a RoleBinding, and a
read-only ClusterRole for the DRA driver's ResourceSlices.

The Role grants only what :mod:`gpuplace.k8s.deploy` and :mod:`gpuplace.k8s.teardown` do: server-side
apply (``patch``, plus ``create`` because an apply that creates an object is authorized as a create too),
read back (``get``), ``list`` (teardown finds what a deploy or a run labelled, and a refused list fails it
rather than reading as "nothing left") and delete the kinds a plan contains and the ResourceClaims of
``--gpu-api dra``; ``list`` and ``watch`` pods (the provisioning timer), ``get`` on ``pods/log`` (the last
log lines of a crashing container), ``create`` on ``pods/proxy`` (the first request to a pod's server,
through the API server), list events to explain a rollout. The ClusterRole only
reads ResourceSlices (``get``, ``list``): which devices the DRA driver publishes, to claim the planned ones
and to name the ones allocated. No Secrets, no nodes, nothing else cluster-scoped. docs/deploy.md shows
the rendered YAML; the integration tests deploy with this identity, not as cluster-admin.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml

from gpuplace.k8s.api import Api

SERVICE_ACCOUNT = "gpuplace-deployer"
# (api group, resources) of the kinds a plan may contain.
PLAN_RESOURCES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("apps", ("deployments",)),
    ("", ("services", "configmaps")),
    ("policy", ("poddisruptionbudgets",)),
)
VERBS = ["get", "list", "create", "patch", "delete"]


def deployer_rbac(namespace: str, name: str = SERVICE_ACCOUNT) -> list[dict[str, Any]]:
    """ServiceAccount, Role, RoleBinding, ClusterRole and ClusterRoleBinding for the deploy step in
    ``namespace`` (the cluster-scoped pair, named ``<name>-<namespace>``, only reads ResourceSlices)."""
    rules: list[dict[str, Any]] = [
        {"apiGroups": [group], "resources": list(resources), "verbs": list(VERBS)}
        for group, resources in PLAN_RESOURCES
    ]
    rules.append({"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": list(VERBS)})
    rules.append({"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]})
    rules.append({"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]})
    rules.append({"apiGroups": [""], "resources": ["pods/proxy"], "verbs": ["create"]})
    rules.append({"apiGroups": [""], "resources": ["events"], "verbs": ["list"]})
    labels = {"app.kubernetes.io/managed-by": "gpuplace", "app.kubernetes.io/component": "deployer"}
    meta = {"name": name, "namespace": namespace, "labels": labels}
    cluster_meta = {"name": f"{name}-{namespace}", "labels": labels}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta, "rules": rules},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": cluster_meta,
            "rules": [
                {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"], "verbs": ["get", "list"]}
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": cluster_meta,
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": cluster_meta["name"],
            },
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
    ]


def render_yaml(namespace: str, name: str = SERVICE_ACCOUNT) -> str:
    return yaml.safe_dump_all(deployer_rbac(namespace, name), sort_keys=False)


def service_account_kubeconfig(
    api: Api, namespace: str, path: Path, *, name: str = SERVICE_ACCOUNT, expiration_s: int = 3600
) -> Path:
    """A kubeconfig at ``path`` that authenticates as the ServiceAccount with a short-lived bound token.

    Uses the TokenRequest API through ``api`` (an identity allowed to create tokens) and the server and CA
    of ``api``'s own configuration.
    """
    token = api.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        action=f"request a token for ServiceAccount {namespace}/{name}",
        body={
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": expiration_s},
        },
    )["status"]["token"]
    conf = api.client.configuration
    cluster: dict[str, Any] = {"server": conf.host}
    if conf.ssl_ca_cert:
        cluster["certificate-authority-data"] = base64.b64encode(Path(conf.ssl_ca_cert).read_bytes()).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "cluster", "cluster": cluster}],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": "cluster", "user": name, "namespace": namespace}}],
        "current-context": name,
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path
