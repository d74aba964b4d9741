"""One real node per machine, among tests: the real-node tests and a document's ``--real-node`` block wait for
each other (``gpuplace.testenv.pytest_plugin.one_real_node``) where ``testenv up --real-node`` would refuse
the second. Real file locks between real processes; no node is started."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gpuplace.testenv.pytest_plugin import one_real_node

HOLD = """
import sys, time
from pathlib import Path
from gpuplace.testenv.pytest_plugin import one_real_node
with one_real_node(lock_path=Path(sys.argv[1]), who="holder"):
    print("held", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def _holder(lock: Path, seconds: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(lock), str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_holder_waits_says_so_and_times_out_naming_the_lock(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    lock = tmp_path / "realnode.lock"
    proc = _holder(lock, 30)
    try:
        held = one_real_node(lock_path=lock, timeout_s=1.5, who="docs/testenv.md")
        with (
            pytest.raises(TimeoutError, match=r"docs/testenv\.md: the machine's real node stayed held") as e,
            held,
        ):
            pytest.fail("entered while another process held the real node")
        assert str(lock) in str(e.value)
        assert "docs/testenv.md: waiting for the real node another test holds" in capsys.readouterr().err
    finally:
        proc.kill()
        proc.wait()


def test_the_waiter_goes_on_once_the_holder_lets_go(tmp_path: Path) -> None:
    lock = tmp_path / "realnode.lock"
    proc = _holder(lock, 2)
    t0 = time.monotonic()
    with one_real_node(lock_path=lock, timeout_s=60):
        waited = time.monotonic() - t0
    proc.wait()
    assert waited >= 0.5  # it did wait for the holder, and then entered
    with one_real_node(lock_path=lock, timeout_s=0.1):  # released on exit: free at once
        pass


@pytest.mark.parametrize(("also", "holds"), [((), False), (("testenv",), True)])
def test_the_docs_test_holds_the_real_node_for_a_document_whose_run_starts_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, also: tuple[str, ...], holds: bool
) -> None:
    from tests.docs import test_docs
    from tests.support import docblocks

    doc = tmp_path / "node.md"
    doc.write_text(
        "# a doc\n\n```bash\ntrue\n```\n\n<!-- doc-test: testenv -->\n```bash\necho --real-node\n```\n"
    )
    entered: list[str] = []

    @contextmanager
    def recorder(*, who: str, **_: object) -> Iterator[None]:
        entered.append(who)
        yield

    monkeypatch.setattr(test_docs, "_blocks", lambda name: docblocks.parse(doc, name=name))
    monkeypatch.setattr(test_docs, "one_real_node", recorder)
    monkeypatch.setattr(test_docs, "_run_blocks", lambda *a: [])
    test_docs.run_doc("node.md", tmp_path / "scratch", also=also)
    assert entered == (["node.md"] if holds else [])


SUITE = """
import fcntl, os
from pathlib import Path
import pytest

def free():
    with open(os.environ["GPUPLACE_REALNODE_LOCK"], "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(f, fcntl.LOCK_UN)
        return True

@pytest.fixture(scope="module")
def uses_the_node(real_node_slot):
    yield
    assert not free()  # a module's teardown still has the node: it is given back after it

@pytest.mark.usefixtures("uses_the_node")
def test_a():
    assert not free()

@pytest.mark.usefixtures("real_node_slot")
def test_b():
    assert not free()

def test_c():
    assert free()  # given back after the last real-node test in a row, not at the session's end

@pytest.mark.usefixtures("real_node_slot")
def test_d():
    assert not free()  # taken again by a later test
"""


def test_the_node_is_given_back_after_the_last_real_node_test_in_a_row(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real pytest session with the plugin: the lock (what `realnode_controlplane` depends on, so the
    control plane stops first) is free for the test after the real-node tests, and held again by a later
    one."""
    monkeypatch.setenv("GPUPLACE_REALNODE_LOCK", str(tmp_path / "realnode.lock"))
    pytester.makepyfile(test_suite=SUITE)
    result = pytester.runpytest_subprocess("-p", "gpuplace.testenv.pytest_plugin", "-q")
    result.assert_outcomes(passed=4)
