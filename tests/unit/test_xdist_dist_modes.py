"""conftest.py's test grouping under pytest-xdist, run as ``make test`` and a user would run it: a real
``pytest -n 2`` in a subprocess. ``--dist loadgroup`` uses the groups; any other mode (plain ``-n 2`` is
``--dist load``) must run without them, where conftest.py once stopped the whole run with an INTERNALERROR
(a KeyError for the groups file that only ``loadgroup`` writes)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TARGET = "tests/unit/test_job_outputs.py"  # small and fast


@pytest.mark.parametrize("dist", ["load", "loadgroup", "loadscope"])
def test_two_workers_run_under_every_dist_mode(dist: str) -> None:
    # a fresh run, not a worker of this one (make test runs this test in an xdist worker)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_XDIST_", "GPUPLACE_STATE_DIR"))}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", dist, "-q", "-p", "no:cacheprovider", TARGET],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = result.stdout + result.stderr
    assert result.returncode == 0, out[-3000:]
    assert "INTERNALERROR" not in out
    assert " passed" in out
