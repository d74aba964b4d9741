"""Calibrating the local engine: start ``transformers serve --continuous-batching`` here, measure its step
time against tokens per step (:func:`gpuplace.profiling.engine_steps.measure_engine_steps`), stop it.

This is the calibration the serving model needs on the local device (docs/serving-model.md): on a CPU the
engine's per-step overhead, not the model, dominates, so it is measured, never assumed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpuplace.deploy.local import deploy_local, teardown_local
from gpuplace.profiling.engine_steps import EngineStepConfig, measure_engine_steps
from gpuplace.types import DeploymentRecord
from gpuplace.types.engine import EngineParams, EngineStepProfile


def profile_local_engine(
    model: str,
    *,
    workdir: Path,
    device: str = "auto",
    config: EngineStepConfig | None = None,
    engine: EngineParams | None = None,
) -> EngineStepProfile:
    """Start ``transformers serve --continuous-batching`` for ``model`` here, measure it, stop it.

    The server runs with ``engine``'s budget and KV cache (``to_transformers_serve_args``); by default
    the local target's (:func:`~gpuplace.planner.engine.local_engine_params`: transformers' own values,
    the cache pinned), so the measurement is of the engine a local deployment of the plan runs.
    ``device`` is ``auto`` (CUDA device 0 when present, else the CPU), ``cpu`` or ``cuda[:N]``.
    """
    from gpuplace.catalog import model_arch_from_config, resolve_model
    from gpuplace.planner.engine import local_engine_params
    from gpuplace.profiling.device import resolve_device

    config = config or EngineStepConfig()
    if engine is None:
        engine = local_engine_params(model_arch_from_config(model, resolve_model(model).config))
    serve_args = engine.to_transformers_serve_args()
    torch_device = resolve_device(device)
    on_cpu = torch_device.type == "cpu"
    record = deploy_local(
        model,
        workdir=workdir,
        device=str(torch_device),
        name="gpuplace-engine-steps",
        extra_args=tuple(serve_args),
    )
    try:
        return measure_local_deployment(record, model, config=config, serve_args=serve_args, on_cpu=on_cpu)
    finally:
        teardown_local(record)


def measure_local_deployment(
    record: DeploymentRecord,
    model: str,
    *,
    config: EngineStepConfig | None = None,
    serve_args: Sequence[str] = (),
    on_cpu: bool = True,
) -> EngineStepProfile:
    """Measure the step time of a running local deployment of ``model`` (``record``), leaving it up.

    This is the calibration of the very engine that serves; :func:`profile_local_engine` starts one of
    its own. ``serve_args`` are the engine arguments the server runs with (named in the profile).
    """
    import platform

    import transformers

    from gpuplace.loadtest.prompts import load_tokenizer
    from gpuplace.profiling.device import local_unit

    return measure_engine_steps(
        record.endpoint,
        record.served_model_name,
        load_tokenizer(model),
        config=config or EngineStepConfig(),
        engine=f"transformers-serve {transformers.__version__} {' '.join(serve_args)}",
        device_kind="cpu" if on_cpu else "cuda",
        # the unit a plan names: "cpu" on a CPU, else the catalog GPU (the local target's device)
        device_name=(platform.processor() or platform.machine()) if on_cpu else local_unit(),
        model=model,
    )


def run_engine_steps_step(
    model: str, out: Path, *, device: str = "auto", workdir: Path | None = None
) -> EngineStepProfile:
    """``gpuplace profile --engine-steps`` and the ``profile_latency`` component: measure the local engine
    and write the profile (:func:`gpuplace.profiling.engine_steps.write_engine_steps`) to ``out``."""
    import tempfile

    from gpuplace.profiling.engine_steps import write_engine_steps

    with tempfile.TemporaryDirectory(prefix="gpuplace-steps-") as tmp:
        profile = profile_local_engine(model, workdir=workdir or Path(tmp), device=device)
    write_engine_steps(profile, out)
    return profile


def engine_steps_output(model: str, out: Path, *, device: str, measure: bool) -> EngineStepProfile | None:
    """The ``profile_latency`` component's ``engine_steps`` output: the measured local engine when
    ``measure``, else an empty file, which :func:`~gpuplace.profiling.engine_steps.read_engine_steps`
    refuses naming how to measure it (a KFP output must exist either way)."""
    if not measure:
        Path(out).write_text("")
        return None
    return run_engine_steps_step(model, Path(out), device=device)


def fit_request_work_s(
    profile: EngineStepProfile,
    engine: EngineParams,
    requests: Sequence[Any],
    measured_tpot_p50_s: float,
    *,
    upper_s: float = 0.25,
) -> float:
    """The engine time per request that makes the serving model reproduce a measured median TPOT.

    ``requests`` are the :class:`~gpuplace.workload.RequestSpec` an open-loop run sent. The median, not
    the mean: a few requests stalled by the machine (another job, a collection) would make a constant
    per request absorb their stalls. TPOT rises with the per-request work, so it is bisected in
    [0, ``upper_s``]; 0 when the model without it is already as slow as the measurement.
    """
    from dataclasses import replace

    from gpuplace.planner.engine_sim import simulate
    from gpuplace.planner.steptime import measured_step_model

    def tpot(work_s: float) -> float:
        model = measured_step_model(replace(profile, request_work_s=work_s))
        result = simulate(
            requests, engine, model, discard_head=0, discard_tail=0, abort_backlog=len(requests)
        )
        return result.tpot.p50

    if not math.isfinite(measured_tpot_p50_s) or tpot(0.0) >= measured_tpot_p50_s:
        return 0.0
    lo, hi = 0.0, upper_s
    if tpot(hi) < measured_tpot_p50_s:
        return hi
    for _ in range(20):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if tpot(mid) < measured_tpot_p50_s else (lo, mid)
    return (lo + hi) / 2


def measure_request_work(
    endpoint: str,
    served_model: str,
    tokenizer: Any,
    profile: EngineStepProfile,
    engine: EngineParams,
    *,
    rate_rps: float,
    lengths: Sequence[tuple[int, int]],
    seed: int = 29,
) -> EngineStepProfile:
    """``profile`` with ``request_work_s`` fitted to a light open-loop Poisson run of ``lengths``.

    A server that handles HTTP requests in the process of its step loop (``transformers serve``) spends
    engine time on every request beyond its tokens, which a run of concurrent streams does not show;
    this run of arriving and finishing requests does (its median TPOT is matched). Use a rate well below
    capacity, and other lengths or rates for what is then predicted, so that the prediction is not
    fitted to itself.
    """
    from dataclasses import replace

    from gpuplace.loadtest.client import EndpointState
    from gpuplace.loadtest.prompts import PromptBuilder
    from gpuplace.loadtest.runner import RunOptions, run_load
    from gpuplace.workload import RequestSpec, arrival_times

    times = arrival_times(len(lengths), rate_rps, seed=seed)
    specs = [RequestSpec(i, t, p, o) for i, (t, (p, o)) in enumerate(zip(times, lengths, strict=True))]
    builder = PromptBuilder(tokenizer, api="completions", seed=seed)
    prompts = [builder.build(s.prompt_tokens) for s in specs]
    report = run_load(
        EndpointState(endpoint, served_model), specs, prompts, RunOptions(show_progress=False)
    ).report
    work = fit_request_work_s(profile, engine, specs, report.tpot.p50)
    note = (
        f"request_work_s fitted to {len(specs)} requests at {rate_rps:.2f} req/s "
        f"(median TPOT {report.tpot.p50:.4f} s)"
    )
    return replace(profile, request_work_s=work, notes=(*profile.notes, note))
