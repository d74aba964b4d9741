"""Tracking without a server: the naming scheme, the secret filter, the URI resolution, the CLI errors."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from gpuplace.cli import main
from gpuplace.tracking.config import local_config, resolve_tracking
from gpuplace.tracking.naming import KINDS, base_tags, finite, path_metric_dict
from gpuplace.tracking.secrets import REDACTED, is_secret_key, redact_pairs, redact_text, secret_env_values
from gpuplace.types.compare import PathMetrics
from gpuplace.types.latency import PredictedVsMeasured
from tests.support.plans import predicted
from tests.support.reports import hand_metrics, latency_report


def test_path_metric_keys_carry_units_and_drop_unknown_values() -> None:
    fields = {f: 0.5 for f, t in PathMetrics.__dataclass_fields__.items() if t.type == "float"}
    fields["cost_usd_per_month"] = math.nan
    fields["gpus"] = 2.0
    m = hand_metrics("native", serving_target="local", completed=3, failed=1, ttft_p99_s=0.5, **fields)
    d = path_metric_dict(m)
    assert d["ttft_p99_ms"] == 500.0 and d["provisioning_s"] == 0.5 and d["gpus"] == 2.0
    assert "cost_usd_per_month" not in d
    assert not any(k.startswith("predicted_") or k.endswith("error_ratio") for k in d)  # no prediction


def test_path_metric_keys_of_a_prediction_are_the_documented_ones() -> None:
    """The prediction's MLflow names (docs/tracking.md) come from the one predicted-vs-measured type."""
    report = latency_report([0.2] * 4, [0.03] * 4)
    pred = predicted((0.1, 0.25), (0.02, 0.04))
    m = replace(hand_metrics("native"), latency=PredictedVsMeasured.of(pred, report))
    d = path_metric_dict(m)
    assert d["predicted_ttft_p99_ms"] == pytest.approx(250.0) and d["predicted_tpot_p50_ms"] == pytest.approx(
        20.0
    )
    assert d["ttft_p99_error_ratio"] == pytest.approx(-0.2) and d["tpot_p99_error_ratio"] == pytest.approx(
        -0.25
    )
    assert d["prediction_error_ratio"] == pytest.approx(0.225) and d["ttft_p99_ms"] == pytest.approx(200.0)
    # predicted for another device than the one measured: the prediction is logged, its errors are not
    elsewhere = path_metric_dict(replace(m, latency=PredictedVsMeasured.of(pred, report, applies=False)))
    assert elsewhere["predicted_ttft_p99_ms"] == pytest.approx(250.0)
    assert not any(k.endswith("error_ratio") for k in elsewhere)
    assert finite({"a": math.inf, "b": 1}) == {"b": 1.0}


def test_base_tags_name_kind_version_and_commit() -> None:
    tags = base_tags("path", model="m", commit="abc")
    assert tags["gpuplace.kind"] == "path" and tags["mlflow.source.git.commit"] == "abc"
    assert "gpuplace.gpu_model" not in tags
    assert set(KINDS) == {"pipeline", "step", "path", "sweep_point"}
    with pytest.raises(ValueError, match="run kind"):
        base_tags("nope")


def test_secret_keys_and_values_are_redacted() -> None:
    assert (
        is_secret_key("MLFLOW_TRACKING_TOKEN")
        and is_secret_key("Authorization")
        and is_secret_key("kubeconfig")
    )
    assert not is_secret_key("prompt_tokens") and not is_secret_key("tokenizer")
    text = (
        "GET http://bob:hunter2@host:5000/x\nAuthorization: Bearer abcdefghijklmnop\n"
        "users:\n- name: u\n  user:\n    token: s3cr3t-token-value\n    client-key-data: LS0tLS1CRUdJTg==\n"
        "jwt eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.SflKxwRJSMeKKF2QT4 hf_abcdefghijklmnopqrst"
    )
    out = redact_text(text, ())
    for secret in (
        "hunter2",
        "abcdefghijklmnop",
        "s3cr3t-token-value",
        "LS0tLS1CRUdJTg",
        "SflKxwRJ",
        "hf_abcdefghij",
    ):
        assert secret not in out
    assert "http://bob:" + REDACTED + "@host:5000/x" in out and "token: " + REDACTED in out
    env = secret_env_values({"HF_TOKEN": "verysecretvalue", "HOME": "/root"})
    assert env == ("verysecretvalue",)
    assert redact_pairs({"note": "uses verysecretvalue", "api_key": "x", "model": "m"}, env) == {
        "note": f"uses {REDACTED}",
        "api_key": REDACTED,
        "model": "m",
    }


def test_uri_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    cfg = resolve_tracking(workdir=tmp_path)
    assert cfg.local and cfg.uri == f"sqlite:///{tmp_path.resolve() / 'mlflow.db'}"
    assert "mlflow ui --backend-store-uri sqlite:///" in cfg.describe()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path}/other.db")
    assert resolve_tracking(workdir=tmp_path).uri.endswith("other.db")
    assert local_config(tmp_path / "w").artifact_location.startswith("file://")


def test_compare_cli_names_the_missing_path(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "--native-deployment", "a.json", "--native-loadtest", "lt"]) == 2
    err = capsys.readouterr().err
    assert "kubeflow_deployment" in err and "kubeflow path's results are missing" in err


def test_compare_cli_rejects_bad_weights_before_reading_files(capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "compare",
        "--native-deployment",
        "a",
        "--native-loadtest",
        "b",
        "--kubeflow-deployment",
        "c",
        "--kubeflow-loadtest",
        "d",
        "--weights",
        "tpot_p99=0.5,cost=0.2",
    ]
    assert main(args) == 2
    assert "weights='tpot_p99=0.5,cost=0.2': weights sum to 0.7, not 1" in capsys.readouterr().err


def test_compare_cli_names_a_missing_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    args = [
        "compare",
        "--native-deployment",
        str(tmp_path / "none.json"),
        "--native-loadtest",
        "b",
        "--kubeflow-deployment",
        "c",
        "--kubeflow-loadtest",
        "d",
    ]
    assert main(args) == 2
    assert "native_deployment=" in capsys.readouterr().err


def test_placement_model_name_is_one_mlflow_accepts() -> None:
    """MLflow refuses ``/ : . % " '`` in a LoggedModel name; model ids such as llama-3.1-8b carry dots."""
    from mlflow.utils.validation import _validate_logged_model_name

    from gpuplace.tracking.naming import placement_model_name
    from tests.support.plans import sample_plan

    plan = replace(sample_plan(), model="meta/llama-3.1-8b:it")
    name = placement_model_name(plan)
    _validate_logged_model_name(name)  # raises on a name MLflow refuses
    assert name.startswith("meta_llama-3_1-8b_it on ") and name.endswith(plan.chosen.label)
    with pytest.raises(Exception, match="Invalid model name"):
        _validate_logged_model_name(f"{plan.model} on {plan.chosen.label}")
