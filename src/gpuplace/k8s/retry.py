"""Deadlines and retries for Kubernetes API calls.

Retries happen only for what may succeed on a second try: no answer at all (connection refused or
reset, timeouts — e.g. kube-apiserver restarting), 5xx, and 429 (waiting as long as ``Retry-After``
says). Everything else (404, 409, 422, 403) is raised at once. Nothing waits past its deadline:
each attempt's HTTP timeout is cut to what is left, and a wait that would cross it raises instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from gpuplace.k8s.errors import KubeError, Throttled, translate

T = TypeVar("T")

# One HTTP request never waits longer than this, so a dead connection is noticed within a wait.
MAX_REQUEST_TIMEOUT_S = 30.0
BACKOFF_START_S = 0.1
BACKOFF_MAX_S = 2.0


class Deadline:
    """A point in monotonic time; ``remaining()`` is never negative."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._end = time.monotonic() + seconds

    def remaining(self) -> float:
        return max(0.0, self._end - time.monotonic())

    @property
    def expired(self) -> bool:
        return self.remaining() <= 0.0

    def request_timeout(self) -> float:
        """The HTTP timeout for one attempt: what is left, at least 0.5 s, at most 30 s."""
        return min(MAX_REQUEST_TIMEOUT_S, max(0.5, self.remaining()))


def with_retries(
    attempt: Callable[[float], T],
    *,
    action: str,
    deadline: Deadline,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call ``attempt(request_timeout_s)`` until it succeeds, fails for good, or the deadline passes.

    Raises the :class:`KubeError` of the last failure, chained to the client library's exception.
    """
    tries = 0
    while True:
        try:
            return attempt(deadline.request_timeout())
        except Exception as e:
            err = translate(e, action)
            if not err.retryable:
                raise err from e
            delay = (
                err.retry_after_s
                if isinstance(err, Throttled)
                else min(BACKOFF_MAX_S, BACKOFF_START_S * 2**tries)
            )
            if delay >= deadline.remaining():
                raise _expired(err, deadline, tries + 1) from e
            sleep(delay)
            tries += 1


def _expired(err: KubeError, deadline: Deadline, tries: int) -> KubeError:
    err.args = (f"{err.args[0]} (gave up after {tries} tries within the {deadline.seconds:g} s deadline)",)
    return err
