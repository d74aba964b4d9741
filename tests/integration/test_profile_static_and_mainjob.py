"""Slower real runs: static KV cache + torch.compile on the CPU, and the main job through kfp.local."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from gpuplace.cli import main
from gpuplace.profiling import ProfileConfig, load_profile, run_profile

pytestmark = pytest.mark.integration


def test_static_mode_compiles_and_reports_both_modes() -> None:
    """torch.compile (inductor, no CUDA graphs on a CPU) of the decode step with a static cache."""
    config = ProfileConfig(
        model="tiny",
        device="cpu",
        batch_sizes=(2,),
        prompt_tokens=(16,),
        output_tokens=(6,),
        modes=("both",),
        repeats=2,
        warmup=3,
    ).validated()
    profile = run_profile(config, show_progress=False)
    eager, static = profile.results
    assert (eager.point.mode, static.point.mode) == ("eager", "static")
    assert eager.ok and static.ok, (eager.error, static.error)
    assert static.decode_step.count == 2 * 5
    # the compiled step must not be timing compilation: warm-up absorbed it, so its slowest step
    # is nowhere near a compile (seconds)
    assert static.decode_step.max < 0.5


def test_static_cache_decode_matches_eager_tokens() -> None:
    """The static path computes the same greedy tokens as the eager one (it measures the same work)."""
    import torch

    from gpuplace.catalog.models import resolve_model
    from gpuplace.profiling.model import build_model
    from gpuplace.profiling.profiler import _Runner
    from gpuplace.profiling.timing import CpuClock

    torch.manual_seed(0)
    model = build_model(resolve_model("tiny"), torch.float32, torch.device("cpu"))
    ids = torch.randint(512, 1024, (2, 12))
    tokens = {}
    for mode, compiled in (("eager", False), ("static", False), ("static", True)):
        runner = _Runner(model, torch.device("cpu"), mode, CpuClock())
        if not compiled:
            runner._compiled = None  # the cache semantics alone, then the compiled step (fullgraph)
        cache = runner._cache(2, 20)
        with torch.inference_mode():
            tok = runner._prefill(ids, cache)
            seq = [tok]
            for i in range(5):
                tok = runner._decode(tok, cache, torch.tensor([12 + i]))
                seq.append(tok)
        tokens[mode, compiled] = torch.cat(seq, dim=1)
    assert torch.equal(tokens["eager", False], tokens["static", False])
    assert torch.equal(tokens["eager", False], tokens["static", True])


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """A real `mlflow server` (SQLite store, artifacts folder) on a loopback port."""
    from gpuplace.tracking.server import start_local_server

    server = start_local_server(tmp_path_factory.mktemp("mlflow-server"))
    try:
        yield server
    finally:
        server.stop()


def _runs(uri: str) -> list:  # type: ignore[type-arg]
    """The 'gpuplace' experiment's runs; none before a run created it (the tests run in any order)."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("gpuplace")
    if experiment is None:  # no run logged to this server yet
        return []
    return list(client.search_runs([experiment.experiment_id], max_results=500))


def test_main_job_runs_llm_placement_end_to_end(tmp_path: Path, capsys, mlflow_server) -> None:  # type: ignore[no-untyped-def]
    """`gpuplace run`: every step of llm_placement as real components under kfp.local, with a real
    local inference server and a real MLflow server, then the summary."""
    import json

    argv = ["run", "--workdir", str(tmp_path / "runs"), "--device", "cpu", "--max-requests", "6"]
    before = {r.info.run_id for r in _runs(mlflow_server.uri)}  # the server is shared by the module's tests
    assert main([*argv, "--mlflow-uri", mlflow_server.uri]) == 0
    out = capsys.readouterr().out
    for line in (
        "planned on this machine",
        "predicted vs measured on the same device",
        "p50 TTFT (ms)",
        "p99 TPOT (ms)",
        "fleet mixed-a100-h100-l4",
        "MLflow",
    ):
        assert line in out
    run_dir = next((tmp_path / "runs").iterdir())
    report = json.loads(next(run_dir.rglob("load-test/report")).read_text())
    assert report["completed"] == 6 and report["failed"] == 0
    profiles = [p for p in run_dir.rglob("profile-latency/profile") if p.is_file()]
    assert [r.point.batch_size for r in load_profile(profiles[0]).results] == [1, 4]
    # the exit handler stopped the server the deploy step started
    teardown = json.loads(next(run_dir.rglob("teardown-inference/executor_output.json")).read_text())
    assert "stopped local server" in json.dumps(teardown)
    # one parent run with a child per step, in the real MLflow server, among the runs this test made
    runs = [r for r in _runs(mlflow_server.uri) if r.info.run_id not in before]
    parents = [r for r in runs if r.data.tags.get("mlflow.parentRunId") is None]
    assert len(parents) == 1
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]
    assert len(children) >= 3  # profile, plan, the serving path
    # the measured figures are metrics, on the parent and on the path's run, beside the prediction
    parent = parents[0].data.metrics
    assert {
        "native.ttft_p99_ms",
        "native.tpot_p99_ms",
        "native.goodput_rps",
        "native.slo_attainment_ratio",
    } <= set(parent)
    (path,) = [r for r in children if r.data.tags.get("gpuplace.path") == "native"]
    assert {"ttft_p99_ms", "predicted_ttft_p99_ms", "predicted_tpot_p99_ms", "provisioning_s"} <= set(
        path.data.metrics
    )
    # planned onto this machine and served on it: the prediction error is measured, at p50 and p99
    from gpuplace.profiling.device import local_unit

    assert path.data.params["served_on"] == local_unit() == path.data.params["prediction_for"]
    assert {"ttft_p50_error_ratio", "tpot_p50_error_ratio", "ttft_p99_error_ratio"} <= set(path.data.metrics)


@pytest.mark.measure  # an A/A verdict on live timings: run alone (conftest.py)
def test_main_job_compare_runs_both_paths(tmp_path: Path, capsys, mlflow_server) -> None:  # type: ignore[no-untyped-def]
    """`gpuplace run --compare` (3 repeats by default), an A/A test: both paths serve the same local engine,
    each deployed and load-tested three times, the runs interleaved (the pipeline's loop of runs), so the
    verdict, its interval from the runs with the machine's drift over them removed, names no winner
    ("No difference beyond noise", or a margin under the minimum effect); the CLI, the report, the KFP
    Metrics output and MLflow say the same sentence."""
    import json

    from gpuplace.compare.noise import RUNS

    before = {r.info.run_id for r in _runs(mlflow_server.uri)}  # the server is shared by the module's tests
    argv = ["run", "--compare", "--workdir", str(tmp_path / "runs"), "--device", "cpu", "--max-requests", "4"]
    assert main([*argv, "--mlflow-uri", mlflow_server.uri]) == 0
    out = capsys.readouterr().out
    (verdict,) = [line for line in out.splitlines() if line.startswith("comparison        ")]
    assert "orchestration_comparison" in out
    # A/A: either the interval includes zero, or (one time in twenty at 95%) it excludes it by a margin under
    # MIN_EFFECT points; never a winner
    assert (
        verdict.removeprefix("comparison")
        .strip()
        .startswith(("No difference beyond noise", "No difference worth acting on"))
    ), verdict
    assert "over 3 runs per path" in verdict and "linear drift of the machine removed" in verdict
    assert {"native #1", "native #3", "kubeflow #1", "kubeflow #3"} <= {
        line[:11].strip() for line in out.splitlines()
    }
    run_dir = next((tmp_path / "runs").iterdir())
    # three deployments and three load tests per path, one per iteration of the loop
    assert len(list(run_dir.rglob("*-iteration-*/load-test/report"))) == 3
    assert len(list(run_dir.rglob("*-iteration-*/serve-and-load-test/report"))) == 3
    comparison = json.loads(next(run_dir.rglob("compare-paths/comparison")).read_text())
    assert [p["path"] for p in comparison["paths"]] == ["native", "kubeflow"]
    assert comparison["score"]["runs"] == {"native": 3, "kubeflow": 3}
    assert comparison["score"]["interval_method"]["tpot_p99"] == "bootstrap over runs and requests"
    assert comparison["score"]["margin_method"] == RUNS and not comparison["score"]["winner"]
    # the native figure pools both runs' requests: its p99 TPOT is that of the two runs' records together
    import numpy as np

    from gpuplace.loadtest.io import read_records

    records = [r for f in sorted(run_dir.rglob("*-iteration-*/load-test/records")) for r in read_records(f)]
    assert len(records) == 12
    tpot = [r.tpot_s for r in records if r.success and not np.isnan(r.tpot_s)]
    from gpuplace.steps.compare import read_comparison

    pooled = read_comparison(next(run_dir.rglob("compare-paths/comparison"))).path("native").tpot
    assert pooled.p99 == pytest.approx(float(np.percentile(tpot, 99))) and pooled.count == len(tpot)
    report = next(run_dir.rglob("compare-paths/report_md")).read_text()
    assert "local serving target" in report
    said = verdict.removeprefix("comparison").strip()
    assert said in report.replace("**", "")
    metrics = json.loads(next(run_dir.rglob("compare-paths/executor_output.json")).read_text())
    kfp_metrics = metrics["artifacts"]["metrics"]["artifacts"][0]["metadata"]
    assert kfp_metrics["native_load_test_runs"] == 3 and kfp_metrics["kubeflow_load_test_runs"] == 3
    assert {"score_margin_ci_low", "score_margin_ci_high", "beyond_noise"} <= set(kfp_metrics)
    assert metrics["artifacts"]["comparison"]["artifacts"][0]["metadata"]["verdict"] == said
    runs = [r for r in _runs(mlflow_server.uri) if r.info.run_id not in before]
    (parent,) = [r for r in runs if r.data.tags.get("mlflow.parentRunId") is None]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert {"native", "kubeflow"} <= {r.data.tags.get("gpuplace.path") for r in children}
    assert parent.data.tags["gpuplace.verdict"] == said
    assert parent.data.params["runs.native"] == parent.data.params["runs.kubeflow"] == "3"
    assert parent.data.metrics["native.load_test_runs"] == 3
    assert {"score.margin_ci_low", "score.margin_ci_high"} <= set(parent.data.metrics)


def test_main_job_rejects_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--workdir", str(tmp_path), "--rate", "0"]) == 2
    assert "rate=0.0: must be positive" in capsys.readouterr().err
    assert main(["run", "--workdir", str(tmp_path), "--trace", str(tmp_path / "nope.csv")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["run", "--workdir", str(tmp_path), "--repeats", "2"]) == 2  # repeats are the comparison's
    assert "repeats=2: repeats the comparison's runs. Add --compare" in capsys.readouterr().err
    assert main(["run", "--workdir", str(tmp_path), "--compare", "--repeats", "0"]) == 2
    assert "repeats=0: must be between 1 and 20" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # nothing half-written


@pytest.mark.controlplane
def test_main_job_fails_when_no_request_succeeded_and_keeps_what_it_measured(
    controlplane, kube_api, kube_namespace, tmp_path: Path, capsys
) -> None:  # type: ignore[no-untyped-def]
    """`gpuplace run --target kubernetes --runtime none`: kube-scheduler binds the plan's pods where the plan
    said and KWOK runs them, but nothing serves them (no stand-in), so the load test's probe finds no
    endpoint and sends nothing: the load-test task fails, the run exits 1, the outputs written so far are
    kept, and the exit handler tears down."""
    import json

    from gpuplace.types import DeploymentRecord

    argv = [
        "run",
        "--workdir",
        str(tmp_path / "runs"),
        "--device",
        "cpu",
        "--max-requests",
        "2",
        "--target",
        "kubernetes",
        "--kubeconfig",
        str(controlplane.kubeconfig),
        "--namespace",
        kube_namespace,
        "--runtime",
        "none",
    ]
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert "load-test" in err and "FAILURE" in err and "what they wrote is kept" in err
    assert "measured before the failure" in out
    run_dir = next((tmp_path / "runs").iterdir())
    record = DeploymentRecord.from_json_dict(
        json.loads(next(run_dir.rglob("deploy-inference/deployment")).read_text())
    )
    assert record.target == "kubernetes" and record.pods
    assert all(p.phase == "Running" and p.node == p.planned_node for p in record.pods)
    assert all(math.isnan(p.provisioning_s) for p in record.pods)  # ready-to-serve not observed: unknown
    # nothing answers at the endpoint, so the load test's probe stops it before anything is sent
    assert "the load test's probe failed, so nothing was sent" in err
    assert not any(run_dir.rglob("load-test/report"))
    assert kube_api.list("apps/v1", "Deployment", kube_namespace) == []  # torn down by run id


@pytest.mark.controlplane
def test_main_job_compares_both_paths_on_the_testenv(
    controlplane, kube_api, kube_namespace, tmp_path: Path, capsys, mlflow_server
) -> None:  # type: ignore[no-untyped-def]
    """The issue's "done when": `gpuplace run --compare --target kubernetes` against the testenv prints both
    paths with the nodes and GPU devices read back from the API and their provisioning times, both served
    by the KWOK stand-in's local engine, with one serving spec."""
    import json

    from gpuplace.jobs.outputs import read_run
    from gpuplace.pipelines.orchestration_comparison.pipeline import pipeline
    from gpuplace.profiling.device import local_unit

    argv = [
        "run",
        "--compare",
        "--workdir",
        str(tmp_path / "runs"),
        "--device",
        "cpu",
        "--inventory",
        "h100-nvlink",
        "--max-requests",
        "4",
        "--target",
        "kubernetes",
        "--kubeconfig",
        str(controlplane.kubeconfig),
        "--namespace",
        kube_namespace,
        "--mlflow-uri",
        mlflow_server.uri,
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    run_dir = next((tmp_path / "runs").iterdir())
    outputs = next(run_dir.rglob("compare-paths")).parent
    runs = read_run(pipeline.pipeline_spec, outputs).runs  # with --repeats, "native #1", ... one per run
    assert {r.label.split(" #")[0] for r in runs} == {"native", "kubeflow"}
    lines = {r.label: next(line for line in out.splitlines() if line.startswith(f"{r.label} ")) for r in runs}
    for run in runs:
        label, record = run.label, run.record
        assert record is not None, f"{label}: no deployment record"
        assert record.runtime.startswith("local stand-in") and record.served_on == local_unit()
        # each run's line carries its own record's provisioning time, not another repeat's
        assert f"{record.provisioning().max:.2f}" in lines[label], (label, lines[label])
        (pod,) = record.pods
        if label.startswith("native"):
            assert record.gpu_api == "dra" and pod.gpu_ids == pod.planned_gpu_ids and pod.gpu_ids
            assert pod.gpu_ids[0] in lines[label] and pod.node == pod.planned_node
        else:
            assert record.gpu_api == "device-plugin" and pod.gpu_ids == () and pod.placement_level == "node"
            assert "(node level)" in lines[label]
    first = {r.label.split(" #")[0]: r.record for r in reversed(runs) if r.record is not None}
    native, kubeflow = first["native"], first["kubeflow"]
    assert native.serving == kubeflow.serving  # one spec, so the verdict stands
    assert native.pods[0].node == kubeflow.pods[0].node
    (verdict,) = [line for line in out.splitlines() if line.startswith("comparison        ")]
    assert "interval" in verdict and "noise" in verdict and "not scored: fragmentation" in out
    comparison = json.loads(next(run_dir.rglob("compare-paths/comparison")).read_text())
    assert {p["path"]: p["placement_level"] for p in comparison["paths"]} == {
        "native": "device",
        "kubeflow": "node",
    }
    assert kube_api.list("v1", "Pod", kube_namespace) == []  # the task pod deleted, the native path torn down
