"""The planner: the serving model per shape, shape choice, placement locality, errors, determinism, brute
force.

Profiles here are hand-made :class:`LatencyProfile` values (a llama-3.1-8b sweep with H100-like
figures): the planner is a pure function of its arguments, so a real GPU is not needed to test it.
Simulations use 400 requests per replica (the planner's default is 2000) to keep the suite fast.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuplace.catalog import load_gpu_catalog, model_arch_from_config, resolve_model
from gpuplace.catalog.efficiency import load_efficiency_table
from gpuplace.errors import InvalidInput
from gpuplace.inventory import load_inventory, parse_fleet
from gpuplace.planner import NoFeasiblePlacement, PlanRequest
from gpuplace.planner import plan_placement as _plan_placement
from gpuplace.planner.evaluate import ServingModels, Unservable
from gpuplace.planner.fragmentation import FragmentationModel, TaskClass
from gpuplace.planner.hardware import LINKS, link_gbps
from gpuplace.planner.offers import OfferedShape, enumerate_shapes, usable_nodes
from gpuplace.planner.placement import FleetState, best_gpu_set, fit_score
from gpuplace.planner.search import _place
from gpuplace.types import (
    DeviceInfo,
    Distribution,
    GpuDevice,
    Inventory,
    LatencyProfile,
    ModelArch,
    Node,
    PointResult,
    SweepPoint,
)
from gpuplace.types.plan import PlacementPlan, Slo
from gpuplace.types.workload import Traffic

CATALOG = load_gpu_catalog()
TABLE = load_efficiency_table()
SIMULATED = 400


def arch_of(model: str) -> ModelArch:
    return model_arch_from_config(model, resolve_model(model).config)


def synthetic_profile(
    model: str = "llama-3.1-8b", *, decode_ms: float = 6.5, prefill_ms: float = 40.0
) -> LatencyProfile:
    """A profile as an H100 run of ``model`` would look: MBU ≈ 0.75, 5% spread in timings."""
    arch = arch_of(model)
    results = []
    for batch in (1, 8):
        point = SweepPoint(batch, 512, 128, "bfloat16", "eager")
        step = decode_ms / 1000 * (1 + 0.02 * (batch - 1))
        pre = prefill_ms / 1000 * batch
        bytes_step = arch.decode_weight_params * 2 + batch * 576 * arch.kv_bytes_per_token(2)
        floor = bytes_step / 3.35e12
        results.append(
            PointResult(
                point=point,
                ok=True,
                repeats=20,
                prefill=Distribution.of(pre * (1 + 0.01 * i) for i in range(20)),
                decode_step=Distribution.of(step * (1 + 0.005 * i) for i in range(200)),
                tpot=Distribution.of(step * (1 + 0.003 * i) for i in range(20)),
                e2e=Distribution.of([pre + 127 * step]),
                decode_bytes_per_step=bytes_step,
                decode_floor_s=floor,
                mbu=floor / step,
                prefill_flops=2 * arch.num_params * 512 * batch,
                mfu=2 * arch.num_params * 512 * batch / (pre * 989e12),
            )
        )
    device = DeviceInfo(
        kind="cuda", name="NVIDIA H100 80GB HBM3", memory_gib=79.6, catalog_gpu="H100-SXM5-80GB"
    )
    return LatencyProfile(arch, device, tuple(results), 3350.0, "catalog:H100-SXM5-80GB", {"bfloat16": 989.0})


PROFILE = synthetic_profile()
SLO = Slo(tpot_p99_s=0.05, ttft_p99_s=2.0, rate_rps=5.0)
TRAFFIC = Traffic()  # 512 prompt tokens, 128 output tokens


def request(model: str, slo: Slo, **kwargs: Any) -> PlanRequest:
    return PlanRequest(model, slo, simulated_requests=SIMULATED, **kwargs)


def plan_placement(
    profile: LatencyProfile | None, inventory: Inventory, catalog: Any, req: PlanRequest
) -> PlacementPlan:
    """The planner with the bundled efficiency defaults, calibrated by ``profile`` when given."""
    arch = profile.model if profile is not None else arch_of(req.model)
    return _plan_placement(arch, inventory, catalog, req, efficiency=TABLE, profile=profile)


def whole(gpu: str, tp: int = 1, link: str = "single", units: int = 8) -> OfferedShape:
    spec = CATALOG.get(gpu)
    return OfferedShape(spec, "whole", tp, memory_gib=spec.memory_gib, units=units, link=link)


def models(
    slo: Slo = SLO, profile: LatencyProfile | None = PROFILE, model: str = "llama-3.1-8b"
) -> ServingModels:
    return ServingModels(arch_of(model), request(model, slo), TABLE, profile)


def test_a_profile_of_the_same_gpu_calibrates_it_and_no_other() -> None:
    inv = load_inventory("mixed-a100-h100-l4")
    plan = plan_placement(PROFILE, inv, CATALOG, request("llama-3.1-8b", SLO))
    assert any("H100-SXM5-80GB: MBU" in n and "from the profile" in n for n in plan.notes)
    assert any(n.startswith("A100-SXM4-80GB: the profile ran on") for n in plan.notes)
    without = plan_placement(None, inv, CATALOG, request("llama-3.1-8b", SLO))
    assert any("GPU-class default efficiencies" in n for n in without.notes)
    assert without.profile_device == "" and plan.profile_device == PROFILE.device.name


def test_slower_gpu_higher_rate_and_mig_slices_predict_slower() -> None:
    m = models()
    h100, a100 = whole("H100-SXM5-80GB"), whole("A100-SXM4-80GB")
    spec = CATALOG.get("A100-SXM4-80GB")
    mig = OfferedShape(spec, "mig", 1, "3g.40gb", memory_gib=40.0, units=1, link="mig")
    base = m.replica(h100).at_rate(5.0)
    assert m.replica(a100).at_rate(5.0).tpot.p50 > base.tpot.p50
    assert m.replica(mig).at_rate(5.0).tpot.p50 > m.replica(a100).at_rate(5.0).tpot.p50
    assert m.replica(h100).at_rate(20.0).ttft.p99 > base.ttft.p99
    assert m.replica(h100).at_rate(2.5).tpot.p50 <= base.tpot.p50  # two replicas share the rate


def test_tensor_parallel_cost_depends_on_the_interconnect() -> None:
    m = models()
    shape = whole("H100-SXM5-80GB", 4, "nvlink")
    by_link = {link: m.replica(shape, link).at_rate(5.0).tpot.p50 for link in LINKS if link != "single"}
    assert by_link["nvlink"] < by_link["pcie-switch"] < by_link["numa"] < by_link["cross-numa"]
    spec = CATALOG.get("H100-SXM5-80GB")
    assert link_gbps(spec, "nvlink") > link_gbps(spec, "pcie-switch")
    assert len({id(m.replica(shape, link)) for link in by_link}) == 4  # one cached model per tier
    assert m.replica(shape, "numa") is m.replica(shape, "numa")


def test_overloaded_replica_is_unstable_and_rejected_as_saturated() -> None:
    m = models(replace(SLO, rate_rps=500))
    l4 = whole("L4-24GB", units=1)
    assert not m.replica(l4).at_rate(500).stable
    cand = m.evaluate(l4)
    assert cand.verdict == "rejected" and "saturated" in cand.reason and math.isinf(cand.miss)


def test_the_fewest_replicas_meet_the_slo_and_one_fewer_does_not() -> None:
    m = models(replace(SLO, rate_rps=60.0))
    shape = whole("H100-SXM5-80GB", units=16)
    cand = m.evaluate(shape)
    assert cand.verdict == "feasible" and cand.replicas >= 2
    assert m.judge(shape, m.replica(shape).at_rate(60.0 / cand.replicas))[0]
    assert not m.judge(shape, m.replica(shape).at_rate(60.0 / (cand.replicas - 1)))[0]
    pred = cand.prediction
    assert pred is not None and pred.tpot.p99 <= 0.05 and pred.ttft.p99 <= 2.0
    assert 0 < pred.memory_per_gpu_gib <= cand.memory_available_gib


def test_engine_parameters_of_the_chosen_shape_go_into_the_plan() -> None:
    plan = plan_placement(None, load_inventory("h100-nvlink"), CATALOG, request("llama-3.1-8b", SLO))
    assert plan.engine is not None
    assert (plan.engine.max_num_batched_tokens, plan.engine.max_num_seqs) == (8192, 1024)
    back = PlacementPlan.from_json_dict(plan.to_json_dict())
    assert back.engine == plan.engine


def test_a_trace_length_mix_is_simulated_and_its_longest_request_must_fit() -> None:
    rows = ((100, 20), (3000, 400), (800, 100))
    req = request("llama-3.1-8b", SLO, traffic=Traffic(trace="t.csv"), trace_lengths=rows)
    m = ServingModels(arch_of("llama-3.1-8b"), req, TABLE)
    assert m.traffic.max_context_tokens == 3400
    sample = m.traffic.at_rate(1.0)
    assert {(r.prompt_tokens, r.output_tokens) for r in sample} == set(rows)
    plan = _plan_placement(
        arch_of("llama-3.1-8b"), load_inventory("h100-nvlink"), CATALOG, req, efficiency=TABLE
    )
    assert plan.traffic.trace == "t.csv"
    with pytest.raises(InvalidInput, match="trace"):
        _plan_placement(
            arch_of("llama-3.1-8b"),
            load_inventory("h100-nvlink"),
            CATALOG,
            request("llama-3.1-8b", SLO, traffic=Traffic(trace="t.csv")),
            efficiency=TABLE,
        )


def test_plan_on_mixed_fleet_is_cheapest_feasible_and_placed_on_free_gpus() -> None:
    inv = load_inventory("mixed-a100-h100-l4")
    plan = plan_placement(PROFILE, inv, CATALOG, request("llama-3.1-8b", SLO))
    feasible = [c for c in plan.candidates if c.verdict in ("chosen", "feasible")]
    assert plan.chosen.verdict == "chosen"
    assert plan.chosen.cost_usd_per_hour == min(c.cost_usd_per_hour for c in feasible)
    assert plan.replicas == plan.chosen.replicas and plan.replicas >= 1
    free = {g.id for _, g in inv.devices() if g.allocated == 0}
    for p in plan.placements:
        assert p.fit_score >= plan.fit_threshold
        if plan.chosen.kind != "shared":
            assert set(p.gpu_ids) <= free
    pred = plan.chosen.prediction
    assert pred is not None and pred.tpot.p99 <= SLO.tpot_p99_s and pred.ttft.p99 <= SLO.ttft_p99_s


def test_tp_group_prefers_nvlink_then_one_numa_node() -> None:
    inv = load_inventory("h100-nvlink")
    node = inv.nodes[0]
    chosen = best_gpu_set(list(node.gpus), 4)
    assert chosen is not None and {g.numa_node for g in chosen} == {0}
    pcie_only = [replace(g, nvlink_island="") for g in node.gpus]
    pair = best_gpu_set(pcie_only[1:], 2)  # gpu1 is alone on its switch now; gpu2+gpu3 share one
    assert pair is not None and len({g.pcie_switch for g in pair}) == 1
    quad = best_gpu_set([pcie_only[i] for i in (0, 1, 2, 4, 5)], 4)
    assert quad is not None and len({g.numa_node for g in quad}) == 2  # only cross-NUMA fits


def test_tensor_parallel_plan_keeps_groups_on_one_node_and_nvlink() -> None:
    profile = synthetic_profile("llama-3.1-70b", decode_ms=45, prefill_ms=300)
    plan = plan_placement(
        profile,
        load_inventory("h100-nvlink"),
        CATALOG,
        request("llama-3.1-70b", Slo(tpot_p99_s=0.1, ttft_p99_s=5.0, rate_rps=1.0), kinds=("whole",)),
    )
    assert plan.chosen.tp >= 2
    for p in plan.placements:
        assert len({gid.split("/")[0] for gid in p.gpu_ids}) == 1
        assert p.interconnect == "nvlink" and p.numa_node is not None


def test_replicas_spread_over_distinct_nodes_when_possible() -> None:
    plan = plan_placement(
        PROFILE,
        load_inventory("h100-nvlink"),
        CATALOG,
        request("llama-3.1-8b", replace(SLO, rate_rps=60)),  # more than one H100 holds
    )
    nodes = [p.node for p in plan.placements]
    assert plan.replicas > 1 and len(set(nodes)) == min(len(nodes), 4)


def test_same_input_same_plan() -> None:
    inv = load_inventory("mixed-a100-h100-l4")
    a = plan_placement(PROFILE, inv, CATALOG, request("llama-3.1-8b", SLO))
    b = plan_placement(PROFILE, load_inventory("mixed-a100-h100-l4"), CATALOG, request("llama-3.1-8b", SLO))
    assert a == b and a.plan_id == b.plan_id
    c = plan_placement(PROFILE, inv, CATALOG, request("llama-3.1-8b", replace(SLO, rate_rps=6)))
    assert c.plan_id != a.plan_id


def test_plan_json_round_trips() -> None:
    plan = plan_placement(
        PROFILE, load_inventory("mixed-a100-h100-l4"), CATALOG, request("llama-3.1-8b", SLO)
    )
    data = plan.to_json_dict()
    back = PlacementPlan.from_json_dict(data)
    assert back.to_json_dict() == data  # NaN and ∞ are written as null, so compare the JSON
    assert back.placements == plan.placements and back.plan_id == plan.plan_id


def test_infeasible_request_lists_every_shape_the_closest_miss_and_a_fix() -> None:
    with pytest.raises(NoFeasiblePlacement) as err:
        plan_placement(
            PROFILE,
            load_inventory("h100-nvlink"),
            CATALOG,
            request("llama-3.1-8b", Slo(tpot_p99_s=0.001, ttft_p99_s=2.0, rate_rps=5.0)),
        )
    text = str(err.value)
    assert "closest:" in text and "To fix:" in text and "relax the SLO" in text
    closest = err.value.closest
    assert closest is not None and closest.prediction is not None
    # it names the closest shape and by how much it misses (its worst predicted/target ratio − 1)
    assert f"closest: {closest.label}, which misses it by {closest.miss - 1:.0%}" in text
    assert closest.miss == pytest.approx(closest.prediction.tpot.p99 / 0.001)
    assert len(err.value.rejected) >= 4 and all(c.reason for c in err.value.rejected)


def test_memory_rejects_a_model_that_does_not_fit() -> None:
    profile = synthetic_profile("llama-3.1-70b", decode_ms=45, prefill_ms=300)
    with pytest.raises(NoFeasiblePlacement) as err:
        plan_placement(
            profile,
            load_inventory("mixed-a100-h100-l4"),
            CATALOG,
            request("llama-3.1-70b", SLO, gpus=("L4-24GB",)),
        )
    assert any("GiB" in c.reason for c in err.value.rejected)


def test_weights_that_fit_no_gpu_even_at_the_largest_tp_say_so() -> None:
    """70B in bf16 (131 GiB) on a fleet of L4s whose nodes hold at most 2 free: every shape offered
    rejects the weights, and the error says so once, with the largest TP tried and what to do."""
    with pytest.raises(NoFeasiblePlacement) as err:
        plan_placement(
            None,
            load_inventory("mixed-a100-h100-l4"),
            CATALOG,
            request("llama-3.1-70b", SLO, gpus=("L4-24GB",)),
        )
    text = str(err.value)
    assert "The weights of llama-3.1-70b (131 GiB in bf16) fit no GPU shape of this fleet" in text
    assert "even at its largest tensor-parallel degree (TP=2)" in text
    assert "use GPUs with more memory" in text
    assert "closest:" not in text  # no shape was predicted, so no latency is offered as the closest


def test_weights_that_fit_some_shape_are_not_said_to_fit_nowhere() -> None:
    with pytest.raises(NoFeasiblePlacement) as err:
        plan_placement(
            None,
            load_inventory("h100-nvlink"),
            CATALOG,
            request("llama-3.1-70b", Slo(tpot_p99_s=0.001, ttft_p99_s=2.0, rate_rps=5.0)),
        )
    assert "fit no GPU shape" not in str(err.value)


def test_profile_of_another_model_is_an_input_error() -> None:
    with pytest.raises(InvalidInput) as err:
        plan_placement(PROFILE, load_inventory("h100-nvlink"), CATALOG, request("mistral-7b", SLO))
    # the profile's model is named (not "the architecture given", which the profile's model is too)
    assert err.value.field == "model" and "the profile is of model 'llama-3.1-8b'" in str(err.value)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"tpot_p99_s": 0}, "tpot_p99_s"),
        ({"ttft_p99_s": -1}, "ttft_p99_s"),
        ({"rate_rps": 0}, "rate_rps"),
        ({"rate_rps": math.nan}, "rate_rps"),
    ],
)
def test_bad_slo_names_the_field(kwargs: dict[str, float], field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        Slo(**({"tpot_p99_s": 0.05, "ttft_p99_s": 2.0, "rate_rps": 5.0} | kwargs))
    assert err.value.field == field


def test_bad_fit_threshold() -> None:
    with pytest.raises(InvalidInput, match="fit_threshold"):
        PlanRequest("m", SLO, fit_threshold=1.5)


def test_fit_score_terms() -> None:
    unchanged = 0.15 * 0.98  # the fragmentation term when the placement leaves fragmentation as it was
    assert fit_score(0.5, 0.5, "nvlink", 0.0, 1) == pytest.approx(0.85 + unchanged)
    assert fit_score(0.5, 0.5, "cross-numa", 0.0, 1) == pytest.approx(0.85 + unchanged - 0.25 * 0.5)
    assert fit_score(1.0, 0.5, "nvlink", 0.0, 1) == pytest.approx(0.45 + unchanged)
    assert fit_score(0.5, 0.5, "nvlink", 0.5, 1) == pytest.approx(0.85 + 0.15 * 0.5)
    assert fit_score(0.5, 0.5, "nvlink", 2.0, 1) == pytest.approx(0.85 + 0.15 * 0.02 / math.e)
    assert 0 <= fit_score(math.inf, math.inf, "cross-numa", 9, 1) <= 1


def test_fit_score_keeps_the_order_of_fragmentation_changes() -> None:
    # A clamp at 1 scored every decrease alike; a larger decrease must score higher, a larger increase lower.
    deltas = [-2.0, -1.0, -0.25, 0.0, 0.25, 1.0, 2.0]
    scores = [fit_score(0.5, 0.5, "nvlink", d, 2) for d in deltas]
    assert all(a > b for a, b in itertools.pairwise(scores))


def test_high_threshold_rejects_cross_numa_placements() -> None:
    # Only a cross-NUMA pair is free (70B needs TP≥2); with the threshold above its fit, it is rejected.
    node = load_inventory("h100-nvlink").nodes[0]
    gpus = tuple(replace(g, nvlink_island="", allocated=0.0 if g.index in (0, 4) else 1.0) for g in node.gpus)
    inv = Inventory((replace(node, gpus=gpus),), source="t")
    profile = synthetic_profile("llama-3.1-70b", decode_ms=45, prefill_ms=300)
    req = request(
        "llama-3.1-70b",
        Slo(tpot_p99_s=0.5, ttft_p99_s=20.0, rate_rps=0.2),
        kinds=("whole",),
        fit_threshold=0.5,
    )
    assert plan_placement(profile, inv, CATALOG, req).placements[0].interconnect == "cross-numa"
    with pytest.raises(NoFeasiblePlacement) as err:
        plan_placement(profile, inv, CATALOG, replace(req, fit_threshold=0.9))
    assert "fit score" in str(err.value) and "lower --fit-threshold" in str(err.value)


# --- properties ---------------------------------------------------------------------------------

GPU_MODELS = ("H100-SXM5-80GB", "A100-SXM4-80GB", "L4-24GB")


@st.composite
def fleets(draw: st.DrawFn, max_nodes: int = 4) -> Inventory:
    nodes = []
    for i in range(draw(st.integers(1, max_nodes))):
        model = draw(st.sampled_from(GPU_MODELS))
        count = draw(st.sampled_from((1, 2, 4, 8)))
        numa = draw(st.sampled_from((1, 2))) if count > 1 else 1
        nvlink = model != "L4-24GB" and draw(st.booleans())
        sharing = draw(st.sampled_from((1, 1, 2))) if model == "L4-24GB" else 1
        mig = model == "A100-SXM4-80GB" and draw(st.booleans())
        name = f"n{i}"
        gpus: list[GpuDevice] = []
        for k in range(count):
            numa_node = k * numa // count
            if mig and k == count - 1:
                for j, prof in enumerate(("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb")):
                    gpus.append(
                        GpuDevice(
                            f"{name}/gpu{k}/{prof}-{j}",
                            k,
                            model,
                            memory_gib=40.0,
                            numa_node=numa_node,
                            mig_profile=prof,
                            allocated=float(draw(st.booleans())),
                        )
                    )
                continue
            alloc = (
                draw(st.sampled_from((0.0, 0.0, 0.5, 1.0)))
                if sharing > 1
                else draw(st.sampled_from((0.0, 0.0, 1.0)))
            )
            gpus.append(
                GpuDevice(
                    f"{name}/gpu{k}",
                    k,
                    model,
                    memory_gib=CATALOG.get(model).memory_gib,
                    numa_node=numa_node,
                    pcie_switch=f"sw{k // 2}",
                    nvlink_island="nv" if nvlink else "",
                    allocated=alloc,
                )
            )
        nodes.append(
            Node(
                name,
                tuple(gpus),
                numa_nodes=numa,
                cpu_cores=64,
                mig_strategy="mixed" if mig else "none",
                gpu_sharing=sharing,
            )
        )
    return Inventory(tuple(nodes), source="hypothesis")


SLOS = st.builds(
    Slo,
    tpot_p99_s=st.sampled_from((0.02, 0.05, 0.2)),
    ttft_p99_s=st.sampled_from((0.5, 2.0)),
    rate_rps=st.sampled_from((1.0, 5.0, 30.0)),
)


def _plan_or_none(inv: Inventory, slo: Slo) -> PlacementPlan | None:
    try:
        return plan_placement(PROFILE, inv, CATALOG, request("llama-3.1-8b", slo))
    except NoFeasiblePlacement:
        return None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fleets(), SLOS)
def test_no_gpu_or_slice_is_over_allocated_and_tp_stays_on_one_node(inv: Inventory, slo: Slo) -> None:
    plan = _plan_or_none(inv, slo)
    if plan is None:
        return
    devices = {g.id: (n, g) for n, g in inv.devices()}
    taken: dict[str, float] = {}
    for p in plan.placements:
        assert len(p.gpu_ids) == plan.chosen.gpus_per_replica
        for gid in p.gpu_ids:
            node, g = devices[gid]
            assert node.name == p.node and g.gpu == plan.chosen.gpu
            taken[gid] = taken.get(gid, 0.0) + (plan.chosen.share if plan.chosen.kind == "shared" else 1.0)
            assert (
                (g.mig_profile == plan.chosen.mig_profile) if plan.chosen.kind == "mig" else not g.mig_profile
            )
    for gid, share in taken.items():
        assert devices[gid][1].allocated + share <= 1.0 + 1e-9


@settings(max_examples=25, deadline=None)
@given(fleets(), SLOS)
def test_same_input_same_plan_property(inv: Inventory, slo: Slo) -> None:
    assert _plan_or_none(inv, slo) == _plan_or_none(inv, slo)


def _brute_force_cost(inv: Inventory, slo: Slo) -> float | None:
    """Cheapest cost over every shape × every replica count (a linear scan, no search from the capacity
    bound, no ordering shortcut), counting a shape only if its replicas can actually be placed above the
    fit threshold."""
    req = request("llama-3.1-8b", slo)
    m = ServingModels(PROFILE.model, req, TABLE, PROFILE)
    usable = usable_nodes(inv, req.tolerated_taints)
    shapes, _ = enumerate_shapes(usable, CATALOG, req, PROFILE.model)
    frag = FragmentationModel(req.task_mix)
    best = None
    for shape in shapes:
        if isinstance(m.engine(shape), Unservable):
            continue
        for r in range(1, min(shape.units, req.max_replicas) + 1):
            if not m.judge(shape, m.replica(shape).at_rate(slo.bound("rate_rps") / r))[0]:
                continue
            cand = replace(
                m.evaluate(replace(shape, units=r)),
                replicas=r,
                cost_usd_per_hour=shape.price(req.prices_usd_per_hour) * r,
            )
            placements, _ = _place(cand, shape, FleetState.of(inv.nodes, frag), usable, m, req)
            if placements:
                best = cand.cost_usd_per_hour if best is None else min(best, cand.cost_usd_per_hour)
            break
    return best


@settings(max_examples=40, deadline=None)
@given(fleets(max_nodes=4), SLOS)
def test_planner_cost_equals_brute_force_on_small_fleets(inv: Inventory, slo: Slo) -> None:
    plan = _plan_or_none(inv, slo)
    brute = _brute_force_cost(inv, slo)
    if plan is None:
        assert brute is None
        return
    reasons = [(c.label, c.cost_usd_per_hour, c.reason) for c in plan.candidates]
    assert brute is not None and plan.chosen.cost_usd_per_hour == pytest.approx(brute), reasons


def test_fleet_file_with_time_slicing_offers_shared_shape() -> None:
    inv = parse_fleet(
        {"nodes": [{"name": "a", "time_slicing": 4, "gpus": [{"product": "H100-SXM5-80GB", "count": 1}]}]},
        "t",
        CATALOG,
    )
    plan = plan_placement(
        PROFILE, inv, CATALOG, request("llama-3.1-8b", Slo(tpot_p99_s=0.5, ttft_p99_s=20.0, rate_rps=0.1))
    )
    assert plan.chosen.kind == "shared" and plan.chosen.share == 0.25


def _h100_node(name: str, free: int, *, cpu_cores: int = 64, cpu_allocated: float = 0.0) -> Node:
    gpus = tuple(
        GpuDevice(f"{name}/gpu{i}", i, "H100-SXM5-80GB", memory_gib=80.0, allocated=0.0 if i < free else 1.0)
        for i in range(8)
    )
    return Node(name, gpus, cpu_cores=cpu_cores, cpu_allocated=cpu_allocated)


def test_fragmentation_moves_the_replica_and_the_plan_says_where_and_why() -> None:
    # "a-empty" comes first by name, so without the fragmentation criterion the replica lands there and
    # takes one GPU of the only node an 8-GPU task could use; FGD puts it on the busy node instead.
    inv = Inventory((_h100_node("a-empty", 8), _h100_node("b-busy", 2)), source="t")
    mix = (TaskClass(8, 1000, weight=0.5), TaskClass(1, 1000, weight=0.5))
    req = request("llama-3.1-8b", SLO, kinds=("whole",), task_mix=mix, task_mix_source="given")
    plan = plan_placement(PROFILE, inv, CATALOG, req)
    effect = plan.fragmentation_workload["effect"]
    assert [p.node for p in plan.placements] == ["b-busy"]
    assert [r["node"] for r in effect["with_fragmentation"]] == ["b-busy"]
    assert [r["node"] for r in effect["without_fragmentation"]] == ["a-empty"]
    # Left usable for the workload: the 8-GPU node stays whole only with FGD.
    assert effect["usable_gpus_after_with"] > effect["usable_gpus_after_without"] + 3
    assert plan.fragmentation_workload["source"] == "given"
    assert [c["num_gpu"] for c in plan.fragmentation_workload["classes"]] == [8, 1]
    assert (
        PlacementPlan.from_json_dict(plan.to_json_dict()).fragmentation_workload
        == plan.fragmentation_workload
    )


def test_fragmentation_counts_cpu_gpu_type_and_gpus_missing_from_the_catalog() -> None:
    task = (TaskClass(1, 1000, cpu_milli=8000, weight=1.0),)
    frag = FragmentationModel(task)
    starved = _h100_node("starved", 2, cpu_cores=16, cpu_allocated=12.0)  # 4 cores left < 8 asked
    fed = _h100_node("fed", 2, cpu_cores=16)
    assert FleetState.of((starved,), frag).fleet_fragmentation() == pytest.approx(2.0)
    assert FleetState.of((fed,), frag).fleet_fragmentation() == pytest.approx(0.0)
    typed = FragmentationModel((TaskClass(1, 1000, gpu_types=frozenset({"T4"}), weight=1.0),))
    assert FleetState.of((fed,), typed).fleet_fragmentation() == pytest.approx(2.0)
    # A GPU the catalog does not know (the trace's G2) is capacity: its free share is counted.
    unknown = Node("g2", tuple(GpuDevice(f"g2/gpu{i}", i, "", product="G2") for i in range(8)))
    state = FleetState.of((unknown,), FragmentationModel((TaskClass(1, 1000, weight=1.0),)))
    assert state.usable_gpus() == pytest.approx(8.0)


def test_planner_and_manifests_import_nothing_heavy() -> None:
    import subprocess
    import sys

    code = (
        "import sys, gpuplace.planner, gpuplace.manifests, gpuplace.fgd.replay, gpuplace.inventory;"
        "print(sorted(m for m in ('torch', 'kubernetes', 'mlflow', 'kfp', 'pandas') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
