"""`gpuplace profile --operators` on this CPU, the whole path (issue 35): the table is measured with torch on
the CPU device (all-reduce over two real gloo processes, which is how more than one GPU would be timed with
NCCL), written and read back, scored per regime, and refused where it would price a GPU (a CPU never
calibrates a GPU). That a GPU's own table changes a plan as its measured times say is checked with the
H200's table in tests/unit/test_operator_kernels.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuplace.cli import main
from gpuplace.profiling.operator_table import read_operator_table

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def table_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("operators") / "operators.json"
    args = ["profile", "--operators", "--model", "tiny", "--device", "cpu", "--operator-max-tokens", "64"]
    code = main(
        [
            *args,
            "--allreduce-ranks",
            "2",
            "--out",
            str(out),
            "--markdown",
            str(out.with_suffix(".md")),
            "--quiet",
        ]
    )
    assert code == 0
    return out


def test_the_cpu_table_has_every_operator_and_its_regimes(table_path: Path) -> None:
    table = read_operator_table(table_path)
    assert table.device.kind == "cpu" and table.gpu == "" and table.bandwidth_source.startswith("measured")
    assert {r.tokens for r in table.of("gemm")} == {1, 2, 4, 8, 16, 32, 64}
    assert {r.layer for r in table.of("gemm")} == {"qkv", "o", "gate_up", "down", "lm_head"}
    assert table.of("attention_decode")
    assert [r.tokens for r in table.of("attention_prefill")] == [64]  # no default length fits: the limit
    reduce = table.of("all_reduce")
    assert len(reduce) == 10 and {r.ranks for r in reduce} == {2} and all(r.seconds > 0 for r in reduce)
    md = table_path.with_suffix(".md").read_text()
    for regime in ("GEMM float32, memory-bound", "decode attention", "all-reduce", "no GPU class"):
        assert regime in md


def test_a_cpu_table_never_prices_a_gpu(table_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "predict",
            "--model",
            "tiny",
            "--gpu",
            "H100-SXM5-80GB",
            "--rate",
            "1",
            "--operators",
            str(table_path),
        ]
    )
    err = capsys.readouterr().err
    assert code != 0 and "operators=" in err and "never calibrates a GPU" in err


def test_plan_leaves_a_cpu_table_aside_with_a_note_and_refuses_it_for_the_local_target(
    table_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["plan", "--model", "tiny", "--slo-tpot-ms", "50", "--slo-ttft-ms", "2000", "--rate", "1"]
    assert (
        main(
            [
                *args,
                "--inventory",
                "h100-nvlink",
                "--operators",
                str(table_path),
                "--out",
                str(tmp_path / "p"),
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert "--operators: the table was measured on the CPU" in err
    plan = json.loads((tmp_path / "p" / "plan.json").read_text())
    assert plan["chosen"]["verdict"] == "chosen"
    code = main([*args, "--inventory", "local", "--operators", str(table_path), "--out", str(tmp_path / "q")])
    assert (
        code != 0 and "the local target is priced by its engine's measured steps" in capsys.readouterr().err
    )
    assert not (tmp_path / "q").exists()


def test_out_must_be_json_before_anything_is_measured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        ["profile", "--operators", "--model", "tiny", "--device", "cpu", "--out", str(tmp_path / "t.parquet")]
    )
    assert code != 0 and "must end in .json with --operators" in capsys.readouterr().err
    code = main(
        ["profile", "--operators", "--engine-steps", "--model", "tiny", "--out", str(tmp_path / "t.json")]
    )
    assert code != 0 and "two measurements" in capsys.readouterr().err
