"""Plans for tests that need a plan directory with hand-made manifests (faults, rollbacks, odd input).

The plan is a real :class:`~gpuplace.types.plan.PlacementPlan` written by the real
:func:`gpuplace.plandir.write_plan_dir`, so every reader sees what the planner would write; only the
shape (nodes, GPUs per replica) and the manifests are chosen by the test.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from gpuplace.catalog import load_gpu_catalog, model_arch_from_config, resolve_model
from gpuplace.manifests import ServingOptions, build_manifests, kfp_fragments, serving_spec
from gpuplace.plandir import PlanDir, write_plan_dir
from gpuplace.planner.engine import vllm_engine_params
from gpuplace.types import Distribution, Inventory
from gpuplace.types.plan import Candidate, Placement, PlacementPlan, Prediction, Slo
from gpuplace.types.serving import ServingSpec


def predicted(
    ttft: tuple[float, float],
    tpot: tuple[float, float],
    *,
    concurrency: float = 1.0,
    max_batch: int = 1,
    memory_per_gpu_gib: float = 1.0,
    stable: bool = True,
) -> Prediction:
    """A plan's prediction known by its (p50, p99) TTFT and TPOT in seconds, as a test states it."""
    return Prediction(
        Distribution.from_percentiles(p50=ttft[0], p99=ttft[1]),
        Distribution.from_percentiles(p50=tpot[0], p99=tpot[1]),
        concurrency,
        max_batch,
        memory_per_gpu_gib,
        stable,
    )


def sample_plan(
    *,
    plan_id: str = "p1",
    name: str = "llm",
    model: str = "tiny",
    nodes: Sequence[str] = ("a",),
    gpus: int = 1,
    gpu: str = "H100-SXM5-80GB",
    prediction: Prediction | None = None,
    first_gpu: int = 0,
    link: str = "",
) -> PlacementPlan:
    """A plan of ``len(nodes)`` replicas, one per node, each on ``gpus`` whole GPUs of ``gpu`` from index
    ``first_gpu``, over ``link`` (default: nvlink for several GPUs)."""
    pred = prediction or predicted(
        (0.2, 0.4), (0.02, 0.03), concurrency=1.0, max_batch=4, memory_per_gpu_gib=10.0
    )
    arch = model_arch_from_config(model, resolve_model(model).config)
    engine = vllm_engine_params(arch, load_gpu_catalog().get(gpu), gpus)
    chosen = Candidate(gpu, "whole", gpus, len(nodes), prediction=pred, verdict="chosen", fit_score=1.0)
    link = link or ("nvlink" if gpus > 1 else "single")
    placements = tuple(
        Placement(i, n, tuple(f"{n}/gpu{g}" for g in range(first_gpu, first_gpu + gpus)), link, 0, 1.0, 0.0)
        for i, n in enumerate(nodes)
    )
    serving = ServingSpec(
        engine="vllm",
        image="vllm/vllm-openai:v0.34.0",
        model=model,
        model_source=model,
        served_model_name=model,
        args=(model, "--tensor-parallel-size", str(gpus)),
        gpu_resource="nvidia.com/gpu",
        gpus_per_replica=gpus,
        tensor_parallel=gpus,
        replicas=len(nodes),
        engine_params=engine,
    )
    return PlacementPlan(
        plan_id=plan_id,
        deployment_name=name,
        model=model,
        slo=Slo(ttft_p99_s=2.0, tpot_p99_s=0.05, rate_rps=2.0),
        chosen=chosen,
        placements=placements,
        candidates=(chosen,),
        fragmentation_before=1.0,
        fragmentation_after=1.0,
        fit_threshold=0.85,
        serving=serving,
        engine=engine,
    )


def rendered_plan_dir(root: Path, plan: PlacementPlan, inventory: Inventory, *, image: str = "") -> PlanDir:
    """``plan`` with its serving spec, manifests and KFP outputs rendered by the real builders for
    ``inventory``, written as the plan step writes it (what `gpuplace plan` hands on, minus the search)."""
    options = ServingOptions(image=image) if image else ServingOptions()
    plan = replace(plan, serving=serving_spec(plan, inventory, options))
    rendered = build_manifests(plan, inventory, options)
    return write_plan_dir(
        root,
        plan,
        manifests=rendered.apply,
        alternatives=rendered.alternatives,
        kfp=kfp_fragments(plan, inventory),
        candidates_md="",
    )


def write_sample_plan(
    root: Path, plan: PlacementPlan, manifests: Mapping[str, Sequence[Mapping[str, Any]]]
) -> PlanDir:
    """``plan`` with these manifests (file name → objects), written by the real plan-directory writer."""
    return write_plan_dir(root, plan, manifests=manifests, alternatives={}, kfp={}, candidates_md="")


def write_raw_manifest(root: Path, name: str, text: str) -> None:
    """Replace a manifest file with raw text (for YAML the writer would never produce)."""
    folder = root / "manifests"
    for old in folder.glob("*.yaml"):
        old.unlink()
    (folder / name).write_text(text)


def yaml_docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d is not None]


def local_plan_dir(root: Path, node: str, *, image: str = "") -> PlanDir:
    """The real planner's plan for this machine (``plan_local``) written with its objects for the cluster
    node ``node`` (the testenv's real node), in ``image`` (default: gpuplace's CPU serving image).

    The engine's step time is a stated line (the shape a calibration of ``tiny`` on this CPU fits,
    tests/unit/test_plan_local.py), not measured here: what uses this plan measures serving, not the
    prediction. The rate is a third of the line's capacity."""
    from gpuplace.components.images import CPU_IMAGE
    from gpuplace.manifests.local import local_kfp_fragments, local_serving_spec, node_manifests
    from gpuplace.planner.engine import transformers_engine_params
    from gpuplace.planner.local import LocalTarget, plan_local
    from gpuplace.planner.request import PlanRequest
    from gpuplace.types.workload import Traffic
    from tests.unit.test_plan_local import _capacity, _profile

    arch = model_arch_from_config("tiny", resolve_model("tiny").config)
    engine = transformers_engine_params(arch, memory_gib=0.0, num_blocks=512)
    target = LocalTarget(node=node, unit="cpu", steps=_profile(), engine=engine)
    rate = _capacity(target) / 3
    request = PlanRequest(
        model="tiny",
        slo=Slo(ttft_p99_s=10.0, tpot_p99_s=1.0, rate_rps=rate),
        traffic=Traffic.parse(128, 32),
        simulated_requests=300,
        max_load_share=0.5,
    )
    plan = plan_local(arch, target, request)
    plan = replace(plan, serving=local_serving_spec(plan, image or CPU_IMAGE))
    kfp = local_kfp_fragments(plan)
    return write_plan_dir(
        root, plan, manifests=node_manifests(plan), alternatives={}, kfp=kfp, candidates_md=""
    )
