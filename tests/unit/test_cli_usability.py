"""What a newcomer trips on (issue 26): help that says what it needs, flags that do what the docs say."""

from __future__ import annotations

import socket
from dataclasses import replace
from pathlib import Path

import pytest

from gpuplace.cli import build_parser, main
from gpuplace.errors import InvalidInput
from gpuplace.types import Distribution
from tests.support.sample import sample_profile


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    return " ".join(capsys.readouterr().out.split())


def test_submit_and_compile_help_name_the_pipelines(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("submit", "compile"):
        text = _help(capsys, command)
        assert "llm_placement" in text and "orchestration_comparison" in text, command


def test_testenv_up_help_says_which_fleet_it_starts(capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys, "testenv", "up")
    assert "(default: mixed-a100-h100-l4" in text and "'none' for no simulated nodes" in text
    assert "--state-dir" in text


def test_testenv_takes_state_dir_after_the_verb_too() -> None:
    parser = build_parser()
    after = parser.parse_args(["testenv", "up", "--state-dir", "/x", "--fleet", "h100-nvlink"])
    before = parser.parse_args(["testenv", "--state-dir", "/y", "up"])
    assert after.state_dir == "/x" and before.state_dir == "/y"
    assert parser.parse_args(["testenv", "status"]).state_dir is None


def test_extender_flags_show_their_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    serve = _help(capsys, "extender", "serve")
    assert "address to listen on (default: 127.0.0.1)" in serve
    config = _help(capsys, "extender", "config")
    assert "(default: 5.0)" in config and "(default: default-scheduler)" in config


def test_catalog_models_shows_a_tiny_model_in_thousands(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["catalog", "models"]) == 0
    out = capsys.readouterr().out
    tiny = next(line for line in out.splitlines() if line.startswith("tiny "))
    assert "0.000B" not in tiny and "K params" in tiny
    assert "8.03B params" in next(line for line in out.splitlines() if line.startswith("llama-3.1-8b "))


def test_loadtest_refuses_rate_zero(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["loadtest", "--endpoint", "http://127.0.0.1:9", "--rate", "0", "--out", str(tmp_path)]) == 2
    assert "rate=0.0: must be positive" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_deploy_port_is_for_the_local_target_and_must_be_free(tmp_path: Path) -> None:
    from gpuplace.deploy import deploy
    from gpuplace.deploy.local import deploy_local
    from tests.support.plans import sample_plan, write_sample_plan

    plan = write_sample_plan(tmp_path / "plan", sample_plan(), {})
    with pytest.raises(InvalidInput, match="port=8000: is for --target local only"):
        deploy(plan, target="kubernetes", port=8000)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(InvalidInput, match=f"port={port}: is in use"):
            deploy_local("tiny", workdir=tmp_path / "w", port=port)
    assert build_parser().parse_args(["deploy", "p", "--target", "local", "--port", "8000"]).port == 8000


def test_rbac_can_print_its_namespace_first(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rbac", "--namespace", "llm", "--with-namespace"]) == 0
    docs = capsys.readouterr().out.split("\n---\n")
    assert docs[0].strip() == "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: llm"
    assert "kind: ServiceAccount" in docs[1]


def test_the_mlflow_ui_command_starts_one_worker_and_both_runs_share_one_store() -> None:
    from gpuplace.jobs.main import run_store
    from gpuplace.steps.compare import MlflowOptions
    from gpuplace.tracking.config import DEFAULT_WORKDIR, local_config, ui_command

    assert ui_command("sqlite:///x.db", "/a").endswith("--default-artifact-root /a --workers 1")
    assert "--workers 1" in local_config(Path("/tmp/gpuplace-ui-test")).describe()
    # `run` passes run_store() to llm_placement; orchestration_comparison's compare_paths uses its default,
    # relative to the same run directory: both must be the one layout <run>/.gpuplace/mlflow
    assert run_store(Path("r")) == Path("r") / DEFAULT_WORKDIR == Path("r/.gpuplace/mlflow")
    assert Path(MlflowOptions().workdir) == DEFAULT_WORKDIR


def test_the_profile_table_says_what_its_columns_are() -> None:
    from gpuplace.profiling.summary import format_markdown, format_table

    profile = sample_profile(batch_sizes=(4,), prompts=(128,))
    point = profile.results[0]
    # a generation's mean step (TPOT) well apart from the pooled single steps' p50 and p99
    point = replace(
        point,
        tpot=Distribution.of([0.0235] * 3),
        decode_step=Distribution.of([0.00064] * 98 + [0.26, 0.26]),
    )
    table = format_table(replace(profile, results=(point,)))
    header, _, row, legend = table.splitlines()[1:5]
    columns = [c.strip() for c in header.split("  ") if c.strip()]
    values = [c.strip() for c in row.split("  ") if c.strip()]
    cells = dict(zip(columns, values, strict=True))
    assert (
        cells["TPOT p50 ms"] == "23.50"
        and cells["step p50 ms"] == "0.64"
        and cells["step p99 ms"] == "260.00"
    )
    assert legend.startswith("TTFT = prefill") and "TPOT = vLLM's (e2e − TTFT)/(output − 1)" in legend
    assert "step = single decode steps" in format_markdown(replace(profile, results=(point,)))


def test_a_comparison_of_the_synthetic_sample_says_so_and_report_prints_a_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.support.sample import write_sample_inputs

    s = write_sample_inputs(tmp_path / "sample", requests=40)
    out = tmp_path / "cmp"
    paths = [f"--{p}-{what}={where[p]}" for p in ("native", "kubeflow")
             for what, where in (("deployment", s.deployments), ("loadtest", s.loadtests))]  # fmt: skip
    argv = ["compare", *paths, "--plan", str(s.plan), "--inventory", "h100-nvlink", "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    # the verdict, noise-aware: the sample's 40 requests a path do not tell the paths apart
    assert printed.startswith("note: Synthetic inputs") and "No difference beyond noise" in printed
    assert "> Synthetic inputs" in (out / "report.md").read_text()
    assert "Synthetic inputs" in (out / "report.html").read_text()
    assert main(["report", str(out / "comparison.json")]) == 0
    summary = capsys.readouterr().out
    assert "No difference beyond noise" in summary and f"report     : {out / 'report.md'}" in summary
    assert not summary.lstrip().startswith("{")  # a summary, not the raw JSON it printed before
