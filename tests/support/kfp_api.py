"""A stand-in for the Kubeflow Pipelines API server (v2beta1), for tests: the KFP backend cannot run here
(it needs a cluster with MySQL, object storage, Argo Workflows and the ml-pipeline deployment).

It serves the REST endpoints ``kfp.Client`` 2.17 (through ``kfp-server-api`` 2.17) calls, with the
server's behaviour where a client can see it:

- healthz; experiments (list with the client's ``display_name`` EQUALS filter, get, create; an
  experiment can exist before the test: ``experiments=``);
- pipelines (list by ``display_name`` filter, get; ``/pipelines/upload`` creates a pipeline *and* its
  first version named like the pipeline, a second upload under the same name is ``409 AlreadyExists``);
  versions (``/pipelines/upload_version``, list newest first, get);
- runs: created ``PENDING`` from an inline ``pipeline_spec`` or a ``pipeline_version_reference``; each
  ``GET`` moves one step, ``PENDING → RUNNING → … → SUCCEEDED`` or ``FAILED`` (with ``error``) as the
  test scripts it (``outcomes=``), so a client has to poll;
- validation as the server does it before anything runs: unknown pipeline version or experiment,
  an argument that is not a parameter of the pipeline, a required parameter missing, a package that is
  not a pipeline spec; rejected with ``400`` and the body shapes the server uses (grpc-gateway
  ``{"error", "code", "message", "details"}`` for RPCs; ``{"error_message", "error_details"}`` for the
  multipart upload handlers);
- authentication and authorisation: with ``token=`` every call without that bearer token is ``401``
  (``code: 16``, Unauthenticated); ``forbid=`` lists (method, path prefix) pairs answered ``403``
  (``code: 7``, PermissionDenied), as KFP's SubjectAccessReview does in multi-user mode.

Nothing is executed: a run's spec is stored, its state is scripted. Every request is recorded.
"""

from __future__ import annotations

import datetime as dt
import email.parser
import email.policy
import json
import threading
import urllib.parse
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import yaml

PREFIX = "/apis/v2beta1"
# google.rpc.Code values the server puts in "code"
INVALID_ARGUMENT, NOT_FOUND, ALREADY_EXISTS, PERMISSION_DENIED, UNAUTHENTICATED = 3, 5, 6, 7, 16


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    body: bytes
    auth: str | None


@dataclass
class KfpState:
    """Everything the stand-in knows; tests read and seed it."""

    token: str | None = None
    forbid: tuple[tuple[str, str], ...] = ()
    outcomes: list[str] = field(
        default_factory=list
    )  # per created run: "SUCCEEDED" | "FAILED"; default succeeds
    running_polls: int = 2  # GETs a run stays RUNNING
    experiments: dict[str, dict[str, Any]] = field(default_factory=dict)
    pipelines: dict[str, dict[str, Any]] = field(default_factory=dict)
    versions: dict[str, dict[str, Any]] = field(default_factory=dict)  # by version id
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def calls(self, method: str, path_prefix: str) -> list[Recorded]:
        return [r for r in self.requests if r.method == method and r.path.startswith(PREFIX + path_prefix)]


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class ApiError(Exception):
    def __init__(self, status: int, code: int, message: str, *, upload: bool = False) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.upload = status, code, message, upload

    def body(self) -> dict[str, Any]:
        if self.upload:
            return {"error_message": self.message, "error_details": self.message}
        return {"error": self.message, "code": self.code, "message": self.message, "details": []}


def _display_name_filter(query: Mapping[str, list[str]]) -> str | None:
    raw = (query.get("filter") or [""])[0]
    if not raw:
        return None
    spec = json.loads(raw)
    for p in spec.get("predicates") or ():
        if p.get("key") == "display_name" and p.get("operation") in (1, "EQUALS"):
            return str(p.get("stringValue", p.get("string_value", "")))
    raise ApiError(
        400, INVALID_ARGUMENT, f"Invalid filter: only display_name EQUALS is supported here: {raw}"
    )


def _pipeline_spec(data: bytes) -> dict[str, Any]:
    try:
        docs = [d for d in yaml.safe_load_all(data.decode()) if d is not None]
    except (yaml.YAMLError, UnicodeDecodeError) as e:
        raise ApiError(400, INVALID_ARGUMENT, f"Failed to parse the pipeline spec: {e}", upload=True) from e
    spec = docs[0] if docs else None
    if not isinstance(spec, dict) or not spec.get("pipelineInfo") or "root" not in spec:
        raise ApiError(
            400,
            INVALID_ARGUMENT,
            "Invalid input error: Failed to create a pipeline version: the file is not a pipeline spec "
            "(pipelineInfo and root are required)",
            upload=True,
        )
    return spec


def _check_arguments(spec: Mapping[str, Any], arguments: Mapping[str, Any]) -> None:
    params = ((spec.get("root") or {}).get("inputDefinitions") or {}).get("parameters") or {}
    unknown = sorted(set(arguments) - set(params))
    if unknown:
        raise ApiError(
            400,
            INVALID_ARGUMENT,
            "Invalid input error: Failed to create a run: unrecognized input parameter(s): "
            + ", ".join(unknown),
        )
    missing = sorted(
        k
        for k, p in params.items()
        if k not in arguments and "defaultValue" not in p and not p.get("isOptional")
    )
    if missing:
        raise ApiError(
            400,
            INVALID_ARGUMENT,
            "Invalid input error: Failed to create a run: missing required input parameter(s): "
            + ", ".join(missing),
        )


class _Handler(BaseHTTPRequestHandler):
    state: KfpState

    def log_message(self, *args: object) -> None:
        pass

    # --- plumbing -------------------------------------------------------------------------------------
    def _send(self, body: Mapping[str, Any], status: int = 200) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self, method: str) -> None:
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) if method == "POST" else b""
        st = self.state
        with st.lock:
            st.requests.append(Recorded(method, url.path, query, body, self.headers.get("Authorization")))
            try:
                if st.token is not None and self.headers.get("Authorization") != f"Bearer {st.token}":
                    raise ApiError(401, UNAUTHENTICATED, "Unauthenticated: request is not authenticated")
                for m, prefix in st.forbid:
                    if m == method and url.path.startswith(PREFIX + prefix):
                        raise ApiError(
                            403,
                            PERMISSION_DENIED,
                            f"PermissionDenied: User 'someone@example.com' is not authorized with reason: "
                            f"(request: {method} {url.path})",
                        )
                status, out = self._route(method, url.path[len(PREFIX) :], query, body)
            except ApiError as e:
                status, out = e.status, e.body()
        self._send(out, status)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def _upload(self, body: bytes) -> bytes:
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + self.headers.get("Content-Type", "").encode() + b"\r\n\r\n" + body
        )
        for part in message.iter_parts():
            if part.get_param("name", header="content-disposition") == "uploadfile":
                payload = part.get_payload(decode=True)
                return payload if isinstance(payload, bytes) else b""
        raise ApiError(
            400, INVALID_ARGUMENT, "Failed to read the pipeline file: uploadfile is missing", upload=True
        )

    # --- routes ---------------------------------------------------------------------------------------
    def _route(
        self, method: str, path: str, query: Mapping[str, list[str]], body: bytes
    ) -> tuple[int, Mapping[str, Any]]:
        st = self.state
        parts = [p for p in path.split("/") if p]
        one = {k: v[0] for k, v in query.items()}
        if method == "GET" and parts == ["healthz"]:
            return 200, {"multi_user": False, "commit_sha": "stand-in", "tag_name": "2.17.0"}

        if parts[:1] == ["experiments"]:
            if method == "GET" and len(parts) == 1:
                name = _display_name_filter(query)
                ns = one.get("namespace", "")
                found = [
                    e
                    for e in st.experiments.values()
                    if (name is None or e["display_name"] == name)
                    and (not ns or e.get("namespace", "") in ("", ns))
                ]
                return 200, {"experiments": found, "total_size": len(found)} if found else {}
            if method == "GET" and len(parts) == 2:
                if parts[1] not in st.experiments:
                    raise ApiError(404, NOT_FOUND, f"Experiment {parts[1]} not found")
                return 200, st.experiments[parts[1]]
            if method == "POST" and len(parts) == 1:
                req = json.loads(body or b"{}")
                name = str(req.get("display_name") or "")
                if not name:
                    raise ApiError(
                        400, INVALID_ARGUMENT, "Invalid input error: Experiment display name is empty"
                    )
                if any(e["display_name"] == name for e in st.experiments.values()):
                    raise ApiError(
                        409, ALREADY_EXISTS, f"Already exist error: Experiment {name} already exists"
                    )
                exp = {
                    "experiment_id": f"exp-{uuid.uuid4().hex[:8]}",
                    "display_name": name,
                    "namespace": req.get("namespace") or "",
                    "created_at": _now(),
                    "storage_state": "AVAILABLE",
                }
                st.experiments[exp["experiment_id"]] = exp
                return 200, exp

        if parts[:1] == ["pipelines"]:
            if method == "POST" and parts == ["pipelines", "upload"]:
                spec = _pipeline_spec(self._upload(body))
                name = one.get("display_name") or one.get("name") or spec["pipelineInfo"]["name"]
                if any(p["display_name"] == name for p in st.pipelines.values()):
                    raise ApiError(
                        409,
                        ALREADY_EXISTS,
                        f"Already exist error: Failed to create a pipeline and a pipeline version. "
                        f"The pipeline already exists.: Pipeline with name {name} already exists",
                        upload=True,
                    )
                pipeline = {
                    "pipeline_id": f"pipe-{uuid.uuid4().hex[:8]}",
                    "name": name,
                    "display_name": name,
                    "description": one.get("description", ""),
                    "namespace": one.get("namespace", ""),
                    "created_at": _now(),
                }
                st.pipelines[pipeline["pipeline_id"]] = pipeline
                self._add_version(pipeline["pipeline_id"], name, spec)
                return 200, pipeline
            if method == "POST" and parts == ["pipelines", "upload_version"]:
                spec = _pipeline_spec(self._upload(body))
                pid = one.get("pipelineid", "")
                if pid not in st.pipelines:
                    raise ApiError(404, NOT_FOUND, f"Pipeline {pid} not found", upload=True)
                name = one.get("display_name") or one.get("name") or spec["pipelineInfo"]["name"]
                if any(v["pipeline_id"] == pid and v["display_name"] == name for v in st.versions.values()):
                    raise ApiError(
                        409,
                        ALREADY_EXISTS,
                        f"Already exist error: Failed to create a pipeline version: "
                        f"a version named {name} already exists in pipeline {pid}",
                        upload=True,
                    )
                return 200, self._add_version(pid, name, spec)
            if method == "GET" and len(parts) == 1:
                name = _display_name_filter(query)
                found = [p for p in st.pipelines.values() if name is None or p["display_name"] == name]
                return 200, {"pipelines": found, "total_size": len(found)} if found else {}
            if method == "GET" and len(parts) == 2:
                if parts[1] not in st.pipelines:
                    raise ApiError(404, NOT_FOUND, f"Pipeline {parts[1]} not found")
                return 200, st.pipelines[parts[1]]
            if method == "GET" and len(parts) == 3 and parts[2] == "versions":
                name = _display_name_filter(query)
                found = [
                    v
                    for v in st.versions.values()
                    if v["pipeline_id"] == parts[1] and (name is None or v["display_name"] == name)
                ]
                newest_first = "desc" in one.get("sort_by", "")
                found.sort(key=lambda v: v["created_at"], reverse=newest_first)
                size = int(one.get("page_size") or 10)
                return 200, {"pipeline_versions": found[:size], "total_size": len(found)} if found else {}
            if method == "GET" and len(parts) == 4 and parts[2] == "versions":
                v = st.versions.get(parts[3])
                if v is None or v["pipeline_id"] != parts[1]:
                    raise ApiError(404, NOT_FOUND, f"Pipeline version {parts[3]} not found")
                return 200, v

        if parts[:1] == ["runs"]:
            if method == "POST" and len(parts) == 1:
                return 200, self._create_run(json.loads(body or b"{}"))
            if method == "GET" and len(parts) == 2:
                run = st.runs.get(parts[1])
                if run is None:
                    raise ApiError(404, NOT_FOUND, f"Run {parts[1]} not found")
                return 200, self._advance(run)

        raise ApiError(404, NOT_FOUND, f"Not Found: {method} {PREFIX}{path}")

    def _add_version(self, pid: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        version = {
            "pipeline_id": pid,
            "pipeline_version_id": f"ver-{uuid.uuid4().hex[:8]}",
            "display_name": name,
            "name": name,
            "created_at": _now(),
            "pipeline_spec": spec,
        }
        self.state.versions[version["pipeline_version_id"]] = version
        return version

    def _create_run(self, req: Mapping[str, Any]) -> dict[str, Any]:
        st = self.state
        ref = req.get("pipeline_version_reference") or {}
        spec = req.get("pipeline_spec")
        if bool(spec) == bool(ref):
            raise ApiError(
                400,
                INVALID_ARGUMENT,
                "Invalid input error: Failed to create a run: exactly one of pipeline_spec and "
                "pipeline_version_reference is required",
            )
        if ref:
            version = st.versions.get(str(ref.get("pipeline_version_id", "")))
            if version is None or version["pipeline_id"] != ref.get("pipeline_id"):
                raise ApiError(
                    404,
                    NOT_FOUND,
                    f"Pipeline version {ref.get('pipeline_version_id')} not found "
                    f"in pipeline {ref.get('pipeline_id')}",
                )
            spec = version["pipeline_spec"]
        assert isinstance(spec, dict)
        experiment = str(req.get("experiment_id") or "")
        if experiment and experiment not in st.experiments:
            raise ApiError(404, NOT_FOUND, f"Experiment {experiment} not found")
        _check_arguments(spec, (req.get("runtime_config") or {}).get("parameters") or {})
        outcome = st.outcomes.pop(0) if st.outcomes else "SUCCEEDED"
        run = {
            **{k: v for k, v in req.items() if k != "pipeline_spec"},
            "run_id": f"run-{uuid.uuid4().hex[:8]}",
            "experiment_id": experiment,
            "pipeline_spec": spec,
            "created_at": _now(),
            "state": "PENDING",
            "state_history": [{"update_time": _now(), "state": "PENDING"}],
            "_outcome": outcome,
            "_polls": 0,
        }
        st.runs[run["run_id"]] = run
        return self._public(run)

    def _advance(self, run: dict[str, Any]) -> dict[str, Any]:
        run["_polls"] += 1
        polls = run["_polls"]
        state = run["state"]
        if state == "PENDING":
            state = "RUNNING"
        elif state == "RUNNING" and polls > self.state.running_polls:
            state = run["_outcome"]
            run["finished_at"] = _now()
            if state == "FAILED":
                run["error"] = {
                    "code": 2,
                    "message": "serve-and-load-test: task failed: exit status 1",
                    "details": [],
                }
        if state != run["state"]:
            run["state"] = state
            run["state_history"].append({"update_time": _now(), "state": state})
        return self._public(run)

    @staticmethod
    def _public(run: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in run.items() if not k.startswith("_")}


@contextmanager
def kfp_api(
    *,
    token: str | None = None,
    forbid: Sequence[tuple[str, str]] = (),
    outcomes: Sequence[str] = (),
    experiments: Sequence[str] = (),
    running_polls: int = 2,
) -> Iterator[tuple[str, KfpState]]:
    """Serve the stand-in on 127.0.0.1; yields (host URL, state). ``experiments`` exist beforehand."""
    state = KfpState(token=token, forbid=tuple(forbid), outcomes=list(outcomes), running_polls=running_polls)
    for name in experiments:
        eid = f"exp-{uuid.uuid4().hex[:8]}"
        state.experiments[eid] = {
            "experiment_id": eid,
            "display_name": name,
            "namespace": "",
            "created_at": _now(),
        }
    handler = type("KfpHandler", (_Handler,), {"state": state})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", state
    finally:
        server.shutdown()
        server.server_close()
