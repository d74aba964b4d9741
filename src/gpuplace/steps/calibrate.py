"""Calibrating the local engine: start ``transformers serve --continuous-batching`` here, measure its step
time against tokens per step (:func:`gpuplace.profiling.engine_steps.measure_engine_steps`), stop it.

This is the calibration the serving model needs on the local device (docs/serving-model.md): on a CPU the
engine's per-step overhead, not the model, dominates, so it is measured, never assumed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

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
        engine=f"transformers-serve {transformers.__version__} {' '.join(serve_args)}".strip(),
        device_kind="cpu" if on_cpu else "cuda",
        # the unit a plan names: "cpu" on a CPU, else the catalog GPU (the local target's device)
        device_name=(platform.processor() or platform.machine()) if on_cpu else local_unit(),
        model=model,
    )


def run_engine_steps_step(
    model: str, out: Path, *, device: str = "auto", workdir: Path | None = None, repeats: int | None = None
) -> EngineStepProfile:
    """``gpuplace profile --engine-steps`` and the ``profile_latency`` component: measure the local engine
    and write the profile (:func:`gpuplace.profiling.engine_steps.write_engine_steps`) to ``out``."""
    import tempfile

    from gpuplace.profiling.engine_steps import write_engine_steps

    with tempfile.TemporaryDirectory(prefix="gpuplace-steps-") as tmp:
        config = EngineStepConfig() if repeats is None else EngineStepConfig(repeats=repeats)
        profile = profile_local_engine(model, workdir=workdir or Path(tmp), device=device, config=config)
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
