"""pytest fixtures for a real local control plane: ``controlplane`` (one per test session), ``kube_api``
(cluster-admin :class:`~gpuplace.k8s.Api`) and ``kube_namespace`` (a fresh namespace per test), and
``realnode_controlplane`` (another, with a real node, for the tests that run containers), and
``real_node_slot``/``one_real_node``, which hold the machine's one real node for a test.

Enable with ``pytest_plugins = ("gpuplace.testenv.pytest_plugin",)`` in a conftest.py (this repository's
root conftest does) or ``pytest -p gpuplace.testenv.pytest_plugin``. The cluster starts on first use with
the simulated fleets in ``GPUPLACE_TESTENV_FLEETS`` (comma-separated fleet names or paths; default
``h100-nvlink,mixed-a100-h100-l4``) and stops at session end. Missing binaries fail the tests that need
them with the command that builds them; they are never skipped. A failed test that used the cluster gets
the path of the control-plane logs in its report, and those logs stay in pytest's temporary directory.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from gpuplace.testenv import binaries
from gpuplace.testenv.controlplane import ControlPlane

if TYPE_CHECKING:
    from gpuplace.k8s import Api

DEFAULT_FLEETS = "h100-nvlink,mixed-a100-h100-l4"
# one per machine; GPUPLACE_REALNODE_LOCK moves it (the plugin's own test runs a suite against another)
REAL_NODE_LOCK = Path(
    os.environ.get("GPUPLACE_REALNODE_LOCK") or Path(tempfile.gettempdir()) / "gpuplace-realnode.lock"
)


@contextlib.contextmanager
def one_real_node(
    *, timeout_s: float = 3600.0, who: str = "this test", lock_path: Path = REAL_NODE_LOCK
) -> Iterator[None]:
    """Hold the machine's one real node for a test (a file lock): ``gpuplace testenv up --real-node`` refuses
    a second node, so a test that starts one first waits for the test that holds it (under pytest-xdist the
    real-node tests' unit on one worker, a document's ``--real-node`` block on the other). Waiting is said
    on stderr; past ``timeout_s`` it raises ``TimeoutError`` naming the lock."""
    with open(lock_path, "a") as lock:
        deadline = time.monotonic() + timeout_s
        said = False
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise TimeoutError(
                        f"{who}: the machine's real node stayed held by another test for {timeout_s:.0f} s "
                        f"(lock {lock_path}); one real node per machine"
                    ) from None
                if not said:
                    note = f"{who}: waiting for the real node another test holds ({lock_path})"
                    print(note, file=sys.stderr)
                    said = True
                time.sleep(1.0)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def real_node_slot() -> Iterator[None]:
    """The machine's one real node, held for this session's real-node tests (:func:`one_real_node`) and
    given back, with the control plane that runs it, after the last of them that runs in a row
    (:func:`pytest_runtest_teardown`), not at the session's end: a document's ``--real-node`` block on
    the other worker waits only for the real-node tests. A later test that asks again takes it again."""
    with one_real_node(who="the real-node tests", lock_path=REAL_NODE_LOCK):
        yield


def _holds_real_node(item: pytest.Item | None) -> bool:
    return item is not None and "real_node_slot" in getattr(item, "fixturenames", ())


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After the last real-node test in a row (the next test, if any, does not hold the node) and its
    module's teardown: finish ``real_node_slot`` now, which finishes what depends on it first
    (``realnode_controlplane``: the control plane and its node stop), then frees the lock."""
    result = yield
    if _holds_real_node(item) and not _holds_real_node(nextitem):
        request, info = (
            getattr(item, "_request", None),
            getattr(item, "_fixtureinfo", None),
        )  # a pytest.Function
        for fixturedef in info.name2fixturedefs.get("real_node_slot", ()) if info is not None else ():
            fixturedef.finish(request)
    return result


@pytest.fixture(scope="session")
def controlplane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A running control plane with the simulated fleets added (session scope)."""
    from gpuplace.testenv.env import add_fleet, load_fleet, stop, up

    try:
        binaries.resolve()
    except binaries.BinariesMissing as e:
        pytest.fail(f"the control-plane tests need the Kubernetes binaries: {e}", pytrace=False)
    state_dir = tmp_path_factory.mktemp("controlplane")
    cp = up(None, state_dir=state_dir)
    try:
        for spec in filter(None, os.environ.get("GPUPLACE_TESTENV_FLEETS", DEFAULT_FLEETS).split(",")):
            add_fleet(cp, load_fleet(spec.strip()))
        yield cp
    finally:
        stop(cp)


@pytest.fixture(scope="session")
def realnode_controlplane(
    real_node_slot: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    """A second control plane (session scope) with the h100-nvlink fleet and a real node
    (:mod:`gpuplace.testenv.realnode`: root, ``make node-deps``) holding the images ``make images`` built."""
    from gpuplace.testenv.env import load_fleet, stop, up

    try:
        binaries.resolve(binaries.NAMES + binaries.NODE_NAMES)
    except binaries.BinariesMissing as e:
        pytest.fail(f"the real-node tests need the Kubernetes binaries: {e}", pytrace=False)
    cp = up(load_fleet("h100-nvlink"), state_dir=tmp_path_factory.mktemp("realnode"), real_node=True)
    try:
        yield cp
    finally:
        stop(cp)


@pytest.fixture(scope="session")
def kube_api(controlplane: ControlPlane) -> Iterator[Api]:
    from gpuplace.k8s import Api, connect

    api = Api(connect(controlplane.kubeconfig))
    yield api
    api.client.close()


@pytest.fixture
def kube_namespace(kube_api: Api, request: pytest.FixtureRequest) -> Iterator[str]:
    """A new namespace for one test, deleted afterwards (its pods go with it)."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    kube_api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    # Pods are refused until the namespace's default ServiceAccount exists.
    kube_api.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}, name)
    yield name
    kube_api.delete({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome: Any = yield
    report = outcome.get_result()
    if report.failed and "controlplane" in getattr(item, "fixturenames", ()):
        cp = item.funcargs.get("controlplane") if hasattr(item, "funcargs") else None
        if isinstance(cp, ControlPlane):
            report.sections.append(("control plane", f"logs kept in {cp.log_dir}"))
