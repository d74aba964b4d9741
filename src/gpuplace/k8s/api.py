"""Generic, typed-by-kind access to the Kubernetes REST API: discovery, server-side apply, get, list,
create, delete and status patches, each under a deadline with :mod:`gpuplace.k8s.retry`.

Objects are plain dicts (as in YAML manifests) because plans carry arbitrary kinds. The resource path
of a kind comes from API discovery, cached per group/version. Server-side apply always uses the field
manager ``gpuplace``, so re-applying unchanged objects is a no-op on the server (no new
resourceVersion, no new rollout).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpuplace.k8s.errors import NotFound
from gpuplace.k8s.retry import Deadline, with_retries

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

FIELD_MANAGER = "gpuplace"
DEFAULT_TIMEOUT_S = 60.0


ALL_NAMESPACES = "*"


@dataclass(frozen=True, slots=True)
class ResourceInfo:
    api_version: str
    kind: str
    plural: str
    namespaced: bool

    def collection_path(self, namespace: str = "") -> str:
        """The collection's URL path; ``ALL_NAMESPACES`` lists a namespaced kind across namespaces."""
        base = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        if self.namespaced and namespace == ALL_NAMESPACES:
            return f"{base}/{self.plural}"
        if self.namespaced:
            if not namespace:
                raise ValueError(f"{self.kind} is namespaced: a namespace is needed")
            return f"{base}/namespaces/{namespace}/{self.plural}"
        return f"{base}/{self.plural}"


def ref(obj: Mapping[str, Any]) -> str:
    """``Kind/name`` of a manifest, for messages."""
    return f"{obj.get('kind', '?')}/{(obj.get('metadata') or {}).get('name', '?')}"


class Api:
    """One API server, reached through ``client``; discovery results are cached on the instance."""

    def __init__(self, client: ApiClient, *, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.client = client
        self.timeout_s = timeout_s
        self._discovery: dict[str, dict[str, ResourceInfo]] = {}

    # --- raw requests -----------------------------------------------------------------------------
    def request(
        self,
        method: str,
        path: str,
        *,
        action: str,
        query: Mapping[str, Any] | None = None,
        body: object = None,
        content_type: str = "application/json",
        deadline: Deadline | None = None,
    ) -> Any:
        dl = deadline or Deadline(self.timeout_s)
        query_params = [(k, v) for k, v in (query or {}).items() if v is not None and v != ""]

        def attempt(timeout_s: float) -> Any:
            return self.client.call_api(
                path,
                method,
                query_params=query_params,
                header_params={"Accept": "application/json", "Content-Type": content_type},
                body=body,
                response_type="object",
                auth_settings=["BearerToken"],
                _return_http_data_only=True,
                _preload_content=True,
                _request_timeout=(min(timeout_s, 10.0), timeout_s),
            )

        return with_retries(attempt, action=action, deadline=dl)

    # --- discovery ----------------------------------------------------------------------------------
    def resource(self, api_version: str, kind: str, *, deadline: Deadline | None = None) -> ResourceInfo:
        kinds = self._discovery.get(api_version)
        if kinds is None or kind not in kinds:  # not looked up yet, or served since (a CRD installed)
            path = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            doc = self.request("GET", path, action=f"discover {api_version}", deadline=deadline)
            kinds = {
                r["kind"]: ResourceInfo(api_version, r["kind"], r["name"], bool(r.get("namespaced")))
                for r in doc.get("resources", [])
                if "/" not in r["name"]
            }
            self._discovery[api_version] = kinds
        if kind not in kinds:
            raise NotFound(
                f"kind {kind} is not served by the API server under {api_version}",
                status=404,
                reason="NotFound",
            )
        return kinds[kind]

    def object_path(
        self, obj: Mapping[str, Any], namespace: str = "", *, deadline: Deadline | None = None
    ) -> str:
        info = self.resource(str(obj.get("apiVersion", "")), str(obj.get("kind", "")), deadline=deadline)
        name = (obj.get("metadata") or {}).get("name", "")
        return f"{info.collection_path(namespace if info.namespaced else '')}/{name}"

    # --- verbs ----------------------------------------------------------------------------------------
    def apply(
        self,
        obj: Mapping[str, Any],
        namespace: str = "",
        *,
        dry_run: bool = False,
        force: bool = False,
        deadline: Deadline | None = None,
    ) -> dict[str, Any]:
        """Server-side apply ``obj`` with field manager ``gpuplace``; returns the object as stored."""
        path = self.object_path(obj, namespace, deadline=deadline)
        where = f" in namespace {namespace}" if namespace else ""
        result: dict[str, Any] = self.request(
            "PATCH",
            path,
            action=f"{'dry-run ' if dry_run else ''}apply {ref(obj)}{where}",
            query={
                "fieldManager": FIELD_MANAGER,
                "force": "true" if force else None,
                "dryRun": "All" if dry_run else None,
            },
            body=dict(obj),
            content_type="application/apply-patch+yaml",
            deadline=deadline,
        )
        return result

    def get(
        self, api_version: str, kind: str, name: str, namespace: str = "", *, deadline: Deadline | None = None
    ) -> dict[str, Any]:
        info = self.resource(api_version, kind, deadline=deadline)
        result: dict[str, Any] = self.request(
            "GET",
            f"{info.collection_path(namespace if info.namespaced else '')}/{name}",
            action=f"get {kind}/{name}",
            deadline=deadline,
        )
        return result

    def get_or_none(
        self, api_version: str, kind: str, name: str, namespace: str = "", *, deadline: Deadline | None = None
    ) -> dict[str, Any] | None:
        try:
            return self.get(api_version, kind, name, namespace, deadline=deadline)
        except NotFound:
            return None

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str = "",
        *,
        label_selector: str = "",
        field_selector: str = "",
        deadline: Deadline | None = None,
    ) -> list[dict[str, Any]]:
        info = self.resource(api_version, kind, deadline=deadline)
        doc = self.request(
            "GET",
            info.collection_path(namespace if info.namespaced else ""),
            action=f"list {info.plural}",
            query={"labelSelector": label_selector, "fieldSelector": field_selector},
            deadline=deadline,
        )
        items: list[dict[str, Any]] = doc.get("items") or []
        return items

    def create(
        self, obj: Mapping[str, Any], namespace: str = "", *, deadline: Deadline | None = None
    ) -> dict[str, Any]:
        info = self.resource(str(obj["apiVersion"]), str(obj["kind"]), deadline=deadline)
        result: dict[str, Any] = self.request(
            "POST",
            info.collection_path(namespace if info.namespaced else ""),
            action=f"create {ref(obj)}",
            query={"fieldManager": FIELD_MANAGER},
            body=dict(obj),
            deadline=deadline,
        )
        return result

    def delete(
        self,
        obj: Mapping[str, Any],
        namespace: str = "",
        *,
        propagation: str = "Background",
        deadline: Deadline | None = None,
    ) -> bool:
        """Delete ``obj``; ``False`` when it was already gone (404 is success)."""
        try:
            self.request(
                "DELETE",
                self.object_path(obj, namespace, deadline=deadline),
                action=f"delete {ref(obj)}",
                body={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": propagation},
                deadline=deadline,
            )
        except NotFound:
            return False
        return True

    def patch_status(
        self,
        obj: Mapping[str, Any],
        status: Mapping[str, Any],
        namespace: str = "",
        *,
        deadline: Deadline | None = None,
    ) -> dict[str, Any]:
        """Merge-patch the ``status`` subresource (Node capacity for simulated nodes)."""
        result: dict[str, Any] = self.request(
            "PATCH",
            self.object_path(obj, namespace, deadline=deadline) + "/status",
            action=f"patch status of {ref(obj)}",
            body={"status": dict(status)},
            content_type="application/merge-patch+json",
            deadline=deadline,
        )
        return result
