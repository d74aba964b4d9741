"""Progress of long-running work: a bar on a terminal, periodic lines with ETA in logs.

KFP task logs and CI are not terminals, and a tqdm bar there is one long line of carriage returns, so
outside a TTY we print one line per step (at most every ``min_interval_s``) with the rate and ETA.
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import TextIO


def _fmt_duration(seconds: float) -> str:
    whole = max(0, round(seconds))
    return f"{whole // 3600}:{whole // 60 % 60:02d}:{whole % 60:02d}"


class Progress:
    """Count steps of a known total; show them on ``stream`` (stderr by default)."""

    def __init__(
        self,
        total: int,
        desc: str,
        *,
        stream: TextIO | None = None,
        min_interval_s: float = 2.0,
        enabled: bool = True,
    ) -> None:
        self.total = total
        self.desc = desc
        self.done = 0
        self._stream = stream or sys.stderr
        self._min_interval_s = min_interval_s
        self._enabled = enabled
        self._start = time.monotonic()
        self._last_print = -float("inf")
        self._bar = None
        if enabled and self._stream.isatty():
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=desc, file=self._stream, dynamic_ncols=True)

    def eta_s(self) -> float:
        if self.done == 0:
            return float("nan")
        elapsed = time.monotonic() - self._start
        return elapsed / self.done * (self.total - self.done)

    def line(self, detail: str = "") -> str:
        elapsed = time.monotonic() - self._start
        eta = self.eta_s()
        eta_text = "?" if eta != eta else _fmt_duration(eta)
        return f"{self.desc}: {self.done}/{self.total} [{_fmt_duration(elapsed)} elapsed, ETA {eta_text}]" + (
            f" {detail}" if detail else ""
        )

    def advance(self, detail: str = "") -> None:
        self.done += 1
        if not self._enabled:
            return
        if self._bar is not None:
            self._bar.set_postfix_str(detail, refresh=False)
            self._bar.update(1)
            return
        now = time.monotonic()
        if now - self._last_print >= self._min_interval_s or self.done == self.total:
            print(self.line(detail), file=self._stream, flush=True)
            self._last_print = now

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
