"""The docs test's harness: the ``bash`` blocks of README.md and docs/*.md, read and run as a user would.

``parse(path)`` reads a Markdown file into its ``Block``s: every fenced ``bash`` block in order, with its
kind, from an HTML comment on the line directly above the fence (``<!-- doc-test: KIND -->``; no comment: run
by default), and the ``text`` block marked ``<!-- doc-test: output ... -->`` that shows its output. Kinds:

- ``testenv``: needs ``gpuplace testenv up`` (run by ``make docs-test``, so by ``make test``);
- ``gpu``: needs CUDA; without one, checked for the clear error it gives;
- ``remote``: needs a real cluster or a KFP backend; checked for its offline refusal;
- ``slow``: over about three minutes (run by ``make docs-test-slow``);
- ``illustration``: not meant to be run as is (never run).

``DocSession`` runs one document's blocks, in order, from one scratch directory, each in a fresh
``bash -e -o pipefail`` that starts from the environment and directory the previous block left (``export``
and ``cd`` carry over, as in one terminal), with ``.venv/bin`` first on PATH. Every process a block starts
carries a marker in its environment (the session's, and the block's), so what a block leaves running (a
server put in the background with ``&``, a control plane, a local deployment) is stopped, by PID, when the
document ends, and ``left_by`` names what a block left running and the TCP ports it listens on. A block
must stop every server it starts, with its whole process group (MLflow's uvicorn workers and huey
consumers outlive a ``kill`` of their parent and keep its port), and wait until its port is free: the
docs test fails a block that leaves a process listening on a port.

What the test checks: a block's exit status (0, or for ``gpu``/``remote`` blocks a clear refusal: non-zero,
no traceback, not "command not found"), and a marked output sample against the block's output (``match``).
The lines compared are the sample's lines, or with ``<!-- doc-test: output PREFIX; PREFIX -->`` only those
that start with a prefix, each normalised (numbers that are not a shape's count, hex ids and timestamps
become ``#``, spaces collapse, ``...`` matches anything; a line of its own ``...``: any lines), in order. It
also fails on what is not runnable as written: an unknown kind, a shell block fenced ``sh``/``shell``/
``console``, ``.venv/bin/`` spelled in a command; and ``not_ignored`` names what a document would leave in
the clone's root that git does not ignore.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

KINDS = ("testenv", "gpu", "remote", "slow", "illustration")
MARKER = re.compile(r"^\s*<!--\s*doc-test:\s*([\w-]+)\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
SHELL_FENCES = ("sh", "shell", "console", "zsh", "shell-session")
SESSION_VAR = "GPUPLACE_DOCS_TEST_SESSION"
BLOCK_VAR = "GPUPLACE_DOCS_TEST_BLOCK"  # the line of the block that started a process


class DocError(Exception):
    """A document that the docs test cannot run as written (names the file and line)."""


@dataclass(frozen=True, slots=True)
class Expected:
    """A ``text`` output sample marked for comparison with the preceding run block's output."""

    line: int
    lines: tuple[str, ...]
    prefixes: tuple[str, ...]

    def compared(self) -> list[str]:
        """The sample lines that matter: all of them, or those that start with one of the prefixes."""
        out = [s for s in self.lines if s.strip() not in ("", "...", "…")]  # a "..." line: any lines
        if self.prefixes:
            out = [s for s in out if s.strip().startswith(self.prefixes)]
        return out


@dataclass(slots=True)
class Block:
    """One fenced ``bash`` block: where it is, what marks it, its text, and the output sample it shows."""

    doc: str
    line: int  # 1-based line of the opening fence
    kind: str  # "" = run by default
    text: str
    expected: list[Expected] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"


def _closes(line: str, fence: str) -> bool:
    return re.match(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$", line) is not None


def parse(path: Path, *, name: str | None = None) -> list[Block]:
    """The bash blocks of one Markdown file, in order, each with its kind and the output samples after it."""
    doc = name or path.name
    lines = path.read_text(encoding="utf-8").split("\n")
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m.group(2), m.group(3).lower()
        end = i + 1
        while end < len(lines) and not _closes(lines[end], fence):
            end += 1
        if end == len(lines):
            raise DocError(f"{doc}:{i + 1}: fence {fence}{lang} is never closed")
        indent = len(m.group(1))
        body = [s[indent:] if s[:indent].isspace() else s.lstrip() for s in lines[i + 1 : end]]
        marker = MARKER.match(lines[i - 1]) if i > 0 else None
        kind, arg = (marker.group(1), marker.group(2)) if marker else ("", "")
        where = f"{doc}:{i + 1}"
        if lang in SHELL_FENCES:
            raise DocError(
                f"{where}: a shell block fenced ```{lang}: fence it ```bash (the docs test runs it) or "
                "```text"
            )
        if lang == "bash":
            if kind and kind not in KINDS:
                raise DocError(f"{where}: unknown doc-test kind {kind!r}; use one of {', '.join(KINDS)}")
            text = "\n".join(body)
            code = re.sub(r"(^|\s)#.*", "", text, flags=re.MULTILINE)  # what runs, without the comments
            if kind != "illustration" and re.search(r"(^|[\s;|&(])\.venv/bin/", code):
                raise DocError(
                    f"{where}: write commands as `gpuplace ...`, not `.venv/bin/gpuplace` "
                    "(.venv/bin is on PATH)"
                )
            blocks.append(Block(doc, i + 1, kind, text))
        elif marker and kind == "output":
            if lang != "text":
                raise DocError(f"{where}: <!-- doc-test: output --> marks a ```text block, not ```{lang}")
            if not blocks:
                raise DocError(f"{where}: an output sample with no bash block before it")
            prefixes = tuple(p.strip() for p in arg.split(";") if p.strip())
            blocks[-1].expected.append(Expected(i + 1, tuple(body), prefixes))
        elif marker:
            raise DocError(
                f"{where}: a doc-test marker above a ```{lang or '(plain)'} block: only ```bash blocks run"
            )
        i = end + 1
    return blocks


_HEX = re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b")
_LONG_DIGITS = re.compile(r"\d{6,}")
_NUMBER = re.compile(r"(?<![\w.-])[-+−±]?\d+(?:[.,]\d+)*%?(?![\w×.])")


def normalise(line: str) -> str:
    """A line as compared: hex ids, timestamps and plain numbers become ``#`` (a shape's ``2×`` stays)."""
    line = _HEX.sub("#", line)
    line = _LONG_DIGITS.sub("#", line)
    line = _NUMBER.sub("#", line)
    return " ".join(line.split())


def _pattern(sample: str) -> re.Pattern[str]:
    parts = [re.escape(p) for p in re.split(r"\.\.\.|…", normalise(sample))]
    return re.compile(".*".join(parts))


def match(expected: Expected, output: str) -> list[str]:
    """The sample lines (normalised) that the output does not show, in the sample's order; [] if it does."""
    got = [normalise(s) for s in output.splitlines()]
    missing: list[str] = []
    pos = 0
    for sample in expected.compared():
        pat = _pattern(sample)
        for j in range(pos, len(got)):
            if pat.fullmatch(got[j]):
                pos = j + 1
                break
        else:
            missing.append(normalise(sample))
    return missing


@dataclass(frozen=True, slots=True)
class Result:
    """What one block did: its exit status, combined stdout+stderr, seconds."""

    block: Block
    rc: int
    output: str
    seconds: float
    timed_out: bool = False

    def tail(self, n: int = 60) -> str:
        return "\n".join(self.output.splitlines()[-n:])


class DocSession:
    """One document's shell: a scratch directory, the environment blocks leave, the processes they start."""

    def __init__(
        self,
        scratch: Path,
        *,
        venv_bin: Path,
        env: dict[str, str] | None = None,
        extra_path: tuple[str, ...] = (),
    ) -> None:
        self.scratch = scratch
        self.work = scratch / "work"
        self.state = scratch / ".shell"
        self.work.mkdir(parents=True, exist_ok=True)
        self.state.mkdir(parents=True, exist_ok=True)
        self.session = uuid.uuid4().hex
        base = dict(env if env is not None else os.environ)
        # .venv/bin first, as the README says; kubectl (the one `make k8s-bins` builds) last, as a user's
        base["PATH"] = os.pathsep.join(filter(None, (str(venv_bin), base.get("PATH", ""), *extra_path)))
        base[SESSION_VAR] = self.session
        for var in ("VIRTUAL_ENV", "PYTHONPATH", "KUBECONFIG", "MLFLOW_TRACKING_URI", "PYTEST_CURRENT_TEST"):
            base.pop(var, None)
        # short: the real node's kubelet puts unix sockets under it (108 bytes at most for their paths)
        self.testenv_dir = Path(tempfile.mkdtemp(prefix="gpdocs-"))
        base["GPUPLACE_TESTENV_DIR"] = str(self.testenv_dir)
        base["GPUPLACE_STATE_DIR"] = str(scratch / "state")
        base["MPLBACKEND"] = "Agg"
        self.env = base
        (self.state / "cwd").write_text(str(self.work))
        (self.state / "env.sh").write_text("")

    def run(self, block: Block, *, timeout_s: float, offline: bool = False) -> Result:
        """Run one block from where the previous one left the shell; its environment and cwd carry on."""
        script = self.state / f"block-{block.line}.sh"
        out_path = self.state / f"block-{block.line}.out"
        st = self.state
        script.write_text(
            f'. "{st}/env.sh"\nexport {BLOCK_VAR}={block.line}\ncd "$(cat "{st}/cwd")"\n'
            f'trap \'export -p > "{st}/env.sh.new"; pwd > "{st}/cwd"\' EXIT\n'
            "set -e -o pipefail\n" + block.text + "\n"
        )
        env = dict(self.env)
        before_cwd = (st / "cwd").read_text()
        if offline:  # a remote block must refuse, not reach a real cluster or host from a developer's machine
            env["HOME"] = str(self.scratch / "home")
            Path(env["HOME"]).mkdir(exist_ok=True)
            for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
                env[var] = "http://127.0.0.1:9"
            env["NO_PROXY"] = env["no_proxy"] = ""
        start = time.monotonic()
        timed_out = False
        with out_path.open("wb") as out:
            # A new session per block, and output to a file, not a pipe: a server left in the background
            # must not hold the harness's pipe open or share its process group.
            proc = subprocess.Popen(
                ["bash", "--noprofile", "--norc", str(script)],
                cwd=self.work,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                rc = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(proc.pid)
                rc = proc.wait()
        seconds = time.monotonic() - start
        new_env = st / "env.sh.new"
        if offline:  # its HOME and proxies are the harness's, not the document's: they must not carry on
            new_env.unlink(missing_ok=True)
            (st / "cwd").write_text(before_cwd)
        elif new_env.exists():
            new_env.replace(st / "env.sh")
        output = out_path.read_text(encoding="utf-8", errors="replace")
        return Result(block, rc, output, seconds, timed_out)

    def leftover(self, block: Block | None = None) -> list[tuple[int, str]]:
        """Processes still running that a block of this document (or this ``block``) started (PID, command
        line)."""
        found: list[tuple[int, str]] = []
        needles = {f"{SESSION_VAR}={self.session}".encode()}
        if block is not None:
            needles.add(f"{BLOCK_VAR}={block.line}".encode())
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                if not needles <= set((entry / "environ").read_bytes().split(b"\0")):
                    continue
                if (entry / "stat").read_text().rpartition(")")[2].split()[0] == "Z":
                    continue  # exited, waiting for its parent to reap it: nothing left to stop
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            except OSError:
                continue
            found.append((int(entry.name), cmd))
        return found

    def left_by(self, block: Block) -> list[Leftover]:
        """What ``block`` started that still runs now that it has ended, with the ports each listens on."""
        listening = _listening_sockets()
        return [Leftover(pid, cmd, _ports(pid, listening)) for pid, cmd in self.leftover(block)]

    def close(self) -> list[str]:
        """Stop what the document left running: its testenv (``testenv down``), then every marked process."""
        notes: list[str] = []
        if (self.testenv_dir / "state.json").exists():
            down = subprocess.run(
                ["gpuplace", "testenv", "down"],
                env=self.env,
                cwd=self.work,
                capture_output=True,
                text=True,
                timeout=120,
            )
            notes.append(f"gpuplace testenv down: exit {down.returncode}")
        for sig in (signal.SIGTERM, signal.SIGKILL):
            procs = self.leftover()
            for pid, cmd in procs:
                if sig == signal.SIGTERM:
                    notes.append(f"stopped pid {pid}: {cmd[:160]}")
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + 10
            while procs and self.leftover() and time.monotonic() < deadline:
                time.sleep(0.2)
        shutil.rmtree(self.testenv_dir, ignore_errors=True)
        return notes


def not_ignored(work: Path, repo: Path) -> list[str]:
    """What a document left at the top of its directory that git would not ignore in the clone's root (where
    a user who runs the docs there gets it): untracked clutter unless it is written elsewhere or ignored."""
    names = sorted(p.name + ("/" if p.is_dir() else "") for p in work.iterdir())
    if not names:
        return []
    check = subprocess.run(
        ["git", "-C", str(repo), "check-ignore", "--no-index", "--stdin"],
        input="\n".join(names),
        capture_output=True,
        text=True,
    )
    if check.returncode not in (0, 1):  # not a git checkout (a source tarball): nothing to judge against
        return []
    ignored = set(check.stdout.split())
    return [n for n in names if n not in ignored and n.rstrip("/") not in ignored]


@dataclass(frozen=True, slots=True)
class Leftover:
    """A process a block started that outlived it, and the TCP ports it listens on."""

    pid: int
    cmd: str
    ports: tuple[int, ...]

    def __str__(self) -> str:
        on = f", listening on port {', '.join(map(str, self.ports))}" if self.ports else ""
        return f"pid {self.pid} ({self.cmd[:120]}){on}"


def _listening_sockets() -> dict[str, int]:
    """The inode of every listening TCP socket of this network namespace, and its port."""
    found: dict[str, int] = {}
    for table in ("tcp", "tcp6"):
        try:
            rows = Path("/proc/net", table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cells = row.split()
            if len(cells) > 9 and cells[3] == "0A":  # TCP_LISTEN
                found[cells[9]] = int(cells[1].rsplit(":", 1)[1], 16)
    return found


def _ports(pid: int, listening: dict[str, int]) -> tuple[int, ...]:
    """The ports of the listening sockets among ``pid``'s open files."""
    ports: set[int] = set()
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                link = os.readlink(fd)
                if link.startswith("socket:[") and link[8:-1] in listening:
                    ports.add(listening[link[8:-1]])
    return tuple(sorted(ports))


def _kill_group(pgid: int) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        time.sleep(1)


def refusal_problem(result: Result, *, kind: str) -> str | None:
    """Why a ``gpu``/``remote`` block's failure is not the clear refusal the docs promise; None when it is."""
    out = result.output
    if result.timed_out:
        return "it hung instead of refusing"
    if result.rc == 0:
        return f"it succeeded {'without a GPU' if kind == 'gpu' else 'offline'}: it is not a {kind} block"
    if result.rc == 127 or "command not found" in out:
        return "a command is not installed (exit 127), which is no refusal a user can act on"
    if "Traceback (most recent call last)" in out:
        return "it failed with a Python traceback instead of a clear error"
    if kind == "gpu" and not re.search(r"cuda|gpu", out, re.IGNORECASE):
        return "its error does not say that it needs CUDA / a GPU"
    return None
