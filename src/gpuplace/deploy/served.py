"""A local server as both paths record it: what it ran (read from its process), when it first served,
and on what device.

:func:`serve_local` is the one call site of the local engine for the ``local`` target and the Kubeflow
path's in-task serving: it starts :func:`gpuplace.deploy.local.deploy_local` (whatever engine and flags
that runs), sends the first request (:mod:`gpuplace.serving.probe`), and returns the record with
``serving_at_s`` stamped, the serving spec read back from the server's own command line, and
``served_on`` = this machine's device. Both paths then record the same spec when they ran the same thing.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from gpuplace.errors import GpuplaceError
from gpuplace.serving.probe import first_request
from gpuplace.types import DeploymentRecord
from gpuplace.types.engines import LOCAL_ENGINE, engine_of
from gpuplace.types.serving import ServingSpec

LOCAL_RUNTIME = "local process"
FIRST_REQUEST_TIMEOUT_S = 120.0
_PER_INSTANCE = ("--host", "--port")  # differ between two servers of the same spec


class FirstRequestFailed(GpuplaceError):
    """The local server answered /health but not a completion in time."""


def engine_args(cmdline: Sequence[str]) -> tuple[str, ...]:
    """The engine's arguments from a server's command line: from ``serve`` on, without host and port."""
    args = list(cmdline)
    start = args.index("serve") if "serve" in args else 0
    out: list[str] = []
    skip = False
    for a in args[start:]:
        if skip:
            skip = False
            continue
        if a in _PER_INSTANCE:
            skip = True
            continue
        if a.startswith(tuple(f"{f}=" for f in _PER_INSTANCE)):
            continue
        out.append(a)
    return tuple(out)


def local_spec(record: DeploymentRecord, model: str) -> ServingSpec:
    """The spec a local server runs, read from its process's command line."""
    import psutil

    try:
        cmdline = psutil.Process(record.pid).cmdline() if record.pid else []
    except (psutil.Error, OSError):
        cmdline = []
    args = engine_args(cmdline)
    return ServingSpec(
        engine=LOCAL_ENGINE.name,
        image="",
        model=model,
        model_source=args[1] if len(args) > 1 else "",
        served_model_name=record.served_model_name,
        args=args,
        gpu_resource="",
        gpus_per_replica=0,
        replicas=1,
        port=0,
    )


def local_engine(model: str, serving: ServingSpec | None = None) -> tuple[str, tuple[str, ...]]:
    """``(device, engine arguments)`` of the local server for a plan: a plan for this machine carries
    them (``transformers serve --continuous-batching`` with the engine parameters its prediction
    assumed, on its CPU or GPU); any other plan is served by the local engine with the local target's
    own parameters (:func:`~gpuplace.planner.engine.local_engine_params`), on CUDA when present."""
    if serving is not None and engine_of(serving.engine).runs_here:
        return ("auto" if serving.gpus_per_replica else "cpu"), serving.args
    from gpuplace.catalog import model_arch_from_config, resolve_model
    from gpuplace.planner.engine import local_engine_params

    arch = model_arch_from_config(model, resolve_model(model).config)
    return "auto", tuple(local_engine_params(arch).to_transformers_serve_args())


def serve_local(
    model: str,
    *,
    workdir: Path,
    name: str,
    startup_timeout_s: float,
    path: str = "",
    serving: ServingSpec | None = None,
    port: int = 0,
) -> DeploymentRecord:
    """Start the local engine for ``model`` (with the plan's ``serving`` spec when it is for this
    machine, :func:`local_engine`) and wait until its first request succeeds."""
    from gpuplace.deploy.local import deploy_local, teardown_local
    from gpuplace.profiling.device import local_unit

    device, engine_args = local_engine(model, serving)
    record = deploy_local(
        model,
        workdir=workdir,
        startup_timeout_s=startup_timeout_s,
        name=name,
        device=device,
        extra_args=engine_args,
        port=port,
    )
    if not first_request(record.endpoint, record.served_model_name, timeout_s=FIRST_REQUEST_TIMEOUT_S):
        teardown_local(record)
        raise FirstRequestFailed(
            f"the local server for {model!r} at {record.endpoint} did not answer a one-token completion "
            f"within {FIRST_REQUEST_TIMEOUT_S:g} s after it reported healthy"
        )
    served = time.time()
    pods = tuple(
        replace(p, serving_at_s=served, timing="process", placement_level="none") for p in record.pods
    )
    return replace(
        record,
        pods=pods,
        serving=local_spec(record, model),
        path=path,
        runtime=LOCAL_RUNTIME,
        served_on=local_unit(),
    )
