"""Compiling gpuplace's pipelines and submitting them to a Kubeflow Pipelines backend.

Pipelines live in ``pipelines/<name>/pipeline.py`` (each exposes ``pipeline``, a ``@dsl.pipeline``)
with their compiled ``pipeline.yaml`` checked in beside them. Submission goes through ``kfp.Client``:
the arguments are checked against the pipeline's parameters *before* anything is sent (an unknown
``--param`` lists the valid ones), and the host is probed with a short timeout first, because
``kfp.Client`` itself retries an unreachable host for half a minute and then reports a bare timeout.
``--upload`` makes the package a pipeline version and runs that version; ``--wait`` polls the run to a
final state and fails when it failed. The API's 401/403 and rejections become errors that say what was
being done and what to do.
"""

from __future__ import annotations

import datetime as dt
import importlib
import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from gpuplace.errors import GpuplaceError, InvalidInput, UnknownName

HEALTHZ_PATH = "/apis/v2beta1/healthz"


def pipelines_dir() -> Path:
    import gpuplace.pipelines as pipelines

    return Path(pipelines.__file__).parent


def pipeline_names() -> tuple[str, ...]:
    return tuple(sorted(p.parent.name for p in pipelines_dir().glob("*/pipeline.py")))


def pipeline_names_for_help() -> str:
    """The pipeline names for a command's help, or where they are when ``gpuplace.pipelines`` is not
    importable: a run from the source tree (``PYTHONPATH=src``, as tests/gpu/run.sh runs on a bare GPU
    machine) has no ``gpuplace.pipelines``, which setup.py maps from the repository root. Building the
    help of ``compile`` and ``submit`` must not stop every other command there."""
    try:
        return ", ".join(pipeline_names())
    except ModuleNotFoundError:
        return "the pipelines of an installed gpuplace (pip install -e .[pipelines])"


def load_pipeline(name: str) -> Any:
    if name not in pipeline_names():
        raise UnknownName("pipeline", name, pipeline_names())
    return importlib.import_module(f"gpuplace.pipelines.{name}.pipeline").pipeline


def compiled_path(name: str) -> Path:
    return pipelines_dir() / name / "pipeline.yaml"


def compile_pipeline(name: str, out: Path | None = None) -> Path:
    from kfp import compiler

    target = out or compiled_path(name)
    target.parent.mkdir(parents=True, exist_ok=True)
    compiler.Compiler().compile(load_pipeline(name), package_path=str(target))
    return target


def pipeline_parameters(name: str) -> dict[str, str]:
    """Parameter name → KFP type (STRING, NUMBER_INTEGER, NUMBER_DOUBLE, BOOLEAN, ...)."""
    spec = load_pipeline(name).pipeline_spec
    params = spec.root.input_definitions.parameters
    from kfp.pipeline_spec import pipeline_spec_pb2

    type_names = pipeline_spec_pb2.ParameterType.ParameterTypeEnum
    return {k: type_names.Name(v.parameter_type) for k, v in params.items()}


def _convert(name: str, raw: str, kfp_type: str) -> Any:
    try:
        if kfp_type == "NUMBER_INTEGER":
            return int(raw)
        if kfp_type == "NUMBER_DOUBLE":
            return float(raw)
        if kfp_type == "BOOLEAN":
            lowered = raw.lower()
            if lowered not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError(raw)
            return lowered in ("true", "1", "yes")
        if kfp_type in ("LIST", "STRUCT"):
            return json.loads(raw)
    except (ValueError, json.JSONDecodeError):
        raise InvalidInput(f"param.{name}", raw, f"is not a valid {kfp_type}", "Fix the value") from None
    return raw


def parse_params(name: str, pairs: list[str]) -> dict[str, Any]:
    """``["k=v", ...]`` → typed arguments, checked against the pipeline's parameters."""
    params = pipeline_parameters(name)
    args: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise InvalidInput("param", pair, "is not KEY=VALUE", "e.g. --param model=tiny")
        if key not in params:
            raise InvalidInput(
                "param",
                key,
                f"is not a parameter of pipeline {name!r}",
                f"Valid: {', '.join(sorted(params))}",
            )
        args[key] = _convert(key, raw, params[key])
    return args


def check_host(host: str, *, timeout_s: float = 5.0, token: str | None = None) -> None:
    """Fail fast, naming the host, when the KFP API does not answer."""
    if not host.startswith(("http://", "https://")):
        raise InvalidInput(
            "host", host, "is not an http(s) URL", "e.g. --host https://kfp.example.com/pipeline"
        )
    request = urllib.request.Request(host.rstrip("/") + HEALTHZ_PATH)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            response.read()
    except urllib.error.HTTPError as e:
        if e.code in (401, 403):
            raise InvalidInput(
                "host", host, f"refused the credentials (HTTP {e.code})", "Pass --token"
            ) from None
        raise InvalidInput(
            "host", host, f"answered HTTP {e.code} on {HEALTHZ_PATH}", "Is it the KFP API?"
        ) from None
    except (urllib.error.URLError, TimeoutError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise InvalidInput(
            "host", host, f"does not answer ({reason})", "Check the URL, your port-forward or network"
        ) from None


class KfpRefused(GpuplaceError):
    """401/403 from the KFP API: the token is missing, wrong, or its identity may not do this."""


class KfpRejected(GpuplaceError):
    """The KFP API rejected a request (a spec or arguments it will not run, a name clash, ...)."""


class RunFailed(GpuplaceError):
    """The run ended in FAILED (or CANCELED); ``result`` is where it stood."""

    def __init__(self, message: str, *, result: SubmitResult) -> None:
        super().__init__(message)
        self.result = result


class RunTimeout(GpuplaceError):
    """The run did not finish within ``--wait``; ``result`` is its last state."""

    def __init__(self, message: str, *, result: SubmitResult) -> None:
        super().__init__(message)
        self.result = result


@dataclass(frozen=True, slots=True)
class SubmitResult:
    run_id: str
    experiment_id: str
    pipeline_id: str  # "" unless uploaded
    state: str  # the run's state when submit returned
    url: str
    pipeline_version_id: str = ""  # the uploaded version the run runs; "" for an inline package


# Run states after which a run changes no more (v2beta1 RuntimeState).
FINAL_STATES = frozenset({"SUCCEEDED", "FAILED", "SKIPPED", "CANCELED"})
DEFAULT_POLL_S = 5.0


def _server_message(body: object) -> str:
    """The message in a KFP error body: grpc-gateway's ``message``/``error`` or the upload handlers'
    ``error_message``."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body or "")
    try:
        doc = json.loads(text)
    except ValueError:
        return text.strip()
    if isinstance(doc, dict):
        return str(doc.get("message") or doc.get("error_message") or doc.get("error") or text).strip()
    return text.strip()


def _kfp(action: str, host: str, namespace: str | None, call: Any) -> Any:
    """``call()``, with the KFP API's errors turned into gpuplace's (what was being done, what to do)."""
    from kfp_server_api.exceptions import ApiException  # type: ignore[import-untyped]

    try:
        return call()
    except ApiException as e:
        status = int(e.status or 0)
        message = _server_message(e.body) or str(e.reason or "")
        if status in (401, 403):
            who = "no credentials were accepted" if status == 401 else "this identity may not do it"
            raise KfpRefused(
                f"the KFP API at {host} refused to {action} (HTTP {status}: {message}): {who}. "
                "Pass a valid token with --token or $KFP_TOKEN"
                + (f", for an identity allowed in namespace {namespace}" if namespace else "")
            ) from None
        raise KfpRejected(f"the KFP API at {host} could not {action} (HTTP {status}: {message})") from None
    except ValueError as e:  # kfp.Client's own checks (e.g. two pipelines with one name)
        raise KfpRejected(f"could not {action} on {host}: {e}") from None


def _package_digest(package: Path) -> str:
    import hashlib

    return hashlib.sha256(package.read_bytes()).hexdigest()[:12]


def upload_version(
    client: Any, name: str, package: Path, *, host: str, namespace: str | None = None
) -> tuple[str, str]:
    """(pipeline id, version id) of ``package`` as a version of pipeline ``name``: the pipeline is created
    when no pipeline has that name, else a version named ``<name>-<sha256 of the package>`` is added, or
    reused when that exact package was uploaded before (a re-submit does not pile up copies)."""
    pipeline_id = _kfp("look up the pipeline", host, namespace, lambda: client.get_pipeline_id(name))
    if pipeline_id is None:
        pipeline = _kfp(
            f"upload pipeline {name}",
            host,
            namespace,
            lambda: client.upload_pipeline(str(package), pipeline_name=name, namespace=namespace),
        )
        pipeline_id = str(pipeline.pipeline_id)
        # The server makes the pipeline's first version from the same upload.
        versions = _kfp(
            f"list the versions of pipeline {name}",
            host,
            namespace,
            lambda: client.list_pipeline_versions(pipeline_id, page_size=1, sort_by="created_at desc"),
        )
        found = list(versions.pipeline_versions or ())
        if not found:
            raise KfpRejected(f"the KFP API at {host} made pipeline {pipeline_id} ({name}) without a version")
        return pipeline_id, str(found[0].pipeline_version_id)
    version_name = f"{name}-{_package_digest(package)}"
    same = json.dumps(
        {"predicates": [{"operation": "EQUALS", "key": "display_name", "stringValue": version_name}]}
    )
    existing = _kfp(
        f"list the versions of pipeline {name}",
        host,
        namespace,
        lambda: client.list_pipeline_versions(pipeline_id, filter=same),
    )
    if existing.pipeline_versions:
        return str(pipeline_id), str(existing.pipeline_versions[0].pipeline_version_id)
    version = _kfp(
        f"upload a new version of pipeline {name}",
        host,
        namespace,
        lambda: client.upload_pipeline_version(
            str(package), pipeline_version_name=version_name, pipeline_id=pipeline_id
        ),
    )
    return str(pipeline_id), str(version.pipeline_version_id)


def submit(
    name: str,
    *,
    host: str,
    params: list[str] | None = None,
    experiment: str = "gpuplace",
    run_name: str | None = None,
    token: str | None = None,
    namespace: str | None = None,
    upload: bool = False,
    wait_timeout_s: float | None = None,
    package: Path | None = None,
    poll_s: float | None = None,
) -> SubmitResult:
    """Create a run of a pipeline and maybe wait for it.

    With ``upload`` the compiled package becomes a pipeline version (:func:`upload_version`) and the run
    runs *that version*; without, the run carries the package inline. Waiting polls the run until it
    reaches a final state: FAILED or CANCELED raise :class:`RunFailed`, the deadline :class:`RunTimeout`.
    API errors raise :class:`KfpRefused` (401/403) or :class:`KfpRejected`.
    """
    arguments = parse_params(name, params or [])
    check_host(host, token=token)
    import kfp

    package = package or compiled_path(name)
    if not package.is_file():
        raise InvalidInput("pipeline", name, f"has no compiled package at {package}", "Run gpuplace compile")
    client = kfp.Client(host=host, existing_token=token, namespace=namespace or "kubeflow")
    pipeline_id = version_id = ""
    if upload:
        pipeline_id, version_id = upload_version(client, name, package, host=host, namespace=namespace)
        exp = _kfp(
            f"find or create experiment {experiment}",
            host,
            namespace,
            lambda: client.create_experiment(experiment, namespace=namespace),
        )
        experiment_id = str(exp.experiment_id)
        stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H-%M-%S")
        run = _kfp(
            f"create a run of pipeline version {version_id}",
            host,
            namespace,
            lambda: client.run_pipeline(
                experiment_id,
                run_name or f"{name} {stamp}",
                params=arguments,
                pipeline_id=pipeline_id,
                version_id=version_id,
            ),
        )
        run_id = str(run.run_id)
    else:
        created = _kfp(
            f"create a run of {package.name}",
            host,
            namespace,
            lambda: client.create_run_from_pipeline_package(
                str(package),
                arguments=arguments,
                run_name=run_name,
                experiment_name=experiment,
                namespace=namespace,
            ),
        )
        run_id = str(created.run_id)
        experiment_id = str(getattr(created.run_info, "experiment_id", "") or "")
    result = SubmitResult(
        run_id=run_id,
        experiment_id=experiment_id,
        pipeline_id=pipeline_id,
        state="",
        url=f"{host.rstrip('/')}/#/runs/details/{run_id}",
        pipeline_version_id=version_id,
    )
    if wait_timeout_s is None:
        return result
    poll = DEFAULT_POLL_S if poll_s is None else poll_s
    return wait_for_run(client, result, host=host, namespace=namespace, timeout_s=wait_timeout_s, poll_s=poll)


def wait_for_run(
    client: Any, result: SubmitResult, *, host: str, namespace: str | None, timeout_s: float, poll_s: float
) -> SubmitResult:
    """Poll the run until a final state; ``kfp.Client.wait_for_run_completion`` is not used because it
    does not treat CANCELED as final and reports a run that failed exactly like one that succeeded."""
    end = time.monotonic() + timeout_s
    run_id = result.run_id
    while True:
        run = _kfp(f"get run {run_id}", host, namespace, lambda: client.get_run(run_id))
        state = str(run.state or "")
        result = replace(result, state=state)
        if state in FINAL_STATES:
            break
        if time.monotonic() + poll_s > end:
            raise RunTimeout(
                f"run {result.run_id} still {state or 'not started'} after {timeout_s:g} s: {result.url}",
                result=result,
            )
        time.sleep(poll_s)
    if state in ("FAILED", "CANCELED"):
        message = str(getattr(getattr(run, "error", None), "message", "") or "")
        why = f": {message}" if message else ""
        raise RunFailed(f"run {result.run_id} {state}{why} ({result.url})", result=result)
    return result
