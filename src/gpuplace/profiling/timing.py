"""Device clocks for the profiler: CUDA events on a GPU, ``perf_counter`` on the CPU.

A clock hands out *marks* in program order and turns a list of marks into the intervals between
them. On CUDA a mark is an event recorded on the current stream, so launching work never waits for
the GPU and the intervals are what the stream actually took, idle gaps included (a launch-bound
decode step is measured as launch-bound, as a server experiences it); the only synchronisation is
the one in :meth:`CudaClock.intervals`, after the last mark. Events are created before the timed
region so that allocating them is not timed.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from itertools import pairwise
from typing import Any, Protocol

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


def median_spread(times: Sequence[float]) -> tuple[float, float]:
    s = sorted(times)
    median = statistics.median(s)
    lo, hi = s[int(0.1 * (len(s) - 1))], s[math.ceil(0.9 * (len(s) - 1))]
    return median, (hi - lo) / median if median > 0 else math.nan


def time_calls(
    call: Callable[[int], Any], copies: int, device: torch.device, *, repeats: int, warmup: int
) -> tuple[float, float]:
    """(median seconds of one call, spread) of ``call(i)`` over copies ``i = 0 … copies − 1`` in turn.

    On a GPU one sample replays a CUDA graph of one pass over the copies (the graph is captured after
    ``warmup`` eager passes; where capture fails, e.g. an op that syncs, the eager pass is timed); on a
    CPU one sample is one pass. A sample's time is divided by ``copies``."""
    for _ in range(max(warmup, 1)):
        for i in range(copies):
            call(i)
    if device.type != "cuda":
        samples = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for i in range(copies):
                call(i)
            samples.append((time.perf_counter() - t0) / copies)
        return median_spread(samples)
    synchronize(device)
    replay: Callable[[], Any]
    try:
        graph = torch.cuda.CUDAGraph()
        stream = torch.cuda.Stream(device)  # type: ignore[no-untyped-call]
        stream.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(stream):
            for i in range(copies):  # a warm pass on the side stream, as capture requires
                call(i)
        torch.cuda.current_stream(device).wait_stream(stream)
        with torch.cuda.graph(graph):
            for i in range(copies):
                call(i)
        replay = graph.replay
    except RuntimeError:
        torch.cuda.synchronize(device)

        def replay() -> None:
            for i in range(copies):
                call(i)

    replay()
    start = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]  # type: ignore[no-untyped-call]
    end = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]  # type: ignore[no-untyped-call]
    for a, b in zip(start, end, strict=True):
        a.record()
        replay()
        b.record()
    torch.cuda.synchronize(device)
    return median_spread([seconds(a.elapsed_time(b)) / copies for a, b in zip(start, end, strict=True)])
