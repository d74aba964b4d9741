"""The one predicted-vs-measured type: TTFT and TPOT as Distributions, predicted beside measured, and the
files that hold it (plan.json's prediction, report.json, comparison.json) read back into it; the old shapes
(flat p50/p99 fields, a dict of dicts) do not come back."""

from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from pathlib import Path

import pytest

from gpuplace.loadtest.io import read_prediction, write_outputs
from gpuplace.types import Distribution, PathMetrics, Prediction
from gpuplace.types.engine import ServingPrediction
from gpuplace.types.latency import Checked, PredictedVsMeasured
from gpuplace.types.plan import PlacementPlan
from tests.support.plans import predicted, sample_plan
from tests.support.reports import hand_metrics, latency_report

PERCENTILE_FIELD = re.compile(r"_p\d+(_|$)")


@pytest.mark.parametrize("cls", [PathMetrics, Prediction, ServingPrediction, PredictedVsMeasured, Checked])
def test_no_flat_percentile_fields(cls: type) -> None:
    """A percentile is a Distribution's; a type that spells ``ttft_p99_s`` as a field is the old shape."""
    flat = [f for f in cls.__dataclass_fields__ if PERCENTILE_FIELD.search(f)]
    assert not flat, f"{cls.__name__} has flat percentile fields {flat}: hold a Distribution instead"


def test_the_prediction_is_the_simulations_distributions() -> None:
    sim = ServingPrediction(
        ttft=Distribution.of([0.1, 0.2, 0.3]),
        tpot=Distribution.of([0.01, 0.02]),
        e2e=Distribution.of([1.0]),
        throughput_rps=2.0,
        mean_running=1.0,
        max_running=3,
        peak_kv_blocks=10,
        preemptions=0,
        steps=5,
        simulated_s=1.0,
        stable=True,
    )
    pred = sim.to_prediction(memory_per_gpu_gib=12.0)
    assert pred.ttft == sim.ttft and pred.tpot == sim.tpot and pred.max_batch == 3


def test_errors_apply_only_on_the_device_predicted_and_only_where_the_prediction_is_finite() -> None:
    report = latency_report([0.2] * 4, [0.05] * 4)
    pred = predicted((0.1, math.inf), (0.04, 0.04))
    checked = PredictedVsMeasured.of(pred, report)
    assert checked.errors() == pytest.approx({"ttft_p50_s": 1.0, "tpot_p50_s": 0.25, "tpot_p99_s": 0.25})
    assert checked.mean_abs_p99_error() == pytest.approx(0.25)  # TTFT p99 was predicted infinite
    elsewhere = PredictedVsMeasured.of(pred, report, applies=False)
    assert elsewhere.errors() == {} and elsewhere.rows() == {} and math.isnan(elsewhere.mean_abs_p99_error())
    assert elsewhere.ttft.predicted.p50 == 0.1  # the prediction is still shown, for its own device
    none = PredictedVsMeasured.of(None, report)
    assert not none.applies and none.ttft.measured == report.ttft and math.isnan(none.ttft.predicted.p99)


def test_report_json_keeps_the_rows_and_reads_back_the_whole_prediction(tmp_path: Path) -> None:
    report = latency_report([0.2, 0.3, 0.4], [0.05] * 3)
    checked = PredictedVsMeasured.of(predicted((0.25, 0.35), (0.04, 0.06)), report)
    write_outputs(tmp_path, [], report, checked)
    data = json.loads((tmp_path / "report.json").read_text())
    assert set(data["predicted_vs_measured"]) == {"ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s"}
    assert data["predicted_vs_measured"]["tpot_p99_s"]["predicted_s"] == 0.06
    assert read_prediction(tmp_path) == checked
    # a report.json written before it held the whole prediction: its rows give the checked percentiles
    del data["prediction"]
    (tmp_path / "report.json").write_text(json.dumps(data))
    old = read_prediction(tmp_path)
    assert old is not None and old.tpot.predicted.p99 == 0.06 and old.ttft.measured == report.ttft
    assert old.error("tpot", 99) == pytest.approx(checked.error("tpot", 99))
    # nothing compared (the prediction was for another device): None, not an empty mapping
    write_outputs(tmp_path, [], report, None)
    assert read_prediction(tmp_path) is None


def test_plan_json_round_trips_the_prediction_and_reads_the_flat_form_of_older_plans() -> None:
    plan = sample_plan()
    data = json.loads(json.dumps(plan.to_json_dict(), allow_nan=False))
    assert PlacementPlan.from_json_dict(data).prediction == plan.prediction
    assert data["predicted"] == {"ttft_p50_s": 0.2, "ttft_p99_s": 0.4, "tpot_p50_s": 0.02, "tpot_p99_s": 0.03}
    old = dict(data["chosen"]["prediction"])
    for m in ("ttft", "tpot"):
        d = old.pop(m)
        old |= {f"{m}_p50_s": d["p50"], f"{m}_p99_s": d["p99"]}
    back = PlacementPlan.from_json_dict(data | {"chosen": data["chosen"] | {"prediction": old}}).prediction
    assert back is not None and back.ttft.p99 == 0.4 and back.tpot.p50 == 0.02


def test_path_metrics_figures_and_json_round_trip() -> None:
    report = latency_report([0.2] * 4, [0.03] * 4)
    m = replace(
        hand_metrics("native", provisioning_s=3.0),
        provisioning=Distribution.of([1.0, 2.0, 3.0]),
        latency=PredictedVsMeasured.of(predicted((0.1, 0.1), (0.04, 0.04)), report),
    )
    f = m.figures()
    assert f["ttft_p99_s"] == 0.2 and f["predicted_tpot_p99_s"] == 0.04 and f["provisioning_p50_s"] == 2.0
    assert f["ttft_p99_error"] == pytest.approx(1.0) and f["prediction_error"] == pytest.approx(0.625)
    data = json.loads(json.dumps(m.to_json_dict(), allow_nan=False))
    assert not any(PERCENTILE_FIELD.search(k) for k in data)  # comparison.json's paths hold distributions
    back = PathMetrics.from_json_dict(data)
    assert back.latency == m.latency and back.provisioning == m.provisioning
    assert back.figures() == pytest.approx(f, nan_ok=True)


def test_a_shape_is_named_by_kind_tp_mig_profile_and_share_in_two_types_only() -> None:
    """The offered shape (planner) and the plan's candidate say which shape; the hardware a replica runs
    on (:class:`ReplicaHardware`) holds shares, not names. A third type repeating them is the old shape."""
    import ast

    src = Path(__file__).resolve().parents[2] / "src" / "gpuplace"
    naming = {"kind", "tp", "mig_profile", "share"}
    holders = set()
    for path in src.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                fields = {
                    s.target.id
                    for s in node.body
                    if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                }
                if naming <= fields:
                    holders.add(node.name)
    assert holders == {"OfferedShape", "Candidate"}
