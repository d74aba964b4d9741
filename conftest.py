"""Shared fixtures: the real kfp local runner, and the shared data traces."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent
SHARED_DATA = Path(os.environ.get("GPUPLACE_SHARED_DATA", REPO.parent / "shared" / "data"))

# controlplane / kube_api / kube_namespace: the real local Kubernetes control plane (docs/testenv.md)
pytest_plugins = ("gpuplace.testenv.pytest_plugin",)


@pytest.fixture
def kfp_local(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """kfp.local with the SubprocessRunner in this interpreter (no venv, no image): the real runner.

    Yields the pipeline root where task outputs land. The working directory moves to tmp_path
    because the runner writes relative paths.
    """
    from kfp import local

    root = tmp_path / "kfp-outputs"
    monkeypatch.chdir(tmp_path)
    # Task subprocesses start in tmp_path: let test-only components import tests.support too.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH")))))
    local.init(runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(root), raise_on_error=True)
    yield root
