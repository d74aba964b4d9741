"""The docs test's harness (tests/support/docblocks.py) on hand-made documents."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import docblocks
from tests.support.docblocks import Block, DocError, DocSession, Expected, Result

REPO = Path(__file__).resolve().parents[2]


def _doc(tmp_path: Path, text: str) -> list[Block]:
    path = tmp_path / "doc.md"
    path.write_text(text)
    return docblocks.parse(path)


def test_parse_reads_kinds_from_the_line_above_and_attaches_output_samples(tmp_path: Path) -> None:
    blocks = _doc(
        tmp_path,
        "# t\n\n```bash\necho one\n```\n\n<!-- doc-test: output -->\n```text\none\n```\n\n"
        "<!-- doc-test: gpu -->\n```bash\ngpuplace profile --device cuda\n```\n\n"
        "<!-- doc-test: testenv -->\n\n```bash\necho not-marked\n```\n\n"
        "- a list\n  <!-- doc-test: illustration -->\n  ```bash\n  echo indented\n  ```\n",
    )
    assert [(b.line, b.kind, b.text) for b in blocks] == [
        (3, "", "echo one"),
        (13, "gpu", "gpuplace profile --device cuda"),
        (19, "", "echo not-marked"),  # a blank line between comment and fence: the marker does not apply
        (25, "illustration", "echo indented"),
    ]
    assert blocks[0].expected == [Expected(8, ("one",), ())]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<!-- doc-test: gpus -->\n```bash\nx\n```\n", "unknown doc-test kind 'gpus'"),
        ("```sh\nls\n```\n", "fence it ```bash"),
        ("```bash\n.venv/bin/gpuplace plan\n```\n", "not `.venv/bin/gpuplace`"),
        ("```bash\nx\n", "never closed"),
        ("<!-- doc-test: output -->\n```text\nx\n```\n", "no bash block before it"),
        ("```bash\nx\n```\n<!-- doc-test: slow -->\n```python\nx\n```\n", "only ```bash blocks run"),
    ],
)
def test_parse_refuses_what_cannot_run_as_written(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(DocError, match=r"doc\.md:") as e:
        _doc(tmp_path, text)
    assert message in str(e.value)


def test_normalise_keeps_words_and_shapes_and_drops_numbers_ids_and_times() -> None:
    assert docblocks.normalise("chosen shape      1× cpu   (plan e3ac712a62c6a537, fit score 0.997)") == (
        "chosen shape 1× cpu (plan #, fit score #)"
    )
    assert docblocks.normalise("p50 TTFT (ms)  8.69  9.72  +11.8%") == "p50 TTFT (ms) # # #"
    assert docblocks.normalise("run .gpuplace/runs/20261201-174347 on h100-a-0, 0.5×L4-24GB") == (
        "run .gpuplace/runs/#-# on h100-a-0, 0.5×L4-24GB"
    )


def test_match_compares_the_chosen_lines_in_order_and_names_what_is_missing() -> None:
    sample = Expected(1, ("header", "chosen 2× H100 at 20.4 ms", "...", "verdict met; goodput 3.1"), ())
    out = "noise\nheader\nx\nchosen 2× H100 at 19.0 ms\nverdict met; goodput 2.9\n"
    assert docblocks.match(sample, out) == []
    assert docblocks.match(sample, out.replace("2× H100", "1× 2×H100")) == ["chosen 2× H100 at # ms"]
    assert docblocks.match(sample, out.replace("met", "MISSED")) == ["verdict met; goodput #"]
    only = Expected(1, ("a 1", "verdict met", "b 2"), ("verdict",))
    assert docblocks.match(only, "verdict met\n") == []
    assert docblocks.match(Expected(1, ("x...z",), ()), "x and then z\n") == []


def test_a_session_carries_the_environment_and_directory_from_block_to_block(tmp_path: Path) -> None:
    s = DocSession(tmp_path, venv_bin=REPO / ".venv" / "bin")
    try:
        first = s.run(
            Block("d", 1, "", "export GREETING=hi\nmkdir sub && cd sub\necho made > f"), timeout_s=30
        )
        second = s.run(Block("d", 2, "", 'echo "$GREETING from $(basename "$PWD")"; cat f'), timeout_s=30)
        failing = s.run(Block("d", 3, "", "false\necho never"), timeout_s=30)
        piped = s.run(Block("d", 4, "", "false | cat"), timeout_s=30)
    finally:
        s.close()
    assert first.rc == 0 and second.rc == 0
    assert second.output.split() == ["hi", "from", "sub", "made"]
    assert failing.rc == 1 and "never" not in failing.output  # set -e
    assert piped.rc == 1  # pipefail
    assert s.env["PATH"].split(os.pathsep)[0] == str(REPO / ".venv" / "bin")


def test_an_offline_block_leaves_no_proxy_behind(tmp_path: Path) -> None:
    """A remote block runs with a dead proxy and an empty HOME; the blocks after it must not inherit them."""
    s = DocSession(tmp_path, venv_bin=REPO / ".venv" / "bin")
    try:
        remote = s.run(
            Block("d", 1, "remote", 'echo "$https_proxy $HOME"; export LEAK=1'), timeout_s=30, offline=True
        )
        after = s.run(Block("d", 2, "", 'echo "[${https_proxy:-}] [${LEAK:-}] $HOME"'), timeout_s=30)
    finally:
        s.close()
    assert remote.output.split()[0] == "http://127.0.0.1:9"
    assert after.output.split() == ["[]", "[]", os.environ["HOME"]]


def test_a_session_stops_what_its_blocks_left_running_and_a_hang_times_out(tmp_path: Path) -> None:
    s = DocSession(tmp_path, venv_bin=REPO / ".venv" / "bin")
    started = s.run(Block("d", 1, "", "sleep 300 &\necho started"), timeout_s=30)
    assert started.rc == 0 and started.seconds < 10  # the background job does not hold the block open
    # `sleep 300 &` forks a copy of the block's shell that then execs sleep: wait out that moment
    deadline = time.monotonic() + 10
    while [cmd for _, cmd in s.leftover()] != ["sleep 300"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [cmd for _, cmd in s.leftover()] == ["sleep 300"]
    start = time.monotonic()
    hung = s.run(Block("d", 2, "", "sleep 300"), timeout_s=1)
    assert hung.timed_out and time.monotonic() - start < 10
    notes = s.close()
    assert any("sleep 300" in n for n in notes) and s.leftover() == []


def _result(rc: int, output: str, timed_out: bool = False) -> Result:
    return Result(Block("d", 1, "gpu", "x"), rc, output, 1.0, timed_out)


def test_a_refusal_must_be_clear() -> None:
    assert (
        docblocks.refusal_problem(_result(2, "device='cuda': CUDA was requested but ..."), kind="gpu") is None
    )
    assert "traceback" in str(
        docblocks.refusal_problem(_result(1, "Traceback (most recent call last):\n"), kind="gpu")
    )
    assert "not installed" in str(
        docblocks.refusal_problem(_result(127, "kubectl: command not found"), kind="remote")
    )
    assert "hung" in str(docblocks.refusal_problem(_result(-9, "", timed_out=True), kind="remote"))
    assert "not a gpu block" in str(docblocks.refusal_problem(_result(0, "ok"), kind="gpu"))
    assert "CUDA / a GPU" in str(docblocks.refusal_problem(_result(2, "something failed"), kind="gpu"))
    assert docblocks.refusal_problem(_result(2, "host https://x does not answer"), kind="remote") is None


def test_what_a_doc_leaves_behind_is_checked_against_the_clones_gitignore(tmp_path: Path) -> None:
    (tmp_path / "profile.parquet").write_text("")
    (tmp_path / ".gpuplace").mkdir()
    (tmp_path / "stray-output").mkdir()
    assert docblocks.not_ignored(tmp_path, REPO) == ["stray-output/"]


def _run_doc(doc: Path, scratch: Path) -> subprocess.CompletedProcess[str]:
    """tests/docs/test_docs.py's run_doc on a hand-made document, as docs/x.md, in a process of its own."""
    code = (
        "import sys, pathlib; sys.path.insert(0, sys.argv[1]); import tests.docs.test_docs as t; "
        "t.REPO = pathlib.Path(sys.argv[1]); "
        "t._blocks = lambda d: t.docblocks.parse(pathlib.Path(sys.argv[2]), name='docs/x.md'); "
        "t.run_doc('docs/x.md', pathlib.Path(sys.argv[3]))"
    )
    return subprocess.run(
        [sys.executable, "-c", code, str(REPO), str(doc), str(scratch)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_docs_test_names_the_failing_block(tmp_path: Path) -> None:
    """A failing document fails its test with the document, the line and the end of the output."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "x.md").write_text(
        "```bash\necho fine\n```\n\n```bash\necho boom >&2\nexit 3\n```\n"
    )
    proc = _run_doc(tmp_path / "docs" / "x.md", tmp_path / "s")
    assert proc.returncode != 0
    assert "docs/x.md:5 (block 2 of 2): exited 3" in proc.stderr + proc.stdout
    assert "boom" in proc.stderr + proc.stdout


def test_a_comment_may_name_the_venv(tmp_path: Path) -> None:
    text = '```bash\nexport X="$(command -v gpuplace)"   # the clone (.venv/bin/gpuplace\'s)\n```\n'
    blocks = _doc(tmp_path, text)
    assert blocks[0].text.startswith("export X=")


# A server as MLflow's `mlflow ui` is one: a parent whose worker holds the listening socket (uvicorn), so
# that a `kill` of the parent alone leaves the worker on the port.
_SERVER = """
import socket, subprocess, sys, time
sock = socket.socket()
sock.bind(("127.0.0.1", 0))
sock.listen()
worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], pass_fds=[sock.fileno()])
open(sys.argv[1], "w").write(str(sock.getsockname()[1]))
sock.close()
time.sleep(300)
"""
_START = "python3 server.py port &\nuntil [ -s port ]; do sleep 0.1; done\n"
_PARENT_ONLY = _START + "kill %1\n"  # docs/tracking.md's `mlflow ui` block, as it failed CI (issue 33)
_WHOLE_GROUP = (
    "set -m\n" + _START + "kill -- -$!\n"
    'while (: </dev/tcp/127.0.0.1/"$(cat port)") 2>/dev/null; do sleep 0.1; done\n'
)


def test_a_block_that_stops_only_a_servers_parent_is_named_with_the_port_its_worker_holds(
    tmp_path: Path,
) -> None:
    s = DocSession(tmp_path, venv_bin=REPO / ".venv" / "bin")
    (s.work / "server.py").write_text(_SERVER)
    try:
        parent_only = Block("d", 1, "", _PARENT_ONLY)
        assert s.run(parent_only, timeout_s=60).rc == 0
        port = int((s.work / "port").read_text())
        left = s.left_by(parent_only)
        assert [p.ports for p in left] == [(port,)] and "time.sleep(300)" in left[0].cmd
        assert f"listening on port {port}" in str(left[0])
        whole = Block("d", 2, "", "rm port\n" + _WHOLE_GROUP)
        assert s.run(whole, timeout_s=60).rc == 0
        assert s.left_by(whole) == []
        assert [p.pid for p in s.left_by(parent_only)] == [left[0].pid]  # one block's, not another's
    finally:
        s.close()
    assert s.leftover() == []


@pytest.mark.parametrize(("stop", "fails"), [(_PARENT_ONLY, True), (_WHOLE_GROUP, False)])
def test_the_docs_test_fails_a_block_that_leaves_a_port_taken(tmp_path: Path, stop: str, fails: bool) -> None:
    """issue 33: docs/tracking.md stopped `mlflow ui` with `kill %1`; its workers kept port 5000 and the
    next block's MLflow server failed. The docs test names such a block, and passes the group stopped."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "x.md").write_text(
        f"```bash\nmkdir -p out && cd out\ncat > server.py <<'EOF'{_SERVER}EOF\n{stop}```\n"
    )
    proc = _run_doc(tmp_path / "docs" / "x.md", tmp_path / "s")
    out = proc.stdout + proc.stderr
    assert (proc.returncode != 0) is fails, out
    if fails:
        assert "docs/x.md:1 (block 1 of 1): it left pid" in out and "listening on port" in out
        assert "kill -- -$!" in out
