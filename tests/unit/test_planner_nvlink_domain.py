"""The planner across a multi-node NVLink domain (GB200 NVL72 racks, GFD's ``nvidia.com/gpu.clique``): a
tensor-parallel group larger than any node of a clique spans that clique's nodes, whole nodes first, and
never two cliques; without a clique label a group never spans nodes. No GPU, no cluster: the planner is
pure, priced on the GPU-class defaults.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuplace.catalog import load_gpu_catalog, model_arch_from_config, resolve_model
from gpuplace.catalog.efficiency import load_efficiency_table
from gpuplace.inventory import load_inventory, parse_fleet
from gpuplace.labels import NVLINK_CLIQUE
from gpuplace.planner import NoFeasiblePlacement, PlanRequest, plan_placement
from gpuplace.planner.fragmentation import DEFAULT_LLM_MIX, FragmentationModel
from gpuplace.planner.placement import FleetState, choose, choose_across, spanning_cliques
from gpuplace.types import Inventory
from gpuplace.types.plan import PlacementPlan, Slo

CATALOG = load_gpu_catalog()
TABLE = load_efficiency_table()
GB200 = "GB200-NVL72-186GB"
MODEL = "llama-3.1-70b"
# TP 4 of llama-3.1-70b on GB200 is predicted at ~11.1 ms p99 TPOT, TP 8 at ~8.7 ms: only TP 8 meets 10.5 ms.
TIGHT = Slo(tpot_p99_s=0.0105, ttft_p99_s=1.0, rate_rps=2.0)


def _plan(inventory: Inventory, slo: Slo = TIGHT) -> PlacementPlan:
    req = PlanRequest(MODEL, slo, simulated_requests=400, kinds=("whole",))
    arch = model_arch_from_config(MODEL, resolve_model(MODEL).config)
    return plan_placement(arch, inventory, CATALOG, req, efficiency=TABLE)


def _trays(cliques: dict[str, list[int]], *, label: bool = True) -> Inventory:
    """4-GPU GB200 trays: clique → the allocated GPUs of each of its trays (4 = a busy tray)."""
    nodes: list[dict[str, Any]] = []
    for clique, busy in cliques.items():
        for t, taken in enumerate(busy):
            gpus = [{"product": "NVIDIA-GB200", "count": 4, "nvlink_island": "nvl72"}]
            gpus[0]["allocated"] = [1.0 if i < taken else 0.0 for i in range(4)]
            node: dict[str, Any] = {"name": f"{clique}-tray{t}", "gpus": gpus}
            if label:
                node["labels"] = {NVLINK_CLIQUE: f"cluster.{clique}"}
            nodes.append(node)
    return parse_fleet({"nodes": nodes}, "trays", CATALOG)


def test_the_planner_puts_tp8_on_two_trays_of_one_nvl72_rack() -> None:
    inv = load_inventory("gb200-nvl72")
    plan = _plan(inv)
    assert (plan.chosen.gpu, plan.chosen.tp, plan.replicas) == (GB200, 8, 1)
    (p,) = plan.placements
    assert p.nodes == ("gb200-a-0", "gb200-a-1") and p.node == "gb200-a-0"
    assert p.gpu_ids == tuple(f"gb200-a-{n}/gpu{i}" for n in range(2) for i in range(4))
    assert p.interconnect == "nvlink" and p.numa_node is None
    assert plan.nodes == ("gb200-a-0", "gb200-a-1")
    cliques = {dict(inv.node(n).labels)[NVLINK_CLIQUE] for n in p.nodes}
    assert len(cliques) == 1
    # a group that fits one tray stays on one tray: TP 4 is one node, TP 8 never is
    assert _plan(inv, Slo(tpot_p99_s=0.012, ttft_p99_s=1.0, rate_rps=2.0)).placements[0].nodes == (
        "gb200-a-0",
    )


def test_a_group_never_spans_two_cliques_and_the_rejection_says_so() -> None:
    # each rack has one free tray left: 8 free GPUs in all, but 4 in each NVLink domain
    inv = _trays({"rack-a": [4, 0], "rack-b": [0, 4]})
    with pytest.raises(NoFeasiblePlacement) as err:
        _plan(inv)
    (tp8,) = [c for c in err.value.rejected if c.tp == 8]
    assert "no node has 8 free GB200-NVL72-186GB, and no NVLink domain (nvidia.com/gpu.clique)" in tp8.reason
    assert "cluster.rack-a: 4, cluster.rack-b: 4" in tp8.reason
    assert "never spans two domains" in tp8.reason
    # the same trays in one rack: the group spans them
    plan = _plan(_trays({"rack-a": [4, 0, 0]}))
    assert plan.placements[0].nodes == ("rack-a-tray1", "rack-a-tray2")


def test_without_a_clique_label_a_group_never_spans_nodes() -> None:
    inv = _trays({"rack-a": [0, 0]}, label=False)
    assert spanning_cliques(inv.nodes, GB200, 8) == {}
    with pytest.raises(NoFeasiblePlacement) as err:
        _plan(inv)
    (tp8,) = [c for c in err.value.rejected if c.tp == 8]
    assert tp8.reason == "no node has 8 free GB200-NVL72-186GB"


def test_whole_trays_first_then_the_fewest_nodes_that_split_the_group_evenly() -> None:
    frag = FragmentationModel(DEFAULT_LLM_MIX)
    # tray0 is half taken: two whole free trays are preferred over splitting 2+2+2+2
    inv = _trays({"rack-a": [2, 0, 0]})
    got = choose_across(FleetState.of(inv.nodes, frag), inv.nodes, gpu=GB200, tp=8)
    assert got is not None and [n.name for n in got.all_nodes] == ["rack-a-tray1", "rack-a-tray2"]
    # no two whole trays free: four trays give two GPUs each (8 = 4 × 2)
    inv = _trays({"rack-a": [2, 2, 2, 2, 4]})
    got = choose(FleetState.of(inv.nodes, frag), inv.nodes, gpu=GB200, kind="whole", tp=8)
    assert got is not None and len(got.all_nodes) == 4 and len(got.gpus) == 8
    assert all(sum(g.id.startswith(f"{n.name}/") for g in got.gpus) == 2 for n in got.all_nodes)
    # 3 free per tray on 2 trays: 8 does not split 4+4, and 2+2+2+2 needs four trays
    inv = _trays({"rack-a": [1, 1]})
    assert choose(FleetState.of(inv.nodes, frag), inv.nodes, gpu=GB200, kind="whole", tp=8) is None
