"""A quiet console for the main job: the runner's and the tasks' logs go to a file, people see one line
per task (started, finished, how long), the load test's progress lines, and then the summary.

kfp's local runner logs through the root logger to ``sys.stdout`` and prints every task's streamed
output there too, and warns once per task that its image "may" need the DockerRunner; all of it lands
in ``<run dir>/runner.log``. ``gpuplace run --verbose`` skips this and shows everything.
"""

from __future__ import annotations

import contextlib
import io
import re
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_STARTED = re.compile(r"Executing task '([^']+)'")
_FINISHED = re.compile(r"Task '([^']+)' finished with status (\w+)")
_PROGRESS = re.compile(r": \d+/\d+ \[\d+:\d\d:\d\d elapsed, ETA ")
_RAISED = re.compile(r"^\s*([A-Za-z_][\w.]*): (.+)$")  # a traceback's last line: "pkg.SomeError: message"


class TaskConsole(io.TextIOBase):
    """A text stream that keeps everything in ``log`` and echoes task events and progress to ``out``."""

    def __init__(self, log: TextIO, out: TextIO) -> None:
        self.log = log
        self.out = out
        self.started: dict[str, float] = {}
        self.finished: dict[str, str] = {}
        self.last_error = ""  # the exception line of the last traceback a task printed
        self._partial = ""
        self._in_traceback = False

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.log.write(text)
        self._partial += text
        *lines, self._partial = self._partial.split("\n")
        for line in lines:
            self._event(_ANSI.sub("", line))
        return len(text)

    def flush(self) -> None:
        self.log.flush()
        self.out.flush()

    def _event(self, line: str) -> None:
        if "Traceback (most recent call last):" in line:
            self._in_traceback = True
        elif self._in_traceback and (m := _RAISED.match(line)) and not line.strip().startswith("File "):
            self.last_error, self._in_traceback = f"{m[1]}: {m[2]}", False
        if m := _STARTED.search(line):
            self.started[m[1]] = time.monotonic()
            self.out.write(f"  {m[1]:<28} started\n")
        elif m := _FINISHED.search(line):
            took = time.monotonic() - self.started.get(m[1], time.monotonic())
            self.finished[m[1]] = m[2]
            verdict = "finished" if m[2] == "SUCCESS" else f"FAILED ({m[2]})"
            self.out.write(f"  {m[1]:<28} {verdict} in {took:.1f} s\n")
        elif _PROGRESS.search(line):
            self.out.write(f"    {line.strip()}\n")
        else:
            return
        self.out.flush()


@contextlib.contextmanager
def quiet_console(log_path: Path, *, verbose: bool = False) -> Iterator[TaskConsole | None]:
    """Route stdout and stderr through a :class:`TaskConsole` writing ``log_path``; no-op if verbose."""
    if verbose:
        yield None
        return
    out = sys.__stdout__ or sys.stdout
    with log_path.open("a") as log, warnings.catch_warnings():
        console = TaskConsole(log, out)
        warnings.simplefilter("always")  # into the log, once per task as kfp means them

        def to_log(message, category, filename, lineno, file=None, line=None):  # type: ignore[no-untyped-def]
            console.write(warnings.formatwarning(message, category, filename, lineno, line))

        warnings.showwarning = to_log
        with contextlib.redirect_stdout(console), contextlib.redirect_stderr(console):
            yield console
