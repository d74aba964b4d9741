"""The docs, run as written: every fenced ``bash`` block of README.md and docs/*.md, in order, per document.

Each document runs in its own scratch directory (``../shared`` beside it is the data directory, as beside
a clone), with ``.venv/bin`` first on PATH, against the state its earlier blocks left
(tests/support/docblocks.py has the convention). What runs where:

- ``make test`` / ``make docs-test``: the blocks without a marker and the ``testenv`` blocks (a real local
  control plane from ``gpuplace testenv``, the Kubernetes binaries from ``make k8s-bins``), each document run
  once; ``gpu`` blocks are checked for the clear error they give without CUDA (run as the rest where CUDA
  exists), ``remote`` blocks for their offline refusal;
- ``make docs-test-slow``: the documents with ``slow`` blocks again, those included;
- ``illustration`` blocks never run.

A document with a ``--real-node`` block among those it runs first holds the machine's one real node
(``gpuplace.testenv.pytest_plugin.one_real_node``), waiting while the real-node tests hold it.

A block that leaves a process listening on a TCP port fails, naming it: a server a document starts is
stopped, with its whole process group, by the block that started it.

A failure names the document, the block's line, the command, its exit status and the end of its output.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import re
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from gpuplace.testenv.pytest_plugin import one_real_node
from tests.support import docblocks
from tests.support.docblocks import Block, DocSession

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("GPUPLACE_SHARED_DATA", REPO.parent / "shared" / "data")).parent
DOCS = ["README.md", *sorted(p.relative_to(REPO).as_posix() for p in (REPO / "docs").glob("*.md"))]
BLOCK_TIMEOUT_S = float(os.environ.get("GPUPLACE_DOCS_BLOCK_TIMEOUT_S", "600"))
# a slow block is one over ~3 minutes; the real-node comparison takes 10-12 minutes on 2 cores
SLOW_BLOCK_TIMEOUT_S = float(os.environ.get("GPUPLACE_DOCS_SLOW_BLOCK_TIMEOUT_S", "1800"))
REFUSAL_TIMEOUT_S = 120.0


def _blocks(doc: str) -> list[Block]:
    return docblocks.parse(REPO / doc, name=doc)


def _docs_with(kind: str) -> list[str]:
    """The documents with blocks of this kind (and those the harness cannot parse: they fail by name)."""
    out = []
    for doc in DOCS:
        try:
            if any(b.kind == kind for b in _blocks(doc)):
                out.append(doc)
        except docblocks.DocError:
            out.append(doc)
    return out


@functools.cache
def _has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def _show(block: Block) -> str:
    text = block.text if len(block.text) < 1500 else block.text[:1500] + "\n..."
    return "\n".join("    " + s for s in text.splitlines())


def _timeout(block: Block) -> float:
    return SLOW_BLOCK_TIMEOUT_S if block.kind == "slow" else BLOCK_TIMEOUT_S


def run_doc(doc: str, scratch: Path, *, also: Iterable[str] = ()) -> list[str]:
    """Run one document's blocks in order (the default ones and those of the kinds in ``also``).

    Returns the timing lines; raises pytest's failure naming the block on the first one that fails.
    """
    try:
        blocks = _blocks(doc)
    except docblocks.DocError as e:
        pytest.fail(f"docs test: {e}", pytrace=False)
    starts_a_node = any("--real-node" in b.text for b in blocks if _runs(b, also))
    # one real node per machine, the real-node tests' included
    with one_real_node(who=doc) if starts_a_node else contextlib.nullcontext():
        return _run_blocks(doc, blocks, scratch, also)


def _runs(block: Block, also: Iterable[str]) -> bool:
    """Whether a run with the kinds in ``also`` runs this block (gpu and remote blocks always run: where they
    cannot, for their refusal)."""
    return not block.kind or block.kind in also or block.kind in ("gpu", "remote")


def _run_blocks(doc: str, blocks: list[Block], scratch: Path, also: Iterable[str]) -> list[str]:
    scratch.mkdir(parents=True, exist_ok=True)
    if SHARED.is_dir() and not (scratch / "shared").exists():
        (scratch / "shared").symlink_to(SHARED)
    k8s_bin = Path(os.environ.get("GPUPLACE_K8S_CACHE", Path.home() / ".cache" / "gpuplace" / "k8s"))
    session = DocSession(
        scratch,
        venv_bin=REPO / ".venv" / "bin",
        extra_path=tuple(str(p) for p in sorted(k8s_bin.glob("v*/bin"))[-1:]),
    )
    timings: list[str] = []
    failure: str | None = None
    try:
        for n, block in enumerate(blocks, 1):
            label = f"{block.where} (block {n} of {len(blocks)}{', ' + block.kind if block.kind else ''})"
            refusal = block.kind in ("gpu", "remote") and not (block.kind == "gpu" and _has_cuda())
            if not _runs(block, also):
                continue
            timeout_s = REFUSAL_TIMEOUT_S if refusal else _timeout(block)
            result = session.run(block, timeout_s=timeout_s, offline=block.kind == "remote")
            timings.append(f"{result.seconds:7.1f} s  {label}")
            if refusal:
                problem = docblocks.refusal_problem(result, kind=block.kind)
                if problem:
                    failure = f"{label}: {problem} (exit {result.rc})"
            elif result.timed_out:
                failure = f"{label}: still running after {timeout_s:.0f} s (a hang, or mark it slow)"
            elif result.rc != 0:
                failure = f"{label}: exited {result.rc}"
            else:
                for exp in block.expected:
                    missing = docblocks.match(exp, result.output)
                    if missing:
                        lines = "\n".join("    " + s for s in missing)
                        failure = (
                            f"{label}: its output contradicts the sample at {doc}:{exp.line}; "
                            f"these sample lines (normalised) are not in it:\n{lines}"
                        )
                        break
            held = [str(p) for p in session.left_by(block) if p.ports] if not failure else []
            if held:
                failure = (
                    f"{label}: it left {'; '.join(held)}: a block stops every server it starts, with its "
                    "whole process group (`set -m` before starting it with `&`, then `kill -- -$!`), and "
                    "waits until its port is free, or the next block and the reader find the port taken"
                )
            if failure:
                failure += f"\n  block:\n{_show(block)}\n  output (last lines):\n{result.tail()}"
                break
    finally:
        notes = session.close()
    print(f"== {doc}\n" + "\n".join(timings + notes))
    clutter = docblocks.not_ignored(session.work, REPO)
    if clutter and not failure:
        failure = (
            f"{doc}: run in the clone's root, its commands would leave {', '.join(clutter)} there, which git "
            "does not ignore: write it under a git-ignored directory (out/, .gpuplace/) or add it to "
            ".gitignore"
        )
    if failure:
        pytest.fail(f"docs test: {failure}", pytrace=False)
    return timings


@pytest.fixture(autouse=True)
def _one_docs_run_at_a_time() -> Iterator[None]:
    """Documents use fixed ports (8000, 8001, 5000, 5001, 8888) as a user would: one docs run per machine at a
    time."""
    with open(Path(tempfile.gettempdir()) / "gpuplace-docs-test.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@pytest.mark.integration
@pytest.mark.docs
@pytest.mark.parametrize("doc", DOCS)
def test_doc_runs_as_written(doc: str, tmp_path: Path) -> None:
    """The document's default and testenv blocks run in order (a testenv block's control plane stopped by the
    document, or at its end); gpu/remote blocks refuse clearly; samples match."""
    run_doc(doc, tmp_path / Path(doc).stem, also=("testenv",))


@pytest.mark.integration
@pytest.mark.docs_slow
@pytest.mark.parametrize("doc", _docs_with("slow"))
def test_doc_runs_with_slow_blocks(doc: str, tmp_path: Path) -> None:
    """The document again, its slow blocks (over ~3 minutes each) included."""
    run_doc(doc, tmp_path / Path(doc).stem, also=("testenv", "slow"))


def _prose(doc: str) -> str:
    """A document without its fenced blocks (a diagram or an output sample is not where a term is used)."""
    return re.sub(r"^\s*```.*?^\s*```", "", (REPO / doc).read_text(encoding="utf-8"), flags=re.S | re.M)


@pytest.mark.docs
@pytest.mark.parametrize("doc", ["README.md", "docs/placement.md"])
def test_the_terms_are_defined_before_they_are_used(doc: str) -> None:
    """issue 26: "2× X" against "1× 2×X", "fit" and "FGD" were used before any doc said what they are."""
    text = _prose(doc)
    for term, definition in (("FGD", "**FGD**"), ("fit score", "**fit**"), ("1× 2×", "R× T×G")):
        first, defined = text.find(term), text.find(definition)
        assert defined != -1, f"{doc} does not define {term!r} ({definition!r})"
        assert first == -1 or defined <= first + len(term) + 80, f"{doc} uses {term!r} before defining it"
