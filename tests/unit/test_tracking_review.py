"""What a reviewer meets first in MLflow: the parent run's params, its description and the runs' spans,
computed from hand-made records (the MLflow server and the browser check them in
tests/integration/test_browser_mlflow.py)."""

from __future__ import annotations

import math
from dataclasses import replace

from gpuplace import __version__
from gpuplace.tracking.review import (
    PathRecords,
    description,
    epoch_s,
    loadtest_params,
    pipeline_params,
    spans,
)
from gpuplace.types import DeploymentRecord, PodRecord
from tests.support.plans import sample_plan
from tests.support.reports import latency_report

T0 = 1_800_000_000.0


def _dep(created_at: str, pod_created: float = math.nan) -> DeploymentRecord:
    pods = (PodRecord("p0", node="n", created_at_s=pod_created),)
    return DeploymentRecord("local", "d", "ns", "http://x", "m", True, pods, created_at=created_at)


def test_pipeline_params_name_every_input_and_the_chosen_shape() -> None:
    plan = sample_plan(nodes=("a", "b"), gpus=2)
    p = pipeline_params(plan, "kfp-7", {"concurrency": None, "max_requests": 120})
    assert p["model"] == "tiny" and p["plan_id"] == "p1" and p["kfp_run_id"] == "kfp-7"
    assert p["chosen_gpu"] == "H100-SXM5-80GB" and p["chosen_kind"] == "whole"
    assert p["chosen_tp"] == "2" and p["chosen_replicas"] == "2"
    assert p["chosen_shape"] == plan.chosen.label and p["gpuplace_version"] == __version__
    assert {"slo_ttft_p99_ms", "slo_tpot_p99_ms", "rate_rps", "prompt_tokens", "output_tokens"} <= set(p)
    assert p["kinds_considered"] == "whole" and p["loadtest_max_requests"] == "120"
    assert "loadtest_concurrency" not in p  # an open loop has none: not logged as "None"
    assert pipeline_params(None, "")["kfp_run_id"] == "none (not run by KFP)"


def test_spans_come_from_the_steps_records() -> None:
    from tests.support.sample import sample_profile

    profile = replace(
        sample_profile(), started_at="2027-01-15T08:00:00+00:00", created_at="2027-01-15T08:01:00+00:00"
    )
    start = epoch_s("2027-01-15T08:02:00+00:00")
    report = replace(latency_report([0.1], [0.01]), started_at_s=start + 10, finished_at_s=start + 70)
    got = spans(profile, [PathRecords("native", _dep("2027-01-15T08:02:00+00:00"), report)])
    assert got["profile"] == (epoch_s("2027-01-15T08:00:00+00:00"), epoch_s("2027-01-15T08:01:00+00:00"))
    assert got["path: native"] == (start, start + 70)
    assert got["plan"] == (got["profile"][1], start)  # between the profile's end and the deployment
    assert got["pipeline"] == (got["profile"][0], start + 70)


def test_a_path_without_times_has_no_span() -> None:
    # a report written before the wall clock was kept: the run keeps MLflow's own times
    got = spans(None, [PathRecords("native", _dep(""), latency_report([0.1], [0.01]))])
    assert got == {}
    # the pods' creation stands in for the deployment's when only it was recorded
    report = replace(latency_report([0.1], [0.01]), finished_at_s=T0 + 30)
    assert spans(None, [PathRecords("native", _dep("", T0), report)])["path: native"] == (T0, T0 + 30)


def test_description_says_shape_predicted_measured_and_verdict() -> None:
    from tests.support.reports import hand_metrics

    plan = sample_plan()
    m = hand_metrics(
        "native",
        serving_target="local",
        ttft_p99_s=0.5,
        tpot_p99_s=0.031,
        served_on="cpu",
        prediction_for=plan.chosen.unit,
    )
    text = description(plan, [m], None, "")
    assert plan.chosen.label in text and "| p99 TTFT (ms) | 400.00 | 500.00 |" in text
    assert "not comparable" in text  # predicted for an H100, served on the CPU
    assert "**Verdict**" not in text


def test_loadtest_params_leave_out_the_tokenizer() -> None:
    report = replace(latency_report([0.1], [0.01]), workload={"rate_rps": 2.0, "tokenizer": "/x", "seed": 0})
    assert loadtest_params(report) == {"loadtest_rate_rps": "2.0", "loadtest_seed": "0"}


def test_the_parent_run_logs_each_slo_bound_once_in_milliseconds() -> None:
    """A comparison's parent run also gets the pipeline's params: the SLO is logged there once, in
    milliseconds (the plan's, else the comparison's), not again in seconds by the comparison (issue 34)."""
    from gpuplace.compare import compare_paths
    from gpuplace.compare.metrics import PathResult
    from gpuplace.tracking.naming import comparison_params
    from gpuplace.types.plan import Slo
    from tests.unit.test_compare import _deployment

    plan = sample_plan(nodes=("a",), gpus=1)
    results = [
        PathResult("native", _deployment([5.0]), latency_report([0.1] * 4, [0.01] * 4)),
        PathResult("kubeflow", _deployment([8.0]), latency_report([0.2] * 4, [0.02] * 4)),
    ]
    comparison = comparison_params(compare_paths(results, plan=plan, penalty_usd_per_breach=1.0))
    assert not [k for k in comparison if not k.startswith("weight.") and ("slo" in k or "_p99" in k)]
    assert "rate_rps" not in comparison
    pipeline = pipeline_params(plan, "", slo=Slo(tpot_p99_s=0.5))  # the plan's wins
    assert (pipeline["slo_tpot_p99_ms"], pipeline["slo_ttft_p99_ms"]) == ("50", "2000")
    alone = pipeline_params(None, "", slo=Slo(tpot_p99_s=0.035))
    assert (alone["slo_tpot_p99_ms"], alone["slo_ttft_p99_ms"], alone["rate_rps"]) == ("35", "none", "none")
