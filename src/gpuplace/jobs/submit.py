"""Compiling gpuplace's pipelines and submitting them to a Kubeflow Pipelines backend.

Pipelines live in ``pipelines/<name>/pipeline.py`` (each exposes ``pipeline``, a ``@dsl.pipeline``)
with their compiled ``pipeline.yaml`` checked in beside them. Submission goes through ``kfp.Client``:
the arguments are checked against the pipeline's parameters *before* anything is sent (an unknown
``--param`` lists the valid ones), and the host is probed with a short timeout first, because
``kfp.Client`` itself retries an unreachable host for half a minute and then reports a bare timeout.
"""

from __future__ import annotations

import importlib
import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuplace.errors import InvalidInput, UnknownName

HEALTHZ_PATH = "/apis/v2beta1/healthz"


def pipelines_dir() -> Path:
    import gpuplace.pipelines as pipelines

    return Path(pipelines.__file__).parent


def pipeline_names() -> tuple[str, ...]:
    return tuple(sorted(p.parent.name for p in pipelines_dir().glob("*/pipeline.py")))


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


@dataclass(frozen=True, slots=True)
class SubmitResult:
    run_id: str
    experiment_id: str
    pipeline_id: str  # "" unless uploaded
    state: str  # the run's state when submit returned
    url: str


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
) -> SubmitResult:
    """Create a run of a pipeline (optionally uploading it as a pipeline first) and maybe wait."""
    arguments = parse_params(name, params or [])
    check_host(host, token=token)
    import kfp

    package = package or compiled_path(name)
    if not package.is_file():
        raise InvalidInput("pipeline", name, f"has no compiled package at {package}", "Run gpuplace compile")
    client = kfp.Client(host=host, existing_token=token, namespace=namespace or "kubeflow")
    pipeline_id = ""
    if upload:
        uploaded = client.upload_pipeline(str(package), pipeline_name=name)
        pipeline_id = str(uploaded.pipeline_id)
    result = client.create_run_from_pipeline_package(
        str(package), arguments=arguments, run_name=run_name, experiment_name=experiment, namespace=namespace
    )
    state = ""
    if wait_timeout_s is not None:
        run = client.wait_for_run_completion(result.run_id, timeout=wait_timeout_s)
        state = str(run.state)
    experiment_id = str(getattr(result.run_info, "experiment_id", "") or "")
    return SubmitResult(
        run_id=str(result.run_id),
        experiment_id=experiment_id,
        pipeline_id=pipeline_id,
        state=state,
        url=f"{host.rstrip('/')}/#/runs/details/{result.run_id}",
    )
