"""The serving spec of a plan for this machine (``--inventory local``): ``transformers serve
--continuous-batching`` with the engine parameters the prediction assumed, and the (empty) KFP placement
of a task that runs where the pipeline runs. Pure; no cluster objects: the local target starts a process.
"""

from __future__ import annotations

from typing import Any

from gpuplace.errors import InvalidInput
from gpuplace.labels import GPU_RESOURCE
from gpuplace.types.plan import PlacementPlan
from gpuplace.types.serving import ServingSpec


def local_serving_spec(plan: PlacementPlan) -> ServingSpec:
    """One local server of ``plan.model`` with the plan's engine parameters
    (``EngineParams.to_transformers_serve_args``: continuous batching, block size, pinned KV-cache
    blocks, token budget); on this machine's GPU when the plan is for one, else its CPU."""
    if plan.engine is None:
        raise InvalidInput(
            "plan.engine", None, "the plan has no engine parameters to serve with", "Plan it again"
        )
    on_gpu = plan.chosen.unit != "cpu"
    return ServingSpec(
        engine="transformers",
        image="",
        model=plan.model,
        model_source=plan.model,
        served_model_name=plan.model,
        args=tuple(plan.engine.to_transformers_serve_args()),
        gpu_resource=GPU_RESOURCE if on_gpu else "",
        gpus_per_replica=1 if on_gpu else 0,
        replicas=1,
        port=0,
        engine_params=plan.engine,
    )


def local_kfp_fragments(plan: PlacementPlan) -> dict[str, Any]:
    """KFP placement for a plan of this machine: none (the task runs where the pipeline runs); one GPU
    when the plan is for this machine's GPU."""
    on_gpu = plan.chosen.unit != "cpu"
    return {
        "node_affinity": {},
        "tolerations": [],
        "node_selector": {},
        "accelerator_type": GPU_RESOURCE if on_gpu else "",
        "accelerator_count": "1" if on_gpu else "0",
    }
