"""The shape search: enumerate shapes, keep those meeting the SLO and fitting memory, choose the cheapest
that can be placed, and place its replicas. A pure, deterministic function of its arguments.

Shapes are GPU model × {whole GPU with tensor-parallel degree 1/2/4/8, MIG profile, time-sliced share}
× replicas (:mod:`gpuplace.planner.offers`); a whole-GPU group larger than any node of a multi-node NVLink
domain spans that domain's nodes (:func:`~gpuplace.planner.placement.choose_across`). Each shape is
priced by the serving model (:mod:`gpuplace.planner.evaluate`: vLLM's engine parameters, a roofline step
time at efficiencies from a profile of the same GPU model or the GPU-class defaults, a simulation of one
replica under the plan's traffic), which finds the fewest replicas meeting the SLO or rejects the shape
with its reason and its closest miss. Feasible shapes are tried cheapest first (then whole < MIG <
shared, GPU name, TP) until one places all replicas with every GPU-fit score at or above the threshold,
each replica predicted on the link tier its GPU set really has. :class:`NoFeasiblePlacement` lists every
rejected shape when none does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, replace
from typing import Any

from gpuplace.catalog import GpuCatalog
from gpuplace.catalog.efficiency import EfficiencyTable
from gpuplace.errors import InvalidInput
from gpuplace.planner.evaluate import ServingModels
from gpuplace.planner.fragmentation import FragmentationModel, mix_to_json
from gpuplace.planner.offers import OfferedShape, enumerate_shapes, inputs_id, slug, usable_nodes
from gpuplace.planner.placement import FleetState, choose, fit_score
from gpuplace.planner.request import KINDS, PlanRequest
from gpuplace.planner.steptime import weight_bytes
from gpuplace.types import Inventory, LatencyProfile, ModelArch, Node
from gpuplace.types.engine import EngineParams
from gpuplace.types.operators import OperatorTable
from gpuplace.types.plan import Candidate, NoFeasiblePlacement, Placement, PlacementPlan, Prediction, Slo
from gpuplace.units import HOURS_PER_MONTH

__all__ = ["breach_cost_usd_per_month", "plan_id_of", "plan_placement", "slug", "usable_nodes"]


def _place(
    cand: Candidate,
    shape: OfferedShape,
    state: FleetState,
    usable: Sequence[Node],
    models: ServingModels,
    request: PlanRequest,
    *,
    use_fragmentation: bool = True,
) -> tuple[tuple[Placement, ...], str]:
    placements: list[Placement] = []
    used: set[str] = set()
    for i in range(cand.replicas):
        got = choose(
            state,
            usable,
            gpu=cand.gpu,
            kind=cand.kind,
            tp=cand.tp,
            mig_profile=cand.mig_profile,
            share=cand.share,
            used_nodes=frozenset(used),
            use_fragmentation=use_fragmentation,
        )
        if got is None:
            return (), f"placement: no room for replica {i + 1} of {cand.replicas}"
        # the replica's own GPU set: its link tier may be worse than the shape's best (cached per tier)
        link = got.interconnect if cand.kind == "whole" else shape.link
        pred, latency, mem = models.prediction(shape, link, cand.replicas)
        demand = cand.tp if cand.kind == "whole" else cand.share if cand.kind == "shared" else 1.0
        score = fit_score(latency, mem, got.interconnect, got.frag_delta, demand)
        if score + 1e-12 < request.fit_threshold:
            return (
                (),
                f"placement: fit score {score:.2f} < {request.fit_threshold:g} "
                f"on {'+'.join(n.name for n in got.all_nodes)} ({got.interconnect})",
            )
        # NUMA nodes are per host: a group across hosts has none of its own
        numas = {g.numa_node for g in got.gpus} if len(got.all_nodes) == 1 else set()
        placements.append(
            Placement(
                replica=i,
                node=got.node.name,
                gpu_ids=tuple(g.id for g in got.gpus),
                interconnect=got.interconnect,
                numa_node=numas.pop() if len(numas) == 1 else None,
                fit_score=round(score, 6),
                fragmentation_delta=round(got.frag_delta, 9),
                prediction=pred,
            )
        )
        used.update(n.name for n in got.all_nodes)
        state.take({g.id: got.share for g in got.gpus})
    return tuple(placements), ""


def _breach_probability(p50: float, p99: float, target: float) -> float:
    """P(X > target) for a log-normal with the given median and 99th percentile."""
    if not (math.isfinite(p50) and math.isfinite(p99)) or p50 <= 0:
        return 1.0
    if p99 <= p50:
        return 0.0 if target >= p50 else 1.0
    sigma = math.log(p99 / p50) / 2.3263478740408408
    z = math.log(target / p50) / sigma
    return 0.5 * math.erfc(z / math.sqrt(2))


def breach_cost_usd_per_month(pred: Prediction, slo: Slo, penalty_usd: float) -> float:
    """Expected SLA-breach cost: requests per month × P(TPOT or TTFT over target) × penalty per breach."""
    p_tpot = _breach_probability(pred.tpot.p50, pred.tpot.p99, slo.bound("tpot_p99_s"))
    p_ttft = _breach_probability(pred.ttft.p50, pred.ttft.p99, slo.bound("ttft_p99_s"))
    p = 1 - (1 - p_tpot) * (1 - p_ttft)
    return slo.bound("rate_rps") * 3600 * HOURS_PER_MONTH * p * penalty_usd


def plan_id_of(
    arch: ModelArch,
    inventory: Inventory,
    request: PlanRequest,
    catalog: GpuCatalog,
    *,
    efficiency_version: str = "",
    profile: LatencyProfile | None = None,
    operators: OperatorTable | None = None,
) -> str:
    """A hash of everything the plan depends on: same inputs, same id."""
    inputs = {
        "operators": operators.to_json_dict() if operators is not None else None,
        "model": asdict(arch),
        "results": [
            (asdict(r.point), r.ok, r.prefill.p50, r.prefill.p99, r.tpot.p50, r.tpot.p99, r.mbu, r.mfu)
            for r in (profile.results if profile is not None else ())
        ],
        "device": profile.device.name if profile is not None else "",
        "efficiency": efficiency_version,
        "nodes": [
            (n.name, n.taints, n.gpu_sharing, n.mig_strategy, n.zone, [asdict(g) for g in n.gpus])
            for n in inventory.nodes
        ],
        "request": {k: v for k, v in asdict(request).items()},
        "prices": {g.name: g.price_usd_per_hour for g in catalog},
    }
    return inputs_id(inputs)


def _fix_text(rejected: Sequence[Candidate], request: PlanRequest) -> str:
    tips = []
    if any("TPOT" in c.reason or "TTFT" in c.reason for c in rejected):
        tips.append("relax the SLO")
    if any("saturated" in c.reason or "available" in c.reason for c in rejected):
        tips.append("lower the rate or free/add GPUs")
    if request.gpus or len(request.kinds) < len(KINDS):
        tips.append("allow more GPU models or shapes (--gpus, --kinds)")
    if any("GiB" in c.reason or "KV cache" in c.reason for c in rejected):
        tips.append("use larger GPUs or a higher TP degree")
    if any("no FP8 tensor cores" in c.reason for c in rejected):
        tips.append("serve in bf16 (--dtype bf16 --kv-cache-dtype auto) or allow Ada, Hopper or Blackwell")
    if any("fit score" in c.reason for c in rejected):
        tips.append(f"lower --fit-threshold (now {request.fit_threshold:g})")
    return ", ".join(tips or ["add GPUs to the inventory"]) + "."


def _fits_nowhere(arch: ModelArch, rejected: Sequence[Candidate], request: PlanRequest) -> str:
    """A sentence when the weights fit no shape the fleet offers, even at its largest TP degree."""
    offered = [c for c in rejected if c.reason.startswith("weights do not fit")]
    if not offered or any(c.prediction is not None for c in rejected):
        return ""
    largest = max(c.tp for c in offered)
    gib = weight_bytes(arch, request.precision) / 2**30
    return (
        f"The weights of {arch.name} ({gib:.0f} GiB in {request.precision.weights}) fit no GPU shape of "
        f"this fleet, even at its largest tensor-parallel degree (TP={largest}): use GPUs with more memory "
        "or nodes with more free GPUs. "
    )


def _check_one_model(arch: ModelArch, request: PlanRequest, profile: LatencyProfile | None) -> None:
    """The architecture and the profile (when given, with a successful point) are of the model planned."""
    if profile is not None:
        if profile.model.name != request.model:
            raise InvalidInput(
                "model",
                request.model,
                f"the profile is of model {profile.model.name!r}",
                f"Profile {request.model!r} first, or plan for --model {profile.model.name}",
            )
        if not profile.ok_results:
            raise InvalidInput(
                "profile", profile.model.name, "has no successful sweep point", "Re-run the profile"
            )
    if arch.name != request.model:
        raise InvalidInput(
            "model", request.model, f"the model architecture given is {arch.name!r}", "Plan one model"
        )


def _fragmentation_effect(
    placements: tuple[Placement, ...],
    state: FleetState,
    plain_placements: tuple[Placement, ...],
    plain: FleetState,
    plain_why: str,
    before: FleetState,
) -> dict[str, Any]:
    """What FGD changed: the chosen shape's placement with the fragmentation criterion and without it
    (``plain``), and the GPUs the workload's mix can still use after each."""
    return {
        "with_fragmentation": [{"node": p.node, "gpu_ids": list(p.gpu_ids)} for p in placements],
        "without_fragmentation": [{"node": p.node, "gpu_ids": list(p.gpu_ids)} for p in plain_placements],
        "without_fragmentation_note": plain_why,
        "usable_gpus_before": round(before.usable_gpus(), 6),
        "usable_gpus_after_with": round(state.usable_gpus(), 6),
        "usable_gpus_after_without": round(plain.usable_gpus(), 6) if plain_placements else None,
        "fragmentation_after_without": round(plain.fleet_fragmentation(), 9) if plain_placements else None,
    }


def _tradeoff(candidates: Sequence[Candidate]) -> tuple[dict[str, Any], ...]:
    """Per kind of shape (whole, MIG, shared), the cheapest that meets the SLO (else the cheapest
    predicted): its latency, cost and whether it meets the SLO."""
    out = []
    for kind in KINDS:
        of_kind = [c for c in candidates if c.kind == kind and c.prediction is not None]
        ok = [c for c in of_kind if c.verdict in ("chosen", "feasible")]
        best = min(ok or of_kind, key=lambda c: (c.cost_usd_per_hour, c.label), default=None)
        if best is not None and best.prediction is not None:
            out.append(
                {
                    "kind": kind,
                    "shape": best.label,
                    "tpot_p99_s": best.prediction.tpot.p99 if best.prediction.stable else None,
                    "ttft_p99_s": best.prediction.ttft.p99 if best.prediction.stable else None,
                    "cost_usd_per_month": best.cost_usd_per_month,
                    "meets_slo": best.verdict in ("chosen", "feasible"),
                }
            )
    return tuple(out)


def _feasible_in_order(
    evaluated: Sequence[tuple[Candidate, OfferedShape]],
) -> list[tuple[Candidate, OfferedShape]]:
    """The feasible shapes in the order tried: cheapest first, then whole < MIG < shared, GPU name, TP."""
    order = {k: i for i, k in enumerate(KINDS)}
    return sorted(
        ((c, s) for c, s in evaluated if c.verdict == "feasible"),
        key=lambda cs: (
            round(cs[0].cost_usd_per_hour, 9),
            order[cs[0].kind],
            cs[0].gpu,
            cs[0].tp,
            cs[0].mig_profile,
            cs[0].share,
        ),
    )


def _first_placed(
    feasible: Sequence[tuple[Candidate, OfferedShape]],
    nodes: Sequence[Node],
    frag: FragmentationModel,
    usable: Sequence[Node],
    models: ServingModels,
    request: PlanRequest,
) -> tuple[tuple[Candidate, OfferedShape, tuple[Placement, ...], FleetState] | None, list[Candidate]]:
    """The first shape that places (with its placements and fleet state), and each candidate's verdict."""
    chosen: tuple[Candidate, OfferedShape, tuple[Placement, ...], FleetState] | None = None
    final: list[Candidate] = []
    for cand, shape in feasible:
        if chosen is not None:
            final.append(cand)
            continue
        state = FleetState.of(nodes, frag)
        placements, why = _place(cand, shape, state, usable, models, request)
        if not placements:
            cand = replace(cand, verdict="rejected", reason=why)
            final.append(cand)
            continue
        cand = replace(cand, verdict="chosen", fit_score=min(p.fit_score for p in placements))
        chosen = (cand, shape, placements, state)
        final.append(cand)
    return chosen, final


def _fragmentation_workload(
    chosen: tuple[Candidate, OfferedShape, tuple[Placement, ...], FleetState],
    nodes: Sequence[Node],
    frag: FragmentationModel,
    usable: Sequence[Node],
    models: ServingModels,
    request: PlanRequest,
) -> dict[str, Any]:
    """The workload fragmentation was measured against, and what FGD changed in the chosen placement."""
    cand, shape, placements, state = chosen
    # The same shape placed again without the fragmentation criterion: what FGD changed in this plan.
    plain = FleetState.of(nodes, frag)
    plain_placements, plain_why = _place(cand, shape, plain, usable, models, request, use_fragmentation=False)
    return {
        "source": request.task_mix_source,
        "tasks": request.task_mix_tasks,
        "classes": mix_to_json(request.task_mix),
        "effect": _fragmentation_effect(
            placements, state, plain_placements, plain, plain_why, FleetState.of(nodes, frag)
        ),
    }


def plan_placement(
    arch: ModelArch,
    inventory: Inventory,
    catalog: GpuCatalog,
    request: PlanRequest,
    *,
    efficiency: EfficiencyTable,
    profile: LatencyProfile | None = None,
    operators: OperatorTable | None = None,
) -> PlacementPlan:
    """The cheapest placement meeting ``request.slo``; raises :class:`NoFeasiblePlacement` if none does.

    ``efficiency`` is the GPU-class defaults table (:func:`gpuplace.catalog.efficiency.
    load_efficiency_table`, loaded once by the caller); ``profile``, when given, calibrates the
    efficiencies of its own GPU model only (a CPU profile calibrates none); ``operators``, kernels
    measured on one GPU class, price the shapes of that class in place of its defaults.
    """
    _check_one_model(arch, request, profile)
    models = ServingModels(arch, request, efficiency, profile, operators)
    usable = usable_nodes(inventory, request.tolerated_taints)
    shapes, rejected = enumerate_shapes(usable, catalog, request, arch)
    evaluated = [(models.evaluate(s), s) for s in shapes]
    rejected += [c for c, _ in evaluated if c.verdict == "rejected"]
    feasible = _feasible_in_order(evaluated)
    frag = FragmentationModel(request.task_mix)
    before = FleetState.of(inventory.nodes, frag).fleet_fragmentation()
    chosen, final = _first_placed(feasible, inventory.nodes, frag, usable, models, request)
    # the shapes that could not be placed join the rejected, in the order they were tried
    rejected += [c for c in final if c.verdict == "rejected"]
    if chosen is None:
        fix = _fits_nowhere(arch, rejected, request) + _fix_text(rejected, request)
        raise NoFeasiblePlacement(request.slo, tuple(rejected), fix)
    workload = _fragmentation_workload(chosen, inventory.nodes, frag, usable, models, request)
    cand, shape, placements, state = chosen
    all_candidates = tuple(final) + tuple(c for c in rejected if c not in final)
    pid = plan_id_of(
        arch,
        inventory,
        request,
        catalog,
        efficiency_version=efficiency.version,
        profile=profile,
        operators=operators,
    )
    assert cand.prediction is not None
    engine = models.engine(shape)
    assert isinstance(engine, EngineParams)
    return PlacementPlan(
        plan_id=pid,
        deployment_name=request.deployment_name or f"gpuplace-{slug(request.model)}",
        model=request.model,
        slo=request.slo,
        chosen=cand,
        placements=placements,
        candidates=all_candidates,
        fragmentation_before=round(before, 9),
        fragmentation_after=round(state.fleet_fragmentation(), 9),
        fit_threshold=request.fit_threshold,
        inventory_source=inventory.source,
        profile_device=profile.device.name if profile is not None else "",
        notes=models.notes + inventory.warnings,
        sla_breach_cost_usd_per_month=breach_cost_usd_per_month(
            cand.prediction, request.slo, request.breach_penalty_usd
        ),
        tradeoff=_tradeoff(all_candidates),
        traffic=request.traffic,
        engine=engine,
        fragmentation_workload=workload,
    )
