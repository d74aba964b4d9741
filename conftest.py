"""Shared fixtures (the real kfp local runner, the shared data traces, a real tiny inference server) and how
``make test`` spreads the tests over pytest-xdist workers (docs/development.md, "How make test runs").

Under ``pytest -n N --dist loadgroup`` a work unit goes to one worker whole (tests/support/xdist_groups.py).
Every test has a group here, so a module's fixtures start once: the docs tests form one unit (they use
fixed ports and a machine-wide lock), the real-node tests another (one real node per machine, bridge
``gpuplace0``), the tests marked ``measure`` (they time a live engine and fit or compare what they measured)
a third, and every other module is its own unit. ``make test`` deselects ``measure`` from the parallel phase
and runs those tests after it in one process, alone on the machine. Workers get their own local-deployment
registry (``GPUPLACE_STATE_DIR``), as two workers may deploy the same plan id at once. Without xdist the
groups change nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from gpuplace.types import DeploymentRecord

REPO = Path(__file__).resolve().parent
SHARED_DATA = Path(os.environ.get("GPUPLACE_SHARED_DATA", REPO.parent / "shared" / "data"))
SHARED_CRDS = Path(os.environ.get("GPUPLACE_SHARED_CRDS", REPO.parent / "shared" / "crds"))  # upstream CRDs

# controlplane / kube_api / kube_namespace: the real local Kubernetes control plane (docs/testenv.md)
pytest_plugins = ("gpuplace.testenv.pytest_plugin", "pytester")

# The units that take longest start first (a worker takes the next unit in collection order), so no long
# unit is left for the end; unit tests, short and many, fill the gaps last.
_FIRST = ("docs", "realnode", "measure")
_STATE_DIR = pytest.StashKey[str]()
_GROUPS_FILE = pytest.StashKey[str]()
_GROUPS_KEY = "gpuplace_groups_file"


def _group(item: pytest.Item) -> str:
    path = item.nodeid.split("::", 1)[0]
    mark = item.get_closest_marker("xdist_group")
    if mark and mark.args:
        return str(mark.args[0])
    if any(item.get_closest_marker(m) for m in ("docs", "docs_slow")):
        return "docs"
    if item.get_closest_marker("realnode"):
        return "realnode"
    if item.get_closest_marker("measure"):
        return "measure"
    return path


def _rank(group: str) -> int:
    if group in _FIRST:
        return _FIRST.index(group)
    return len(_FIRST) + (1 if group.startswith("tests/unit/") else 0)


@pytest.hookimpl(wrapper=True)
def pytest_collection_finish(session: pytest.Session) -> Iterator[None]:
    """In an xdist worker, after every plugin has ordered the items (pytest itself regroups them by
    fixture): order the units, stably, and write each test's group where the controller's scheduler
    reads it (tests/support/xdist_groups.py), before the worker sends its collection."""
    workerinput = getattr(session.config, "workerinput", None)
    if workerinput is not None and _GROUPS_KEY in workerinput:
        session.items.sort(key=lambda i: _rank(_group(i)))
        path = Path(workerinput[_GROUPS_KEY])
        part = path.with_name(f"{path.name}.{workerinput['workerid']}")
        part.write_text(json.dumps({i.nodeid: _group(i) for i in session.items}))
        part.replace(path)
    return (yield)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    if _GROUPS_FILE in node.config.stash:  # only under --dist loadgroup; plain -n N spreads tests one by one
        node.workerinput[_GROUPS_KEY] = node.config.stash[_GROUPS_FILE]


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getvalue("dist") != "loadgroup":
        return None
    from tests.support.xdist_groups import GroupScheduling

    return GroupScheduling(config, log, Path(config.stash[_GROUPS_FILE]))


def pytest_configure(config: pytest.Config) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker and "GPUPLACE_STATE_DIR" not in os.environ:
        os.environ["GPUPLACE_STATE_DIR"] = tempfile.mkdtemp(prefix=f"gpuplace-state-{worker}-")
        config.stash[_STATE_DIR] = os.environ["GPUPLACE_STATE_DIR"]
    if not worker and getattr(config.option, "dist", "no") == "loadgroup":
        config.stash[_STATE_DIR] = tempfile.mkdtemp(prefix="gpuplace-xdist-")
        config.stash[_GROUPS_FILE] = str(Path(config.stash[_STATE_DIR]) / "groups.json")


def pytest_unconfigure(config: pytest.Config) -> None:
    if _STATE_DIR in config.stash:
        shutil.rmtree(config.stash[_STATE_DIR], ignore_errors=True)


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


@pytest.fixture(scope="session")
def tiny_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DeploymentRecord]:
    """One real ``transformers serve`` of the ``tiny`` preset on this CPU, shared by the session's load
    tests that need a server but inject no fault; stopped at the end of the session."""
    from gpuplace.deploy.local import deploy_local, teardown_local

    workdir = tmp_path_factory.mktemp("tiny-server")
    record = deploy_local("tiny", workdir=workdir, device="cpu", startup_timeout_s=240)
    try:
        yield record
    finally:
        teardown_local(record)
