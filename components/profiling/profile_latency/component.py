"""KFP component ``profile_latency``: a thin adapter over :mod:`gpuplace.steps.profile`.

Reads its parameters, calls ``gpuplace.steps.profile.run_profile_step`` and writes the outputs; with
``measure_engine_steps`` it also measures the local serving engine's step time on the task's device
(``gpuplace.steps.calibrate.run_engine_steps_step``), which a plan for ``inventory=local`` needs.
Only the standard library and kfp are imported here; gpuplace is imported inside the function,
which runs in the component image (the CUDA image by default: profiling wants the GPU the task
lands on; request it with ``task.set_accelerator_type(...).set_accelerator_limit(1)``).
"""

from kfp import dsl
from kfp.dsl import Artifact, Dataset, Markdown, Metrics, Output

from gpuplace.components.images import CUDA_IMAGE


@dsl.component(base_image=CUDA_IMAGE, install_kfp_package=False)
def profile_latency(
    profile: Output[Dataset],
    device_info: Output[Artifact],
    metrics: Output[Metrics],
    summary: Output[Markdown],
    engine_steps: Output[Artifact],
    operators: Output[Artifact],
    model: str = "tiny",
    device: str = "auto",
    batch_sizes: str = "1,4",
    prompt_tokens: str = "128",
    output_tokens: str = "32",
    dtypes: str = "auto",
    mode: str = "eager",
    repeats: int = 5,
    warmup: int = -1,
    seed: int = 0,
    memory_limit_gib: float = 0.0,
    measure_operators: bool = False,
    operator_max_tokens: int = 16384,
    allreduce_ranks: int = 0,
    measure_engine_steps: bool = False,
) -> None:
    """Measure prefill (TTFT) and per-token decode (TPOT) latency of a model on the task's device.

    Args:
        model: Preset name (tiny, llama-3.1-8b, ...), a config.json path or a model directory.
        device: auto | cpu | cuda | cuda:N.
        batch_sizes: Comma-separated batch sizes to sweep.
        prompt_tokens: Comma-separated prompt lengths to sweep.
        output_tokens: Comma-separated output lengths (forced) to sweep.
        dtypes: Comma-separated dtypes: auto (bf16 on GPU, fp32 on CPU), float32, bfloat16, float16.
        mode: eager, static (static KV cache + torch.compile/CUDA graphs) or both.
        repeats: Timed generations per sweep point.
        warmup: Untimed generations per point; -1 picks 2 (3 with static).
        seed: Seed of the random weights and prompts.
        memory_limit_gib: Points needing more memory than this are recorded as failed; 0 = device free memory.
        measure_operators: Also time the model's kernels on the task's GPU (GEMMs by tokens per step,
            attention, all-reduce) into operators, which plan_placement prices that GPU class with (else the
            output is left empty and the plan keeps the class defaults).
        operator_max_tokens: The most tokens per step the operator table times (powers of two up to it).
        allreduce_ranks: All-reduce over this many GPUs in the operator table (0: every visible GPU).
        measure_engine_steps: Also measure the local serving engine (transformers serve
            --continuous-batching on this device) step time into engine_steps (else it is left empty).
    """
    params = dict(locals())  # the profile step's parameters, by the names of gpuplace.steps.profile.PARAMS
    from pathlib import Path

    from gpuplace.profiling.summary import profile_metrics
    from gpuplace.steps.calibrate import engine_steps_output
    from gpuplace.steps.profile import operators_output, profile_config, run_profile_step

    config = profile_config(params)
    result = run_profile_step(config, profile.path, device_info.path, summary.path)
    for name, value in profile_metrics(result.profile).items():
        metrics.log_metric(name, value)
    profile.metadata.update({"model": model, "device": result.profile.device.name, "format": "parquet"})
    table = operators_output(params, Path(operators.path), measure=measure_operators)
    if table is not None:
        operators.metadata.update(
            {"model": model, "gpu": table.gpu or table.device.name, "rows": len(table.rows)}
        )
    steps = engine_steps_output(model, Path(engine_steps.path), device=device, measure=measure_engine_steps)
    if steps is not None:
        engine_steps.metadata.update({"model": model, "device": steps.device_name, "fixed_s": steps.fixed_s})
