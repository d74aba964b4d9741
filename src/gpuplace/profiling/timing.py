"""Device clocks for the profiler: CUDA events on a GPU, ``perf_counter`` on the CPU.

A clock hands out *marks* in program order and turns a list of marks into the intervals between
them. On CUDA a mark is an event recorded on the current stream, so launching work never waits for
the GPU and the intervals are what the stream actually took, idle gaps included (a launch-bound
decode step is measured as launch-bound, as a server experiences it); the only synchronisation is
the one in :meth:`CudaClock.intervals`, after the last mark. Events are created before the timed
region so that allocating them is not timed.
"""

from __future__ import annotations

import time
from itertools import pairwise
from typing import Protocol

import torch

from gpuplace.units import seconds


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class Clock(Protocol):
    def prepare(self, marks: int) -> None: ...
    def mark(self) -> None: ...
    def intervals(self) -> list[float]: ...


class CpuClock:
    """``perf_counter`` marks; CPU ops are synchronous, so no synchronisation is needed."""

    def __init__(self) -> None:
        self._marks: list[float] = []

    def prepare(self, marks: int) -> None:
        self._marks = []

    def mark(self) -> None:
        self._marks.append(time.perf_counter())

    def intervals(self) -> list[float]:
        return [b - a for a, b in pairwise(self._marks)]


class CudaClock:
    """CUDA-event marks on the current stream; one synchronisation when the intervals are read."""

    def __init__(self, device: torch.device) -> None:
        self._device = device
        self._events: list[torch.cuda.Event] = []
        self._used = 0

    def prepare(self, marks: int) -> None:
        if len(self._events) < marks:
            missing = marks - len(self._events)
            self._events.extend(torch.cuda.Event(enable_timing=True) for _ in range(missing))  # type: ignore[no-untyped-call]
        self._used = 0

    def mark(self) -> None:
        self._events[self._used].record()
        self._used += 1

    def intervals(self) -> list[float]:
        torch.cuda.synchronize(self._device)
        used = self._events[: self._used]
        return [seconds(a.elapsed_time(b)) for a, b in pairwise(used)]


def clock_for(device: torch.device) -> Clock:
    return CudaClock(device) if device.type == "cuda" else CpuClock()
