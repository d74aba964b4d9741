"""The command line for users: subcommands in the order of the flow, help without maintainer markup,
every option explained, and a quiet main-job console that keeps the full log in a file."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from gpuplace.cli import COMMANDS, build_parser
from gpuplace.jobs.console import TaskConsole, quiet_console

FLOW = ["profile", "inventory", "plan", "deploy", "teardown", "loadtest", "compare", "report"]


def test_subcommands_follow_the_flow_then_jobs_then_tools() -> None:
    names = [c.name for c in COMMANDS]
    assert names[: len(FLOW)] == FLOW
    assert names[len(FLOW) : len(FLOW) + 3] == ["run", "compile", "submit"]
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("command", [c.name for c in COMMANDS])
def test_help_is_written_for_users(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args([command, "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert ":mod:" not in text and ":class:" not in text and "``" not in text
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]  # type: ignore[union-attr]
    undocumented = [a.option_strings for a in sub._actions if a.option_strings and not a.help]
    assert not undocumented, f"gpuplace {command}: options without help: {undocumented}"


def test_plan_help_shows_defaults_that_say_something(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["plan", "--help"])
    text = re.sub(r"\s+", " ", capsys.readouterr().out)
    assert "output length, same forms (default: 128)" in text
    assert "(default: None)" not in text and "(default: )" not in text


def test_task_console_prints_one_line_per_task_and_progress_and_logs_everything(tmp_path: Path) -> None:
    out = io.StringIO()
    with (tmp_path / "runner.log").open("w") as log:
        console = TaskConsole(log, out)
        console.write("12:00:00.1 - INFO - Executing task \x1b[96m'plan-placement'\x1b[0m\n")
        console.write('    {\n      "inputs": {}\n    }\n')
        console.write("    load test: 3/20 [0:00:02 elapsed, ETA 0:00:11] ok\n")
        console.write("12:00:03.0 - INFO - Task \x1b[96m'plan-placement'\x1b[0m finished with status ")
        console.write("\x1b[92mSUCCESS\x1b[0m\n")
        console.write("Task 'load-test' finished with status FAILURE\n")
    shown = out.getvalue().splitlines()
    assert shown[0].split() == ["plan-placement", "started"]
    assert shown[1].strip().startswith("load test: 3/20")
    assert re.match(r"\s+plan-placement\s+finished in \d+\.\d s", shown[2])
    assert "FAILED (FAILURE)" in shown[3]
    assert len(shown) == 4
    assert '"inputs"' in (tmp_path / "runner.log").read_text()


def test_task_console_keeps_the_exception_a_failing_task_raised(tmp_path: Path) -> None:
    """The main job's failure names what the task raised, not only that it failed (CI shows no log)."""
    with (tmp_path / "runner.log").open("w") as log:
        console = TaskConsole(log, io.StringIO())
        console.write("    Traceback (most recent call last):\n")
        console.write('      File "/x/executor.py", line 453, in execute\n')
        console.write("        result = self.func(**func_kwargs)\n")
        console.write(
            "    gpuplace.profiling.hardware.MeasurementDisturbed: memory bandwidth probe on cpu: ...\n"
        )
        console.write('    {\n      "note": "later chatter"\n    }\n')
    assert (
        console.last_error
        == "gpuplace.profiling.hardware.MeasurementDisturbed: memory bandwidth probe on cpu: ..."
    )


def test_quiet_console_sends_warnings_to_the_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import warnings

    with quiet_console(tmp_path / "runner.log"):
        warnings.warn("may need the DockerRunner", RuntimeWarning, stacklevel=1)
        print("chatter")
    assert "DockerRunner" in (tmp_path / "runner.log").read_text()
    assert "chatter" in (tmp_path / "runner.log").read_text()
