"""``make test``'s two pytest phases (``make test-pytest``), run by the real GNU make on the project's
Makefile: the parallel phase without the tests marked ``measure``, then those alone, and the exit status
both decide.

pytest stands in here, and only pytest: ``BIN`` points at a script that records its arguments and exits
with the status the test gives each phase, since running the real suite twice inside the suite cannot be
done. ``STAMP`` points at a fresh file, so make does not reinstall the venv."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _make(tmp_path: Path, parallel: int, measure: int, pytest_args: str = "") -> tuple[int, list[str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    calls = tmp_path / "calls"
    fake = bin_dir / "python"
    fake.write_text(
        "#!/bin/sh\n"
        f'printf "%s\\n" "$*" >> {calls}\n'
        f'case "$*" in *"and measure"*) exit {measure};; *) exit {parallel};; esac\n'
    )
    fake.chmod(0o755)
    stamp = tmp_path / "stamp"
    stamp.touch()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    result = subprocess.run(
        ["make", "-s", "test-pytest", f"BIN={bin_dir}", f"STAMP={stamp}", f"PYTEST_ARGS={pytest_args}"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return result.returncode, calls.read_text().splitlines() if calls.exists() else []


def test_the_measurements_run_alone_after_the_parallel_phase(tmp_path: Path) -> None:
    rc, calls = _make(tmp_path, 0, 0)
    assert rc == 0
    assert len(calls) == 2
    parallel, measure = calls
    assert "-n 2 --dist loadgroup" in parallel and "and not measure" in parallel
    assert "-n " not in measure and "and measure" in measure
    assert all("not gpu and not docs_slow" in c for c in calls)


@pytest.mark.parametrize(
    ("parallel", "measure", "pytest_args", "passes"),
    [
        (1, 0, "", False),  # the parallel phase failed: the measurements still run, make fails
        (0, 1, "", False),  # a measurement failed
        (0, 5, "", False),  # no measurement collected on a default run: a check that cannot run fails
        (5, 0, "", False),
        (0, 5, "tests/unit", True),  # a narrowed run without measurements passes
        (5, 0, "tests/integration/test_engine_steps_local.py", True),
        (5, 1, "tests/integration/test_engine_steps_local.py", False),
        (5, 5, "-k nothing_matches", False),  # nothing collected in either phase fails
    ],
)
def test_either_phase_failing_fails_make_test(
    tmp_path: Path, parallel: int, measure: int, pytest_args: str, passes: bool
) -> None:
    rc, calls = _make(tmp_path, parallel, measure, pytest_args)
    assert len(calls) == 2  # the second phase runs whatever the first did
    assert (rc == 0) == passes, rc
    if pytest_args:
        assert all(c.endswith(pytest_args) for c in calls)
