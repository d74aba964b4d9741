"""Profile files on disk and the `gpuplace profile` / `gpuplace catalog` commands, end to end on CPU."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from gpuplace.cli import main
from gpuplace.errors import InvalidInput
from gpuplace.profiling import ProfileConfig, load_profile, profile_to_frame, run_profile, save_profile
from gpuplace.profiling.summary import profile_metrics


@pytest.fixture(scope="module")
def profile():  # type: ignore[no-untyped-def]
    config = ProfileConfig(
        model="tiny",
        device="cpu",
        batch_sizes=(1, 4096),
        prompt_tokens=(8, 1024),
        output_tokens=(3,),
        repeats=2,
        warmup=1,
        memory_limit_gib=0.05,
    )
    return run_profile(config, show_progress=False)


def test_parquet_round_trip_keeps_everything(profile, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = save_profile(profile, tmp_path / "p.parquet")
    back = load_profile(path)
    assert back.model == profile.model
    assert back.device == profile.device
    assert back.bandwidth_source == profile.bandwidth_source
    assert len(back.results) == len(profile.results) == 4
    for a, b in zip(profile.results, back.results, strict=True):
        assert a.point == b.point and a.ok == b.ok and a.error == b.error
        assert a.decode_step.count == b.decode_step.count
        assert a.decode_step.p99 == pytest.approx(b.decode_step.p99, nan_ok=True)
        assert (math.isnan(a.mbu) and math.isnan(b.mbu)) or a.mbu == pytest.approx(b.mbu)
    assert not list(tmp_path.glob("*.tmp"))


def test_frame_has_a_row_per_point_and_unit_named_columns(profile) -> None:  # type: ignore[no-untyped-def]
    frame = profile_to_frame(profile)
    assert len(frame) == 4
    for col in (
        "prefill_s_p50",
        "decode_step_s_p99",
        "tpot_s_mean",
        "e2e_s_std",
        "mbu",
        "peak_memory_gib",
        "error",
    ):
        assert col in frame.columns
    failed = frame[~frame["ok"]]
    assert set(failed["batch_size"]) == {4096} and failed["error"].str.contains("would not fit").all()


def test_metrics_name_each_ok_point(profile) -> None:  # type: ignore[no-untyped-def]
    m = profile_metrics(profile)
    assert m["points"] == 4 and m["failed_points"] == 2
    assert m["b1_p8_o3_float32_eager_tpot_p50_ms"] > 0
    assert not any(k.startswith("b4096") for k in m)


def test_load_rejects_files_that_are_not_profiles(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="no such file"):
        load_profile(tmp_path / "missing.parquet")
    (tmp_path / "text.parquet").write_text("hello")
    with pytest.raises(InvalidInput, match="not a Parquet file"):
        load_profile(tmp_path / "text.parquet")
    pd.DataFrame({"a": [1]}).to_parquet(tmp_path / "plain.parquet")
    with pytest.raises(InvalidInput, match="no gpuplace metadata"):
        load_profile(tmp_path / "plain.parquet")


def test_cli_profile_writes_files_and_prints_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "profile.parquet"
    md = tmp_path / "summary.md"
    code = main(
        [
            "profile",
            "--model",
            "tiny",
            "--device",
            "cpu",
            "--batch-sizes",
            "1",
            "--prompt-tokens",
            "16",
            "--output-tokens",
            "4",
            "--repeats",
            "2",
            "--out",
            str(out),
            "--markdown",
            str(md),
            "--quiet",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "TPOT p50 ms" in printed and "float32" in printed and f"wrote {out}" in printed
    assert load_profile(out).results[0].ok
    device = json.loads((tmp_path / "profile.device.json").read_text())
    assert device["kind"] == "cpu" and device["torch_version"]
    assert md.read_text().startswith("# Latency profile: tiny")


def test_cli_shows_progress_with_eta(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(
        [
            "profile",
            "--device",
            "cpu",
            "--batch-sizes",
            "1,2",
            "--prompt-tokens",
            "8",
            "--output-tokens",
            "3",
            "--repeats",
            "1",
            "--out",
            str(tmp_path / "p.parquet"),
        ]
    )
    err = capsys.readouterr().err
    assert "profile tiny on cpu: 2/2" in err and "ETA" in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--model", "llama-3.1-8"], "model='llama-3.1-8': unknown name. Did you mean 'llama-3.1-8b'"),
        (["--device", "cuda"], "device='cuda'"),
        (["--device", "tpu"], "device='tpu': not a device"),
        (["--dtypes", "int4"], "dtype='int4'"),
        (["--batch-sizes", "one"], "batch_sizes='one'"),
        (["--repeats", "0"], "repeats=0"),
        (["--out", "profile.csv"], "out='profile.csv': must end in .parquet"),
    ],
)
def test_cli_bad_input_exits_2_naming_field_and_value(
    argv: list[str],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torch

    if argv == ["--device", "cuda"] and torch.cuda.is_available():
        return  # on a GPU machine cuda is valid; the message is checked where there is none (CI)
    monkeypatch.chdir(tmp_path)
    assert main(["profile", "--quiet", *argv]) == 2
    assert message in capsys.readouterr().err
    assert not list(tmp_path.glob("*.parquet"))  # nothing half-written


def test_cli_malformed_config_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "config.json"
    bad.write_text('{"model_type": "llama", "hidden_size": 64,')
    assert main(["profile", "--model", str(bad), "--quiet", "--out", str(tmp_path / "p.parquet")]) == 2
    assert "is not valid JSON" in capsys.readouterr().err


def test_cli_profiles_a_config_json_and_a_model_directory(tmp_path: Path) -> None:
    from gpuplace.catalog.models import MODELS_DIR

    model_dir = tmp_path / "my-model"
    model_dir.mkdir()
    (model_dir / "config.json").write_text((MODELS_DIR / "tiny.json").read_text())
    for spec in (str(model_dir / "config.json"), str(model_dir)):
        out = tmp_path / "p.parquet"
        assert (
            main(
                [
                    "profile",
                    "--model",
                    spec,
                    "--device",
                    "cpu",
                    "--batch-sizes",
                    "1",
                    "--prompt-tokens",
                    "8",
                    "--output-tokens",
                    "2",
                    "--repeats",
                    "1",
                    "--quiet",
                    "--out",
                    str(out),
                ]
            )
            == 0
        )
        assert load_profile(out).model.name == spec


def test_cli_catalog_lists(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "gpus"]) == 0
    out = capsys.readouterr().out
    assert "H200-SXM-141GB" in out and "3g.40gb" in out
    gb200 = next(line for line in out.splitlines() if line.startswith("GB200-NVL72-186GB"))
    assert gb200.split()[4:7] == ["5000", "1800", "72"]  # fp8 TFLOP/s, NVLink GB/s, NVLink domain
    assert main(["catalog", "models"]) == 0
    assert "llama-3.1-70b" in capsys.readouterr().out
