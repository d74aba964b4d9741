"""The shape search: enumerate shapes, keep those meeting the SLO and fitting memory, choose the cheapest
that can be placed, and place its replicas. A pure, deterministic function of its arguments.

Shapes are GPU model × {whole GPU with tensor-parallel degree 1/2/4/8, MIG profile, time-sliced share}
× replicas. For each shape the fewest replicas that meet the SLO are found by bisection (latency only
falls as replicas are added); the shape is rejected with its reason and its closest miss otherwise.
Feasible shapes are tried cheapest first (then whole < MIG < shared, GPU name, TP) until one places all
replicas with every GPU-fit score at or above the threshold. :class:`NoFeasiblePlacement` lists every
rejected shape when none does.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace

from gpuplace.catalog import GpuCatalog
from gpuplace.errors import InvalidInput
from gpuplace.planner.fragmentation import FragmentationModel, mix_to_json
from gpuplace.planner.latency import GPU_MEMORY_UTILIZATION, Calibration, Shape, calibrate, predict
from gpuplace.planner.placement import EPS, FleetState, best_gpu_set, choose, fit_score, tier_of
from gpuplace.planner.request import KINDS, PlanRequest
from gpuplace.types import GpuSpec, Inventory, LatencyProfile, Node
from gpuplace.types.plan import (
    Candidate,
    NoFeasiblePlacement,
    Placement,
    PlacementPlan,
    Prediction,
    Slo,
)
from gpuplace.units import HOURS_PER_MONTH

TP_DEGREES: tuple[int, ...] = (1, 2, 4, 8)


def slug(text: str) -> str:
    """A DNS-1123 label from a model name (lower case, '-' separated, ≤ 63 characters)."""
    s = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return re.sub(r"-+", "-", s)[:50].strip("-") or "model"


def usable_nodes(inventory: Inventory, tolerated: Sequence[str]) -> tuple[Node, ...]:
    """Nodes whose hard taints the serving pods tolerate."""
    return tuple(
        n
        for n in inventory.nodes
        if all(t.effect == "PreferNoSchedule" or t.key in tolerated for t in n.taints)
    )


@dataclass(frozen=True, slots=True)
class _ShapeSpec:
    spec: GpuSpec
    kind: str
    tp: int = 1
    mig_profile: str = ""
    share: float = 1.0
    memory_gib: float = 0.0
    units: int = 0  # replicas of this shape the fleet has room for
    link: str = "single"

    def shape(self, link: str | None = None) -> Shape:
        if self.kind == "mig":
            mig = next(m for m in self.spec.mig_profiles if m.name == self.mig_profile)
            return Shape(
                self.spec,
                1,
                bandwidth_share=mig.memory_slices / max(self.spec.memory_slices, 1),
                compute_share=mig.compute_slices / max(self.spec.compute_slices, 1),
                memory_gib=mig.memory_gib,
            )
        if self.kind == "shared":
            return Shape(self.spec, 1, self.share, self.share, self.memory_gib * self.share, shared=True)
        return Shape(self.spec, self.tp, memory_gib=self.memory_gib, link=link or self.link)

    def price(self, prices: Mapping[str, float]) -> float:
        per_gpu = prices.get(self.spec.name, self.spec.price_usd_per_hour)
        if self.kind == "mig":
            mig = next(m for m in self.spec.mig_profiles if m.name == self.mig_profile)
            return per_gpu * mig.compute_slices / max(self.spec.compute_slices, 1)
        if self.kind == "shared":
            return per_gpu * self.share
        return per_gpu * self.tp


def _enumerate(
    nodes: Sequence[Node], catalog: GpuCatalog, request: PlanRequest, cal: Calibration
) -> tuple[list[_ShapeSpec], list[Candidate]]:
    shapes: list[_ShapeSpec] = []
    rejected: list[Candidate] = []
    models = sorted({g.gpu for n in nodes for g in n.gpus if g.gpu})
    for name in models:
        if request.gpus and name not in request.gpus:
            continue
        spec = catalog.get(name, field="inventory gpu")
        if "whole" in request.kinds:
            per_node = [
                [g for g in n.gpus if g.gpu == name and not g.mig_profile and g.allocated <= EPS]
                for n in nodes
                if n.gpu_sharing <= 1
            ]
            memory = min((g.memory_gib for free in per_node for g in free), default=spec.memory_gib)
            for tp in TP_DEGREES:
                if tp > request.max_tp:
                    continue
                units = sum(len(free) // tp for free in per_node)
                if cal.arch.num_attention_heads % tp or (
                    cal.arch.num_kv_heads % tp and tp % cal.arch.num_kv_heads
                ):
                    rejected.append(
                        Candidate(
                            name,
                            "whole",
                            tp,
                            0,
                            reason=f"{cal.arch.num_attention_heads} attention heads "
                            f"and {cal.arch.num_kv_heads} KV heads do not split over TP={tp}",
                        )
                    )
                    continue
                if units == 0:
                    if tp == 1 or any(len(f) >= tp // 2 for f in per_node):
                        rejected.append(
                            Candidate(name, "whole", tp, 0, reason=f"no node has {tp} free {name}")
                        )
                    continue
                sets = [best_gpu_set(free, tp) for free in per_node if len(free) >= tp]
                link = min(
                    (tier_of(s) for s in sets if s),
                    key=lambda t: ("single", "nvlink", "pcie-switch", "numa", "cross-numa").index(t),
                )
                shapes.append(_ShapeSpec(spec, "whole", tp, memory_gib=memory, units=units, link=link))
        if "mig" in request.kinds:
            free_slices: dict[str, int] = {}
            for n in nodes:
                for g in n.gpus:
                    if g.gpu == name and g.mig_profile and g.allocated <= EPS:
                        free_slices[g.mig_profile] = free_slices.get(g.mig_profile, 0) + 1
            for profile, count in sorted(free_slices.items()):
                mig = next(m for m in spec.mig_profiles if m.name == profile)
                shapes.append(
                    _ShapeSpec(spec, "mig", 1, profile, memory_gib=mig.memory_gib, units=count, link="mig")
                )
        if "shared" in request.kinds:
            for sharing in sorted({n.gpu_sharing for n in nodes if n.gpu_sharing > 1}):
                share = 1 / sharing
                units = sum(
                    int((1 - g.allocated) * sharing + EPS)
                    for n in nodes
                    if n.gpu_sharing == sharing
                    for g in n.gpus
                    if g.gpu == name and not g.mig_profile
                )
                if units:
                    shapes.append(
                        _ShapeSpec(
                            spec,
                            "shared",
                            1,
                            share=share,
                            memory_gib=spec.memory_gib,
                            units=units,
                            link="shared",
                        )
                    )
    return shapes, rejected


def _ratios(pred: Prediction, slo: Slo, usable_gib: float) -> tuple[float, float, float]:
    return (
        pred.tpot_p99_s / slo.bound("tpot_p99_s"),
        pred.ttft_p99_s / slo.bound("ttft_p99_s"),
        pred.memory_per_gpu_gib / usable_gib if usable_gib > 0 else math.inf,
    )


def _locality(shape: _ShapeSpec) -> str:
    return shape.link if shape.kind == "whole" else "mig" if shape.kind == "mig" else "shared"


def _evaluate(shape: _ShapeSpec, cal: Calibration, request: PlanRequest) -> Candidate:
    slo = request.slo
    usable_gib = shape.shape().memory_gib * GPU_MEMORY_UTILIZATION
    price = shape.price(request.prices_usd_per_hour)
    top = min(shape.units, request.max_replicas)

    def ok(r: int) -> tuple[bool, Prediction]:
        pred = predict(cal, shape.shape(), slo, request.traffic, r)
        lat, ttft, mem = _ratios(pred, slo, usable_gib)
        ideal_fit = fit_score(max(lat, ttft), mem, _locality(shape), 0.0, 1.0)
        return pred.stable and max(lat, ttft, mem) <= 1 and ideal_fit >= request.fit_threshold, pred

    base = Candidate(
        shape.spec.name,
        shape.kind,
        shape.tp,
        0,
        mig_profile=shape.mig_profile,
        share=shape.share,
        interconnect=shape.link,
        memory_available_gib=usable_gib,
    )
    good, pred = ok(top)
    if not good:
        lat, ttft, mem = _ratios(pred, slo, usable_gib)
        reasons = []
        if not pred.stable:
            reasons.append(f"saturated: {top} replica(s) cannot keep up with {slo.bound('rate_rps'):g} req/s")
        if mem > 1:
            reasons.append(f"needs {pred.memory_per_gpu_gib:.1f} GiB per GPU, {usable_gib:.1f} usable")
        if pred.stable and lat > 1:
            reasons.append(f"p99 TPOT {pred.tpot_p99_s * 1e3:.1f} ms > {slo.bound('tpot_p99_s') * 1e3:g} ms")
        if pred.stable and ttft > 1:
            reasons.append(f"p99 TTFT {pred.ttft_p99_s * 1e3:.0f} ms > {slo.bound('ttft_p99_s') * 1e3:g} ms")
        if not reasons:
            best_fit = fit_score(max(lat, ttft), mem, _locality(shape), 0.0, 1.0)
            reasons.append(
                f"best fit score {best_fit:.2f} < {request.fit_threshold:g} (latency at {max(lat, ttft):.0%} "
                f"of the SLO, memory {mem:.0%} used, {_locality(shape)})"
            )
        miss = max(lat, ttft, mem) if pred.stable else math.inf
        return replace(
            base,
            replicas=top,
            prediction=pred,
            cost_usd_per_hour=price * top,
            reason="; ".join(reasons) + f" with all {top} available",
            miss=miss,
        )
    lo, hi = 1, top  # smallest r with ok(r): ok is monotone in r
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid)[0]:
            hi = mid
        else:
            lo = mid + 1
    pred = ok(lo)[1]
    lat, ttft, mem = _ratios(pred, slo, usable_gib)
    return replace(
        base,
        replicas=lo,
        prediction=pred,
        cost_usd_per_hour=price * lo,
        verdict="feasible",
        reason="meets the SLO",
        miss=max(lat, ttft, mem),
    )


def _place(
    cand: Candidate,
    shape: _ShapeSpec,
    state: FleetState,
    usable: Sequence[Node],
    cal: Calibration,
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
        pred = predict(
            cal,
            shape.shape(got.interconnect if cand.kind == "whole" else None),
            request.slo,
            request.traffic,
            cand.replicas,
        )
        lat, ttft, mem = _ratios(pred, request.slo, cand.memory_available_gib)
        demand = cand.tp if cand.kind == "whole" else cand.share if cand.kind == "shared" else 1.0
        score = fit_score(max(lat, ttft), mem, got.interconnect, got.frag_delta, demand)
        if score + 1e-12 < request.fit_threshold:
            return (
                (),
                f"placement: fit score {score:.2f} < {request.fit_threshold:g} "
                f"on {got.node.name} ({got.interconnect})",
            )
        numas = {g.numa_node for g in got.gpus}
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
        used.add(got.node.name)
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
    p_tpot = _breach_probability(pred.tpot_p50_s, pred.tpot_p99_s, slo.bound("tpot_p99_s"))
    p_ttft = _breach_probability(pred.ttft_p50_s, pred.ttft_p99_s, slo.bound("ttft_p99_s"))
    p = 1 - (1 - p_tpot) * (1 - p_ttft)
    return slo.bound("rate_rps") * 3600 * HOURS_PER_MONTH * p * penalty_usd


def plan_id_of(
    profile: LatencyProfile, inventory: Inventory, request: PlanRequest, catalog: GpuCatalog
) -> str:
    """A hash of everything the plan depends on: same inputs, same id."""
    inputs = {
        "model": asdict(profile.model),
        "results": [
            (asdict(r.point), r.ok, r.prefill.p50, r.prefill.p99, r.tpot.p50, r.tpot.p99, r.mbu, r.mfu)
            for r in profile.results
        ],
        "device": profile.device.name,
        "nodes": [
            (n.name, n.taints, n.gpu_sharing, n.mig_strategy, n.zone, [asdict(g) for g in n.gpus])
            for n in inventory.nodes
        ],
        "request": {k: v for k, v in asdict(request).items()},
        "prices": {g.name: g.price_usd_per_hour for g in catalog},
    }
    text = json.dumps(inputs, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _fix_text(rejected: Sequence[Candidate], request: PlanRequest) -> str:
    tips = []
    if any("TPOT" in c.reason or "TTFT" in c.reason for c in rejected):
        tips.append("relax the SLO")
    if any("saturated" in c.reason or "available" in c.reason for c in rejected):
        tips.append("lower the rate or free/add GPUs")
    if request.gpus or len(request.kinds) < len(KINDS):
        tips.append("allow more GPU models or shapes (--gpus, --kinds)")
    if any("GiB" in c.reason for c in rejected):
        tips.append("use larger GPUs or a higher TP degree")
    if any("fit score" in c.reason for c in rejected):
        tips.append(f"lower --fit-threshold (now {request.fit_threshold:g})")
    return ", ".join(tips or ["add GPUs to the inventory"]) + "."


def plan_placement(
    profile: LatencyProfile, inventory: Inventory, catalog: GpuCatalog, request: PlanRequest
) -> PlacementPlan:
    """The cheapest placement meeting ``request.slo``; raises :class:`NoFeasiblePlacement` if none does."""
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
    cal = calibrate(profile)
    usable = usable_nodes(inventory, request.tolerated_taints)
    shapes, rejected = _enumerate(usable, catalog, request, cal)
    evaluated = [(_evaluate(s, cal, request), s) for s in shapes]
    rejected += [c for c, _ in evaluated if c.verdict == "rejected"]
    order = {k: i for i, k in enumerate(KINDS)}
    feasible = sorted(
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
    frag = FragmentationModel(request.task_mix)
    before = FleetState.of(inventory.nodes, frag).fleet_fragmentation()
    chosen: tuple[Candidate, _ShapeSpec, tuple[Placement, ...], FleetState] | None = None
    final: list[Candidate] = []
    for cand, shape in feasible:
        if chosen is not None:
            final.append(cand)
            continue
        state = FleetState.of(inventory.nodes, frag)
        placements, why = _place(cand, shape, state, usable, cal, request)
        if not placements:
            cand = replace(cand, verdict="rejected", reason=why)
            rejected.append(cand)
            final.append(cand)
            continue
        cand = replace(cand, verdict="chosen", fit_score=min(p.fit_score for p in placements))
        chosen = (cand, shape, placements, state)
        final.append(cand)
    if chosen is None:
        raise NoFeasiblePlacement(request.slo, tuple(rejected), _fix_text(rejected, request))
    cand, shape, placements, state = chosen
    # The same shape placed again without the fragmentation criterion: what FGD changed in this plan.
    plain = FleetState.of(inventory.nodes, frag)
    plain_placements, plain_why = _place(cand, shape, plain, usable, cal, request, use_fragmentation=False)
    workload = {
        "source": request.task_mix_source,
        "tasks": request.task_mix_tasks,
        "classes": mix_to_json(request.task_mix),
        "effect": {
            "with_fragmentation": [{"node": p.node, "gpu_ids": list(p.gpu_ids)} for p in placements],
            "without_fragmentation": [{"node": p.node, "gpu_ids": list(p.gpu_ids)} for p in plain_placements],
            "without_fragmentation_note": plain_why,
            "usable_gpus_before": round(FleetState.of(inventory.nodes, frag).usable_gpus(), 6),
            "usable_gpus_after_with": round(state.usable_gpus(), 6),
            "usable_gpus_after_without": round(plain.usable_gpus(), 6) if plain_placements else None,
            "fragmentation_after_without": round(plain.fleet_fragmentation(), 9)
            if plain_placements
            else None,
        },
    }
    all_candidates = tuple(final) + tuple(c for c in rejected if c not in final)
    pid = plan_id_of(profile, inventory, request, catalog)
    assert cand.prediction is not None
    tradeoff = []
    for kind in KINDS:
        of_kind = [c for c in all_candidates if c.kind == kind and c.prediction is not None]
        ok = [c for c in of_kind if c.verdict in ("chosen", "feasible")]
        best = min(ok or of_kind, key=lambda c: (c.cost_usd_per_hour, c.label), default=None)
        if best is not None and best.prediction is not None:
            tradeoff.append(
                {
                    "kind": kind,
                    "shape": best.label,
                    "tpot_p99_s": best.prediction.tpot_p99_s if best.prediction.stable else None,
                    "ttft_p99_s": best.prediction.ttft_p99_s if best.prediction.stable else None,
                    "cost_usd_per_month": best.cost_usd_per_month,
                    "meets_slo": best.verdict in ("chosen", "feasible"),
                }
            )
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
        profile_device=profile.device.name,
        notes=cal.notes + inventory.warnings,
        sla_breach_cost_usd_per_month=breach_cost_usd_per_month(
            cand.prediction, request.slo, request.breach_penalty_usd
        ),
        tradeoff=tuple(tradeoff),
        fragmentation_workload=workload,
    )
