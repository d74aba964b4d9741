"""Tracking against a real ``mlflow server`` (SQLite backend, proxied artifacts, loopback port).

One server for the module (it takes ~30 s to start on 2 cores), stopped by its process-group id.
Everything is read back with ``MlflowClient``: the parent/child structure, metric values, artifacts,
datasets; then the faults: unreachable at start, and the server dying mid-run (that test stops the
server, so it runs last).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow import MlflowClient  # a required dependency: a broken import must fail, never skip

from gpuplace.cli import main
from gpuplace.steps.compare import CompareOptions, MlflowOptions
from gpuplace.steps.track import compare_and_track
from gpuplace.tracking import TrackingFailed, TrackingUnavailable, open_tracker
from gpuplace.tracking.naming import interval_metric_dict, path_metric_dict, placement_model_name
from gpuplace.tracking.server import LocalServer, free_port, start_local_server
from tests.support.sample import SamplePaths, write_sample_inputs

pytestmark = pytest.mark.integration

SECRETS = {
    "HF_TOKEN": "hf_zzSECRETzzTOKENzz1234567890",
    "MLFLOW_TRACKING_TOKEN": "tok-SECRET-bearer-0987654321",
}
KUBECONFIG_KEY = "LS0tS0VDUkVULUtFWS1EQVRBLS0t"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    srv = start_local_server(tmp_path_factory.mktemp("mlflow"))
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> SamplePaths:
    return write_sample_inputs(tmp_path_factory.mktemp("sample"), requests=50, with_profile=True)


def _options(s: SamplePaths, mlflow_opts: MlflowOptions) -> CompareOptions:
    paths = s.path_inputs()
    return CompareOptions(
        paths=paths,
        plan=str(s.plan),
        inventory="h100-nvlink",
        penalty_usd_per_breach=0.05,
        engineering_weeks=3,
        rate_usd_per_week=5000,
        mlflow=mlflow_opts,
    )


def _children(client: MlflowClient, exp_id: str, parent: str) -> dict[str, object]:
    runs = client.search_runs([exp_id], f"tags.mlflow.parentRunId = '{parent}'")
    return {r.info.run_name: r for r in runs}


def test_full_comparison_is_logged_and_reads_back(
    server: LocalServer, sample: SamplePaths, tmp_path: Path
) -> None:
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    (manifests / "deployment.yaml").write_text("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n")
    opts = MlflowOptions(
        enabled=True,
        uri=server.uri,
        experiment="it-full",
        run_name="full",
        kfp_run_id="kfp-run-42",
        profile=str(sample.profile),
        manifests=str(manifests),
    )
    out = compare_and_track(_options(sample, opts), tmp_path / "out")
    client = MlflowClient(server.uri)
    parent = client.get_run(out.mlflow_run_id)
    exp_id = parent.info.experiment_id
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["gpuplace.kind"] == "pipeline"
    assert parent.data.tags["gpuplace.kfp_run_id"] == "kfp-run-42"
    assert parent.data.tags["gpuplace.winner"] == (out.comparison.score.winner or "none")
    assert parent.data.tags["gpuplace.verdict"].startswith("No difference beyond noise")  # the sample's
    assert parent.data.params["plan_id"] == "sample-0001" and parent.data.params["kfp_run_id"] == "kfp-run-42"
    assert "Chosen shape" in parent.data.tags["mlflow.note.content"]
    assert client.get_experiment(exp_id).tags["mlflow.experimentKind"] == "custom_model_development"
    assert parent.data.params["weight.tpot_p99"] == "0.25"
    assert parent.data.metrics["score.margin"] == pytest.approx(out.comparison.score.margin)
    assert parent.data.metrics["roi.build_cost_usd"] == 15000
    # the placement is the parent's one model output (MLflow's GenAI view lists such runs as training runs)
    [output] = parent.outputs.model_outputs
    model = client.get_logged_model(output.model_id)
    assert model.model_type == "llm-placement" and model.source_run_id == parent.info.run_id
    assert model.name == placement_model_name(out.comparison.plan) and "." not in model.name
    assert model.params["plan_id"] == "sample-0001"
    assert model.params["chosen"] == out.comparison.plan.chosen.label

    children = _children(client, exp_id, parent.info.run_id)
    assert set(children) == {"profile", "plan", "path: native", "path: kubeflow"}
    for path in ("native", "kubeflow"):
        run = children[f"path: {path}"]
        assert run.data.tags["gpuplace.path"] == path  # type: ignore[attr-defined]
        expected = {
            **path_metric_dict(out.comparison.path(path)),
            **interval_metric_dict(out.comparison, path),
        }
        assert "tpot_p99_ms_ci_low" in expected
        assert run.data.metrics == pytest.approx(expected)  # type: ignore[attr-defined]
        arts = {a.path for a in client.list_artifacts(run.info.run_id, "loadtest")}  # type: ignore[attr-defined]
        assert {"loadtest/report.json", "loadtest/records.jsonl"} <= arts
        assert [d.dataset.name for d in run.inputs.dataset_inputs] == [f"loadtest-{path}"]  # type: ignore[attr-defined]
    points = _children(client, exp_id, children["profile"].info.run_id)  # type: ignore[attr-defined]
    assert len(points) == 4 and all(p.data.tags["gpuplace.kind"] == "sweep_point" for p in points.values())  # type: ignore[attr-defined]
    plan_arts = {a.path for a in client.list_artifacts(children["plan"].info.run_id, "plan/manifests")}  # type: ignore[attr-defined]
    assert plan_arts == {"plan/manifests/deployment.yaml"}

    top = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"plots", "report", "tables", "comparison"} <= top
    plots = {a.path for a in client.list_artifacts(parent.info.run_id, "plots")}
    assert "plots/latency_distributions.png" in plots and "plots/cost_vs_latency.png" in plots
    local = client.download_artifacts(parent.info.run_id, "comparison/comparison.json", str(tmp_path))
    assert json.loads(Path(local).read_text())["score"]["winner"] == out.comparison.score.winner


def test_nothing_secret_is_logged(
    server: LocalServer, sample: SamplePaths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for k, v in SECRETS.items():
        monkeypatch.setenv(k, v)
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    kubeconfig = "apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user:\n"
    (manifests / "kubeconfig.yaml").write_text(kubeconfig + f"    client-key-data: {KUBECONFIG_KEY}\n")
    dep = json.loads(sample.deployments["native"].read_text())
    dep["notes"] = [
        f"called with Authorization: Bearer {SECRETS['MLFLOW_TRACKING_TOKEN']}",
        f"HF {SECRETS['HF_TOKEN']}",
    ]
    leaky = tmp_path / "deployment.json"
    leaky.write_text(json.dumps(dep))
    opts = MlflowOptions(
        enabled=True,
        uri=server.uri,
        experiment="it-secrets",
        manifests=str(manifests),
        run_name=f"run {SECRETS['HF_TOKEN']}",
    )
    o = _options(sample, opts)
    o = CompareOptions(
        **{
            **{f: getattr(o, f) for f in o.__dataclass_fields__},
            "paths": (o.paths[0].__class__("native", str(leaky), o.paths[0].loadtest), o.paths[1]),
        }
    )
    out = compare_and_track(o, tmp_path / "out")
    client = MlflowClient(server.uri)
    exp = client.get_experiment_by_name("it-secrets")
    seen: list[str] = []
    for run in client.search_runs([exp.experiment_id]):
        seen += [json.dumps(run.data.params), json.dumps(run.data.tags), json.dumps(list(run.data.metrics))]
        dl = Path(client.download_artifacts(run.info.run_id, "", str(tmp_path / run.info.run_id)))
        seen += [f.read_text(errors="replace") for f in dl.rglob("*") if f.is_file() and f.suffix != ".png"]
    blob = "\n".join(seen)
    assert out.mlflow_run_id and "called with Authorization: Bearer ***redacted***" in blob  # read, redacted
    for secret in (*SECRETS.values(), KUBECONFIG_KEY):
        assert secret not in blob


def test_attaches_to_the_run_kfp_injected(server: LocalServer, monkeypatch: pytest.MonkeyPatch) -> None:
    client = MlflowClient(server.uri)
    exp_id = client.create_experiment("it-kfp")
    kfp_run = client.create_run(exp_id, run_name="kfp task").info.run_id
    monkeypatch.setenv("MLFLOW_RUN_ID", kfp_run)
    tracker = open_tracker(server.uri, experiment="it-kfp")
    with tracker.run("ignored", "pipeline", kfp_run_id="kfp-7") as parent:  # noqa: SIM117
        with tracker.run("path: native", "path", parent=parent) as child:
            tracker.log(child, {"ttft_p99_ms": 12.5})
    assert parent.run_id == kfp_run and not parent.owned
    run = client.get_run(kfp_run)
    assert run.info.status == "RUNNING"  # KFP owns its run's status
    assert run.data.tags["gpuplace.kfp_run_id"] == "kfp-7"
    kids = _children(client, exp_id, kfp_run)
    assert kids["path: native"].data.metrics == {"ttft_p99_ms": 12.5}  # type: ignore[attr-defined]


def test_a_whole_pipeline_run_attaches_to_kfps_run_keeping_its_params_and_times(
    server: LocalServer, sample: SamplePaths, monkeypatch: pytest.MonkeyPatch
) -> None:
    """KFP 2.17's MLflow integration creates the parent run (with params of its own) and injects
    MLFLOW_RUN_ID: gpuplace adds its params, description and children, and leaves KFP's params, times
    and status alone."""
    from gpuplace.plandir import read_plan_dir
    from gpuplace.steps.track import read_path
    from gpuplace.tracking.pipeline import RunBundle, log_pipeline_run

    client = MlflowClient(server.uri)
    exp_id = client.create_experiment("it-kfp-whole")
    kfp_run = client.create_run(exp_id, run_name="kfp pipeline").info
    client.log_param(kfp_run.run_id, "model", "as KFP spelt it")
    monkeypatch.setenv("MLFLOW_RUN_ID", kfp_run.run_id)
    tracker = open_tracker(server.uri, experiment="it-kfp-whole")
    paths = tuple(read_path(p, sample.deployments[p], sample.loadtests[p]) for p in ("native", "kubeflow"))
    bundle = RunBundle("ignored", plan=read_plan_dir(sample.plan), paths=paths, kfp_run_id="kfp-8")
    assert log_pipeline_run(tracker, bundle) == kfp_run.run_id
    run = client.get_run(kfp_run.run_id)
    assert run.data.params["model"] == "as KFP spelt it"  # KFP's, not overwritten (MLflow would refuse)
    assert run.data.params["plan_id"] == "sample-0001" and run.data.params["kfp_run_id"] == "kfp-8"
    assert "Chosen shape" in run.data.tags["mlflow.note.content"]
    assert run.info.start_time == kfp_run.start_time and run.info.status == "RUNNING"
    assert set(_children(client, exp_id, kfp_run.run_id)) == {"plan", "path: native", "path: kubeflow"}


def test_unreachable_server_at_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(TrackingUnavailable, match=rf"MLflow tracking server {dead} is unreachable"):
        open_tracker(dead, timeout_s=2)
    tracker = open_tracker(dead, workdir=tmp_path / "local", fallback_local=True, timeout_s=2)
    assert tracker.config.fallback_used and "fell back to local MLflow store" in tracker.config.describe()
    with tracker.run("offline", "pipeline") as run:
        tracker.log(run, {"x_s": 1.0})
    assert MlflowClient(tracker.config.uri).get_run(run.run_id).data.metrics == {"x_s": 1.0}
    s = write_sample_inputs(tmp_path / "s", requests=20)
    args = [
        "compare",
        "--native-deployment",
        str(s.deployments["native"]),
        "--native-loadtest",
        str(s.loadtests["native"]),
        "--kubeflow-deployment",
        str(s.deployments["kubeflow"]),
        "--kubeflow-loadtest",
        str(s.loadtests["kubeflow"]),
        "--out",
        str(tmp_path / "o"),
        "--mlflow",
        "--mlflow-uri",
        dead,
    ]
    assert main(args) == 2
    assert f"MLflow tracking server {dead} is unreachable" in capsys.readouterr().err
    assert not (tmp_path / "o" / "comparison.json").exists()  # nothing half-done


def test_server_dying_mid_run_fails_the_step(server: LocalServer) -> None:
    """Runs last: it stops the module's server."""
    tracker = open_tracker(server.uri, experiment="it-dies")
    match = rf"MLflow at {server.uri} failed while logging 1 metrics"
    with pytest.raises(TrackingFailed, match=match), tracker.run("dies", "pipeline") as run:
        tracker.log(run, {"before_s": 1.0})
        server.stop()
        tracker.log(run, {"after_s": 2.0})
