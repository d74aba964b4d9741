"""The comparison's metrics, normalisation, weighted score, sensitivity and ROI on hand-computed cases."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from gpuplace.catalog import load_gpu_catalog
from gpuplace.compare import IncomparablePaths, compare_paths, parse_assessed, parse_weights
from gpuplace.compare.metrics import (
    HeldGpus,
    PathResult,
    fleet_after,
    gpu_hours_per_1k_requests,
    held_gpus,
    monthly_cost_usd,
    path_metrics,
    provisioning_s,
    sla_breach_cost_usd_per_month,
    sla_breaches_per_month,
)
from gpuplace.compare.roi import roi
from gpuplace.compare.score import CRITERIA, flip_points, normalise, score
from gpuplace.errors import InvalidInput, UnknownName
from gpuplace.inventory import load_inventory
from gpuplace.types import DeploymentRecord, PodRecord
from gpuplace.types.compare import Comparison, PathMetrics
from gpuplace.types.plan import PlacementPlan, Slo
from tests.support.plans import predicted, sample_plan
from tests.support.reports import hand_metrics
from tests.support.reports import latency_report as _report

SPEC = sample_plan().serving


def _deployment(
    serving: list[float],
    gpus: list[str] | None = None,
    target: str = "kubernetes",
    *,
    served_on: str = "",
    node: str = "n",
    node_level: int = 0,
) -> DeploymentRecord:
    """Pods created at 0, 1, ... and ready to serve at ``serving``; DRA devices ``gpus``, or ``node_level``
    device-plugin GPUs each."""
    pods = tuple(
        PodRecord(
            f"p{i}",
            node=node,
            created_at_s=float(i),
            serving_at_s=r,
            gpu_ids=(gpus[i],) if gpus else (),
            gpu_count=1 if gpus else node_level,
            gpu_resource="nvidia.com/gpu" if gpus or node_level else "",
            placement_level="device" if gpus else ("node" if node_level else "none"),
        )
        for i, r in enumerate(serving)
    )
    return DeploymentRecord(target, "d", "ns", "http://x", "m", True, pods, serving=SPEC, served_on=served_on)


_metrics = hand_metrics


def path_metrics_of(result: PathResult, plan: PlacementPlan | None) -> PathMetrics:
    return path_metrics(
        result, plan=plan, fleet=None, catalog=None, fragmentation=None, penalty_usd_per_breach=1.0
    )


# --- per-path metrics ---------------------------------------------------------------------------


def test_provisioning_is_first_created_to_last_ready_to_serve() -> None:
    # pods created at 0 and 1, first request answered at 10 and 15 → 15 s; a pod never seen serving → NaN
    assert provisioning_s(_deployment([10.0, 15.0])) == 15.0
    assert math.isnan(provisioning_s(_deployment([10.0, math.nan])))
    assert math.isnan(provisioning_s(_deployment([])))


def test_gpu_hours_per_1k_requests() -> None:
    assert gpu_hours_per_1k_requests(2, 1800.0, 500) == pytest.approx(2.0)  # 2 × 0.5 h / 500 × 1000
    assert math.isinf(gpu_hours_per_1k_requests(2, 1800.0, 0))


def test_sla_breaches_and_their_cost() -> None:
    breaches = sla_breaches_per_month(0.99, 1.0)  # 1 % of 1 req/s × 3600 × 730
    assert breaches == pytest.approx(26_280.0)
    assert sla_breach_cost_usd_per_month(breaches, 0.5) == pytest.approx(13_140.0)


def test_prediction_error_and_predictability() -> None:
    rep = _report([0.2] * 10, [0.03] * 10)
    # TTFT p99 0.2 vs 0.1 predicted: +100 %; TPOT 0.03 vs 0.04: −25 % → mean |error| 0.625
    plan = replace(
        sample_plan(), chosen=replace(sample_plan().chosen, prediction=predicted((0.1, 0.1), (0.04, 0.04)))
    )
    m = path_metrics_of(PathResult("native", _deployment([5.0], served_on=plan.chosen.unit), rep), plan=plan)
    assert m.prediction_error == pytest.approx(0.625)  # p50s are not part of this figure
    assert m.latency.error("ttft", 99) == pytest.approx(1.0) and m.latency.error("tpot", 99) == pytest.approx(
        -0.25
    )
    assert math.isnan(
        path_metrics_of(PathResult("native", _deployment([5.0]), rep), plan=None).prediction_error
    )
    rep2 = _report([1.0, 1.0, 1.0, 3.0], [0.01] * 4)
    ttft_ratio = rep2.ttft.p50 / rep2.ttft.p99
    m2 = path_metrics_of(PathResult("native", _deployment([5.0]), rep2), plan=None)
    assert m2.latency_predictability == pytest.approx((ttft_ratio + 1.0) / 2)


def test_fleet_after_and_cost_of_held_gpus() -> None:
    fleet = load_inventory("h100-nvlink")
    after = fleet_after(fleet, {"h100-a-0/gpu0": 1.0})
    held = {g.id: g.allocated for _, g in after.devices()}
    assert held["h100-a-0/gpu0"] == 1.0 and held["h100-a-0/gpu1"] == 0.0
    assert {g.id: g.allocated for _, g in fleet.devices()}["h100-a-0/gpu0"] == 0.0  # input untouched
    catalog = load_gpu_catalog()
    price = catalog.get("H100-SXM5-80GB").price_usd_per_hour
    devices = HeldGpus({"h100-a-0/gpu0": 1.0, "h100-a-1/gpu3": 1.0}, {}, "device")
    assert monthly_cost_usd(fleet, devices, catalog) == pytest.approx(2 * price * 730)
    # node level: the node's GPU model × the pods' count; which devices is not needed for the price
    assert monthly_cost_usd(fleet, HeldGpus({}, {"h100-b-0": ("nvidia.com/gpu", 2.0)}, "node"), catalog) == (
        pytest.approx(2 * price * 730)
    )


def test_a_time_sliced_gpu_counts_and_costs_its_share() -> None:
    fleet = load_inventory("mixed-a100-h100-l4")
    shared = next(n for n in fleet.nodes if n.gpu_sharing > 1)
    dep = _deployment([5.0], node=shared.name, node_level=1)
    held = held_gpus(dep, fleet)
    assert held.count == pytest.approx(1 / shared.gpu_sharing)
    catalog = load_gpu_catalog()
    price = catalog.get(shared.gpus[0].gpu).price_usd_per_hour
    assert monthly_cost_usd(fleet, held, catalog) == pytest.approx(price * 730 / shared.gpu_sharing)


def test_node_level_placement_leaves_fragmentation_unknown_and_is_never_filled_from_the_plan() -> None:
    fleet = load_inventory("h100-nvlink")
    plan = sample_plan(nodes=("h100-a-0",), gpu="H100-SXM5-80GB")
    result = PathResult("kubeflow", _deployment([5.0], node="h100-a-0", node_level=1), _report([0.1], [0.01]))
    c = compare_paths(
        [result, PathResult("native", _deployment([6.0], ["h100-a-0/gpu0"]), _report([0.1], [0.01]))],
        plan=plan,
        fleet=fleet,
        catalog=load_gpu_catalog(),
        fragmentation=lambda inv: 1.0,
        weights={"fragmentation": 0.5, "tpot_p99": 0.5},
        required_paths=("native", "kubeflow"),
    )
    m = c.path("kubeflow")
    assert math.isnan(m.fragmentation_gpus) and m.placement_level == "node" and m.gpu_ids == ()
    assert m.gpus == 1.0 and not math.isnan(m.cost_usd_per_month)
    assert any("node level only" in n for n in m.notes)
    assert c.path("native").fragmentation_gpus == 1.0 and c.path("native").gpu_ids == ("h100-a-0/gpu0",)
    # unknown for one path: left out of the verdict for both, and said so
    assert "fragmentation" in c.score.excluded and "kubeflow" in c.score.excluded["fragmentation"]
    assert "fragmentation" not in c.score.normalised


def test_prediction_error_only_for_the_device_it_predicts() -> None:
    plan = sample_plan(gpu="H100-SXM5-80GB")
    rep = _report([0.4] * 4, [0.03] * 4)
    on_cpu = compare_paths(
        [
            PathResult("native", _deployment([5.0], served_on="cpu"), rep),
            PathResult("kubeflow", _deployment([5.0], served_on="H100-SXM5-80GB"), rep),
        ],
        plan=plan,
        weights={"tpot_p99": 1.0},
    )
    native, kubeflow = on_cpu.path("native"), on_cpu.path("kubeflow")
    assert math.isnan(native.prediction_error) and math.isnan(native.latency.error("ttft", 99))
    assert not native.latency.applies and kubeflow.latency.applies
    assert (
        native.latency.ttft.predicted.p99 == pytest.approx(0.4) and native.prediction_for == "H100-SXM5-80GB"
    )
    assert math.isnan(native.figures()["ttft_p99_error"]) and native.figures()["predicted_ttft_p99_s"] == 0.4
    assert any("served on cpu" in n for n in native.notes)
    assert kubeflow.latency.error("ttft", 99) == pytest.approx(0.0)
    assert kubeflow.latency.error("tpot", 99) == pytest.approx(0.0)


def test_different_serving_specs_refuse_a_verdict() -> None:
    from dataclasses import replace

    rep = _report([0.1], [0.01])
    other = replace(_deployment([5.0]), serving=replace(SPEC, image="other:1", replicas=2))
    with pytest.raises(IncomparablePaths) as refused:
        compare_paths([PathResult("native", _deployment([5.0]), rep), PathResult("kubeflow", other, rep)])
    text = str(refused.value)
    assert "image: 'vllm/vllm-openai:v0.34.0' ≠ 'other:1'" in text and "replicas: 1 ≠ 2" in text
    assert refused.value.exit_status == 1
    unsaid = replace(_deployment([5.0]), serving=None)
    with pytest.raises(IncomparablePaths, match="record of the kubeflow path does not say"):
        compare_paths([PathResult("native", _deployment([5.0]), rep), PathResult("kubeflow", unsaid, rep)])


def test_path_metrics_use_the_injected_fragmentation_and_note_the_local_target() -> None:
    fleet = load_inventory("h100-nvlink")
    seen: list[int] = []

    def frag(inv):  # type: ignore[no-untyped-def]
        taken = sum(1 for _, g in inv.devices() if g.allocated)
        seen.append(taken)
        return 0.5 * taken

    results = [
        PathResult("native", _deployment([5.0], ["h100-a-0/gpu0"]), _report([0.1] * 4, [0.01] * 4)),
        PathResult(
            "kubeflow", _deployment([9.0], ["h100-a-0/gpu1"], target="local"), _report([0.1] * 4, [0.01] * 4)
        ),
    ]
    c = compare_paths(
        results, fleet=fleet, catalog=load_gpu_catalog(), fragmentation=frag, weights={"provisioning": 1.0}
    )
    assert seen == [1, 1]
    assert c.path("native").fragmentation_gpus == 0.5
    assert c.path("native").fragmentation_ratio == pytest.approx(0.5 / 32)
    assert any("local target" in n for n in c.path("kubeflow").notes)
    assert c.score.winner == "native"


# --- normalisation and score --------------------------------------------------------------------


def test_normalisation_rules() -> None:
    assert normalise(CRITERIA["tpot_p99"], {"a": 2.0, "b": 4.0}) == {"a": 1.0, "b": 0.5}
    assert normalise(CRITERIA["goodput"], {"a": 3.0, "b": 6.0}) == {"a": 0.5, "b": 1.0}
    assert normalise(CRITERIA["sla_breach_cost"], {"a": 0.0, "b": 5.0}) == {"a": 1.0, "b": 0.0}
    assert normalise(CRITERIA["cost"], {"a": 7.0, "b": 7.0}) == {"a": 1.0, "b": 1.0}
    assert normalise(CRITERIA["gpu_hours_per_1k"], {"a": 1.0, "b": math.inf}) == {"a": 1.0, "b": 0.0}
    assert normalise(CRITERIA["slo_attainment"], {"a": 0.9, "b": 0.5}) == {"a": 0.9, "b": 0.5}
    assert normalise(CRITERIA["prediction_error"], {"a": 0.25, "b": 1.5}) == {"a": 0.75, "b": 0.0}


def test_weighted_score_winner_margin_and_flip_point() -> None:
    # a: tpot 1.0 (score 1), provisioning 20 s (score 0.5); b: tpot 1.25 (0.8), provisioning 10 s (1)
    a = _metrics("a", tpot_p99_s=1.0, provisioning_s=20.0)
    b = _metrics("b", tpot_p99_s=1.25, provisioning_s=10.0)
    card = score([a, b], {"tpot_p99": 0.7, "provisioning": 0.3})
    assert card.totals["a"] == pytest.approx(0.85)  # 0.7 × 1 + 0.3 × 0.5
    assert card.totals["b"] == pytest.approx(0.86)  # 0.7 × 0.8 + 0.3 × 1
    assert (card.winner, card.runner_up) == ("b", "a")
    assert card.margin == pytest.approx(0.01)
    assert card.relative_margin == pytest.approx(0.01 / 0.85)
    flip = {f.criterion: f for f in card.flips}
    # b − a at tpot weight t: 0.8t + (1 − t) − t − 0.5(1 − t) = 0.5 − 0.7t → 0 at t = 5/7
    assert flip["tpot_p99"].to_weight == pytest.approx(5 / 7)
    assert flip["tpot_p99"].new_winner == "a"
    # provisioning weight p: a = (1 − p) + 0.5p, b = 0.8(1 − p) + p → b − a = 0.7p − 0.2 → 0 at p = 2/7
    assert flip["provisioning"].to_weight == pytest.approx(2 / 7)
    assert flip["provisioning"].new_winner == "a"


def test_tie_has_no_winner_and_no_flips() -> None:
    a = _metrics("a", tpot_p99_s=1.0)
    b = _metrics("b", tpot_p99_s=1.0)
    card = score([a, b], {"tpot_p99": 1.0})
    assert card.winner == "" and card.margin == 0.0 and card.flips == ()


def test_a_tie_at_the_end_of_the_range_is_not_a_flip() -> None:
    # equal cost: putting all weight on cost only ties, which must not be reported as a flip
    a = _metrics("a", tpot_p99_s=1.0, cost_usd_per_month=5.0)
    b = _metrics("b", tpot_p99_s=2.0, cost_usd_per_month=5.0)
    card = score([a, b], {"tpot_p99": 0.5, "cost": 0.5})
    assert not {f.criterion: f for f in card.flips}["cost"].flips


def test_flip_points_function_directly() -> None:
    normalised = {"x": {"a": 1.0, "b": 0.0}, "y": {"a": 0.0, "b": 1.0}}
    (fx, fy) = flip_points({"x": 0.6, "y": 0.4}, normalised, "a")
    assert fx.to_weight == pytest.approx(0.5) and fy.to_weight == pytest.approx(0.5)


def test_a_weighted_figure_unknown_for_a_path_is_left_out_for_every_path() -> None:
    a = _metrics("native", tpot_p99_s=1.0, cost_usd_per_month=math.nan)
    b = _metrics("kubeflow", tpot_p99_s=2.0, cost_usd_per_month=3.0)
    card = score([a, b], {"tpot_p99": 0.5, "cost": 0.5})
    assert card.excluded == {"cost": "cost_usd_per_month unknown for native"}
    assert card.totals == {"native": pytest.approx(0.5), "kubeflow": pytest.approx(0.25)}
    assert card.winner == "native"
    with pytest.raises(InvalidInput, match="every weighted criterion is unknown"):
        score([a, b], {"cost": 1.0})


# --- parameters ----------------------------------------------------------------------------------


def test_parse_weights_accepts_a_valid_set() -> None:
    assert parse_weights("tpot_p99=0.7, cost=0.3") == {"tpot_p99": 0.7, "cost": 0.3}
    assert sum(parse_weights("").values()) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tpot_p99=0.7,cost=0.4", "sum to 1.1, not 1"),
        ("tpot_p99=1.2,cost=-0.2", "cost=-0.2 is negative"),
        ("tpot_p99=x", "is not a number"),
        ("tpot_p99", "is not NAME=WEIGHT"),
        ("tpot_p99=0.5,tpot_p99=0.5", "appears twice"),
    ],
)
def test_parse_weights_rejects_bad_input(text: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message) as e:
        parse_weights(text)
    assert str(e.value).startswith("weights=")


def test_unknown_criterion_offers_did_you_mean() -> None:
    with pytest.raises(UnknownName, match="Did you mean 'tpot_p99'"):
        parse_weights("tpot_p9=1")


def test_assessed_criteria_enter_the_score() -> None:
    assessed = parse_assessed(["reuse=native:0.4,kubeflow:0.9"], ["native", "kubeflow"])
    weights = parse_weights("tpot_p99=0.7,reuse=0.3", assessed)
    a = _metrics("native", tpot_p99_s=1.0)
    b = _metrics("kubeflow", tpot_p99_s=1.0)
    card = score([a, b], weights, assessed)
    assert card.totals["kubeflow"] == pytest.approx(0.7 + 0.27)
    assert card.winner == "kubeflow"
    with pytest.raises(InvalidInput, match="no score for kubeflow"):
        parse_assessed(["reuse=native:0.4"], ["native", "kubeflow"])
    with pytest.raises(InvalidInput, match="not a score in"):
        parse_assessed(["reuse=native:1.4,kubeflow:0"], ["native", "kubeflow"])


def test_missing_path_results_are_an_error() -> None:
    only = [PathResult("native", _deployment([5.0]), _report([0.1], [0.01]))]
    with pytest.raises(InvalidInput, match="no results for the kubeflow path"):
        compare_paths(only)


# --- ROI -----------------------------------------------------------------------------------------


def test_roi_of_the_seed_example_is_8x() -> None:
    a, b = _metrics("kubeflow"), _metrics("native")
    r = roi(a, b, engineering_weeks=3, rate_usd_per_week=5000, saved_usd_per_quarter=120_000)
    assert r.build_cost_usd == 15_000
    assert r.multiple == pytest.approx(8.0)
    assert r.payback_weeks == pytest.approx(15_000 / (120_000 / 13))


def test_roi_saving_defaults_to_the_breach_cost_difference() -> None:
    a = _metrics("kubeflow", sla_breach_cost_usd_per_month=10_000.0)
    b = _metrics("native", sla_breach_cost_usd_per_month=50_000.0)
    r = roi(a, b, engineering_weeks=2, rate_usd_per_week=7500)
    assert r.saved_usd_per_quarter == pytest.approx(120_000.0)  # 40k/month × 3
    assert r.multiple == pytest.approx(8.0)
    with pytest.raises(InvalidInput, match="engineering_weeks=-1"):
        roi(a, b, engineering_weeks=-1, rate_usd_per_week=1)


# --- the whole comparison ------------------------------------------------------------------------


def test_comparison_json_round_trips_with_the_plan() -> None:
    plan = sample_plan(plan_id="p1", nodes=("n",), gpus=2)
    results = [
        PathResult("native", _deployment([5.0]), _report([0.1] * 4, [0.01] * 4, attainment=0.9)),
        PathResult("kubeflow", _deployment([8.0]), _report([0.2] * 4, [0.02] * 4, attainment=0.99)),
    ]
    c = compare_paths(
        results, plan=plan, penalty_usd_per_breach=1.0, engineering_weeks=1, rate_usd_per_week=1000
    )
    data = json.loads(json.dumps(c.to_json_dict(), allow_nan=False))
    back = Comparison.from_json_dict(data)
    assert back.score.winner == c.score.winner
    assert back.path("native").sla_breach_cost_usd_per_month == pytest.approx(
        c.path("native").sla_breach_cost_usd_per_month
    )
    assert back.roi is not None and back.roi.multiple == pytest.approx(c.roi.multiple)  # type: ignore[union-attr]
    assert back.plan == plan and back.plan.gpu_count == 2
    # the SLO is the one Slo type, not a mapping of names to NaN: what the reports judged, round-tripped
    assert isinstance(c.slo, Slo) and c.slo == Slo(ttft_p99_s=1.0, tpot_p99_s=0.1, rate_rps=1.0)
    assert back.slo == c.slo


def test_comparison_slo_keeps_an_unset_bound_unset() -> None:
    """A report judged by p99 TPOT only: the comparison's SLO has no TTFT bound (None, never NaN), and
    comparison.json writes it as null."""
    tpot_only = replace(_report([0.1] * 4, [0.01] * 4), slo=Slo(tpot_p99_s=0.05))
    results = [
        PathResult("native", _deployment([5.0]), tpot_only),
        PathResult("kubeflow", _deployment([8.0]), tpot_only),
    ]
    c = compare_paths(results, plan=None, penalty_usd_per_breach=1.0)
    assert c.slo.ttft_p99_s is None and c.slo.tpot_p99_s == 0.05
    data = json.loads(json.dumps(c.to_json_dict(), allow_nan=False))
    assert data["slo"] == {"ttft_p99_s": None, "tpot_p99_s": 0.05, "rate_rps": None}
    assert Comparison.from_json_dict(data).slo == c.slo
