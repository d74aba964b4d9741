"""Errors that gpuplace raises on purpose, and how they read.

Every error a user can cause names the field, the value it got and what to do instead, so that a
message from a KFP task log or the CLI is enough to fix the input without reading code. The CLI
turns :class:`GpuplaceError` into a one-line message and its ``exit_status``: 2 for input gpuplace cannot
use, 1 for a :class:`CheckFailed` (the step ran, and what it measured fails a check); anything else is a bug.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable


class GpuplaceError(Exception):
    """Base class of the errors a user's input can cause."""

    exit_status = 2


class CheckFailed(GpuplaceError):
    """The step ran and its measurement fails a check: pods off their plan, no request served, two paths
    that served different things. What was measured is kept (written before this is raised)."""

    exit_status = 1


class InvalidInput(GpuplaceError, ValueError):
    """A parameter, file or flag has a value gpuplace cannot use.

    The message always reads ``<field>=<value!r>: <problem>. <what to do>`` so it is greppable and
    the field is first.
    """

    def __init__(self, field: str, value: object, problem: str, fix: str = "") -> None:
        self.field = field
        self.value = value
        self.problem = problem
        self.fix = fix
        message = f"{field}={value!r}: {problem}"
        if fix:
            message += f". {fix}"
        super().__init__(message)


class UnknownName(InvalidInput, LookupError):
    """A name (GPU, model preset, ...) that is not in the catalog, with close matches offered."""

    def __init__(self, field: str, value: str, known: Iterable[str]) -> None:
        known_sorted = sorted(known)
        close = [k for k in known_sorted if _abbreviates(value, k)][:6]  # "A100": its variants, not "A10"
        if not close:
            close = difflib.get_close_matches(value, known_sorted, n=3, cutoff=0.5)
        if not close:
            lowered = value.lower()
            close = [k for k in known_sorted if lowered in k.lower() or k.lower() in lowered][:3]
        self.suggestions = tuple(close)
        fix = f"Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        fix += (" " if fix else "") + f"Known: {', '.join(known_sorted)}"
        super().__init__(field, value, "unknown name", fix)


def _words(name: str) -> list[str]:
    return [w for w in re.split(r"[\s_\-.]+", name.lower()) if w]


def _abbreviates(value: str, name: str) -> bool:
    """Whether each word of ``value`` begins a word of ``name``, in order: "A100" and "a100-80" abbreviate
    "A100-SXM4-80GB"; "A100" does not abbreviate "A10-24GB" (a spelling closer to it by letters)."""
    words, rest = _words(value), iter(_words(name))
    return bool(words) and all(any(w.startswith(v) for w in rest) for v in words)


class DeviceUnavailable(InvalidInput):
    """The requested torch device or dtype cannot run on this machine."""
