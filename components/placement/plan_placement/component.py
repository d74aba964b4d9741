"""KFP component ``plan_placement``: a thin adapter over :mod:`gpuplace.steps.plan`.

Reads an inventory (a fleet name/path, or the JSON ``discover_inventory`` wrote; ``local`` plans onto
the task's own machine with the local engine's measured steps) and, optionally, a profile that
calibrates its own GPU model; plans the cheapest placement meeting the SLO, and writes ``plan.json``,
the manifests folder, the candidate table and KFP Metrics. The node affinity, tolerations and node
selector JSON come back as output parameters for kfp-kubernetes (``add_node_affinity_json`` etc.) on the
serving task, and the GPU resource and count (a string) for its ``set_accelerator_type`` /
``set_accelerator_limit``.
"""

from typing import NamedTuple

from kfp import dsl
from kfp.dsl import Artifact, Dataset, Input, Markdown, Metrics, Output

from gpuplace.components.images import COMPONENTS_IMAGE


@dsl.component(base_image=COMPONENTS_IMAGE, install_kfp_package=False)
def plan_placement(
    plan: Output[Artifact],
    candidates: Output[Markdown],
    metrics: Output[Metrics],
    model: str,
    slo_tpot_ms: float,
    slo_ttft_ms: float,
    rate: float,
    inventory: str = "mixed-a100-h100-l4",
    inventory_json: Input[Artifact] = None,  # type: ignore[assignment]
    profile: Input[Dataset] = None,  # type: ignore[assignment]
    engine_steps: Input[Artifact] = None,  # type: ignore[assignment]
    operators: Input[Artifact] = None,  # type: ignore[assignment]
    prompt_tokens: str = "512",
    output_tokens: str = "128",
    trace: str = "",
    fit_threshold: float = 0.85,
    kinds: str = "whole,mig,shared",
    prices: dict = {},  # noqa: B006  # KFP parameters are JSON; a literal default is how KFP spells it
    breach_penalty_usd: float = 0.0,
    numa_align: bool = False,
    image: str = "",
    dtype: str = "bf16",
    kv_cache_dtype: str = "auto",
) -> NamedTuple(
    "Outputs",
    [
        ("node_affinity", dict),
        ("tolerations", list),
        ("node_selector", dict),
        ("accelerator_type", str),
        ("accelerator_count", str),
        ("plan_id", str),
    ],
):  # type: ignore[valid-type]
    """Plan a topology-aware placement meeting a latency SLO at the lowest cost.

    Args:
        model: The model to place (a preset, a config.json or a model directory in the image).
        slo_tpot_ms: p99 time-per-output-token target (ms).
        slo_ttft_ms: p99 time-to-first-token target (ms).
        rate: Target request rate (requests/s).
        inventory: Bundled fleet name, fleet file path, or local (this task's machine, planned with
            engine_steps); ignored when inventory_json is connected.
        inventory_json: The inventory artifact of discover_inventory.
        profile: Parquet profile from profile_latency; calibrates the efficiencies of its own GPU model
            (a CPU profile calibrates none). Without it, GPU-class defaults price every GPU.
        engine_steps: The local engine's measured step time (profile_latency's engine_steps output);
            needed for inventory local.
        operators: Kernels timed on one GPU (profile_latency's operators output): they price that GPU
            class instead of its defaults; an empty artifact (none measured) leaves every class on its own.
        prompt_tokens: Prompt length the SLO is for: N, uniform:LO:HI or normal:MEAN:STD.
        output_tokens: Output length the SLO is for, same forms.
        trace: A trace CSV (Azure LLM trace layout) whose length mix the SLO is for, instead.
        fit_threshold: Placements with a GPU-fit score below this are rejected.
        kinds: Shapes to consider: whole, mig, shared.
        prices: USD per GPU-hour by catalog GPU name, overriding the catalog.
        breach_penalty_usd: Cost of one SLA breach, for the expected breach cost.
        numa_align: Size CPUs to the GPUs' share of their NUMA node.
        image: Serving image of the plan's manifests; empty = vLLM's OpenAI server image.
        dtype: Weights: bf16, or fp8 (W8A8, vLLM's --quantization fp8; needs FP8 tensor cores).
        kv_cache_dtype: KV cache: auto (the model's dtype) or fp8 (vLLM's --kv-cache-dtype fp8).
    """
    params = dict(locals())  # the plan step's parameters, by the names of gpuplace.steps.plan_params.PARAMS
    from collections import namedtuple
    from pathlib import Path

    from gpuplace.catalog import load_gpu_catalog
    from gpuplace.steps.plan import run_plan_step
    from gpuplace.steps.plan_params import plan_request, serving_options
    from gpuplace.steps.profile import operators_input

    catalog = load_gpu_catalog()
    result = run_plan_step(
        plan_request(params, catalog),
        profile=Path(profile.path) if profile is not None else None,
        inventory=inventory_json.path if inventory_json is not None else inventory,
        out=Path(plan.path),
        catalog=catalog,
        options=serving_options(params),
        engine_steps=Path(engine_steps.path) if engine_steps is not None else None,
        operators=operators_input(operators.path if operators is not None else None),
    )
    Path(candidates.path).write_text(result.candidates_markdown)
    for name, value in result.metrics.items():
        metrics.log_metric(name, value)
    plan.metadata.update({"plan_id": result.plan.plan_id, "format": "gpuplace-plan-dir"})
    names = ["node_affinity", "tolerations", "node_selector", "accelerator_type", "accelerator_count"]
    outputs = namedtuple("Outputs", [*names, "plan_id"])
    # accelerator_count is a string: KFP's driver resolves only strings in set_accelerator_limit
    return outputs(*(result.kfp[n] for n in names), result.plan.plan_id)
