"""The CPU clock of the profiler and the progress lines it writes to logs."""

from __future__ import annotations

import io
import time
from types import SimpleNamespace

import pytest
import torch

from gpuplace import progress
from gpuplace.profiling.timing import CpuClock, clock_for, synchronize

# --- clocks -------------------------------------------------------------------------------------


def test_cpu_clock_intervals_cover_the_work_between_marks() -> None:
    clock = CpuClock()
    clock.prepare(3)
    clock.mark()
    time.sleep(0.02)
    clock.mark()
    time.sleep(0.01)
    clock.mark()

    first, second = clock.intervals()
    assert first >= 0.02
    assert second >= 0.01
    assert first < 1.0 and second < 1.0  # seconds, not milliseconds or nanoseconds


def test_cpu_clock_prepare_starts_a_new_measurement() -> None:
    clock = CpuClock()
    clock.prepare(2)
    clock.mark()
    clock.mark()
    clock.mark()
    assert len(clock.intervals()) == 2

    clock.prepare(2)
    assert clock.intervals() == []
    clock.mark()
    assert clock.intervals() == []  # one mark is no interval
    clock.mark()
    assert len(clock.intervals()) == 1


def test_cpu_clock_intervals_are_the_gaps_between_marks_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """perf_counter replaced by a list of readings, so each interval is known exactly."""
    readings = iter([10.0, 10.5, 12.5, 12.6, 13.6])
    monkeypatch.setattr(time, "perf_counter", lambda: next(readings))
    clock = CpuClock()
    clock.prepare(5)
    for _ in range(5):
        clock.mark()

    assert clock.intervals() == pytest.approx([0.5, 2.0, 0.1, 1.0])


def test_clock_for_cpu() -> None:
    clock = clock_for(torch.device("cpu"))

    assert isinstance(clock, CpuClock)
    assert clock_for(torch.device("cpu")) is not clock  # one clock per measurement, no shared state


def test_synchronize_on_cpu_is_a_no_op() -> None:
    synchronize(torch.device("cpu"))  # must not touch CUDA on a machine without it


# --- progress -----------------------------------------------------------------------------------


class FakeMonotonic:
    """A settable stand-in for ``time.monotonic`` inside gpuplace.progress."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeMonotonic:
    fake = FakeMonotonic()
    monkeypatch.setattr(progress, "time", SimpleNamespace(monotonic=fake))
    return fake


def test_progress_prints_count_eta_and_detail_to_a_log(clock: FakeMonotonic) -> None:
    out = io.StringIO()
    p = progress.Progress(3, "profile", stream=out, min_interval_s=0)

    clock.now += 10
    p.advance("bs=1 prompt=128")
    clock.now += 10
    p.advance("bs=4 prompt=128")
    clock.now += 10
    p.advance()

    lines = out.getvalue().splitlines()
    assert lines == [
        "profile: 1/3 [0:00:10 elapsed, ETA 0:00:20] bs=1 prompt=128",
        "profile: 2/3 [0:00:20 elapsed, ETA 0:00:10] bs=4 prompt=128",
        "profile: 3/3 [0:00:30 elapsed, ETA 0:00:00]",
    ]
    assert "\r" not in out.getvalue()  # a log, not a redrawn bar


def test_progress_eta_before_any_step_is_unknown(clock: FakeMonotonic) -> None:
    p = progress.Progress(5, "sweep", stream=io.StringIO())

    clock.now += 3
    assert p.eta_s() != p.eta_s()  # NaN
    assert p.line() == "sweep: 0/5 [0:00:03 elapsed, ETA ?]"


def test_progress_eta_is_elapsed_per_step_times_steps_left(clock: FakeMonotonic) -> None:
    p = progress.Progress(10, "sweep", stream=io.StringIO())

    clock.now += 61
    p.advance()
    assert p.eta_s() == pytest.approx(61 * 9)
    assert p.line("x") == "sweep: 1/10 [0:01:01 elapsed, ETA 0:09:09] x"


def test_progress_formats_hours(clock: FakeMonotonic) -> None:
    p = progress.Progress(2, "long", stream=io.StringIO(), min_interval_s=0)

    clock.now += 3661
    p.advance()
    assert p.line() == "long: 1/2 [1:01:01 elapsed, ETA 1:01:01]"


def test_min_interval_suppresses_intermediate_lines_but_not_the_last(clock: FakeMonotonic) -> None:
    out = io.StringIO()
    p = progress.Progress(5, "sweep", stream=out, min_interval_s=60)

    for detail in "abcde":
        clock.now += 1
        p.advance(detail)

    lines = out.getvalue().splitlines()
    # the first step prints (nothing printed yet), steps 2-4 fall inside 60 s, the last always prints
    assert [line.split(" [")[0] for line in lines] == ["sweep: 1/5", "sweep: 5/5"]
    assert lines[0].endswith(" a")
    assert lines[1].endswith(" e")


def test_min_interval_lets_a_line_through_once_it_has_passed(clock: FakeMonotonic) -> None:
    out = io.StringIO()
    p = progress.Progress(4, "sweep", stream=out, min_interval_s=60)

    for step_s in (1, 30, 30, 1):  # step 3 lands 60 s after the first line
        clock.now += step_s
        p.advance()

    assert [line.split(" [")[0] for line in out.getvalue().splitlines()] == [
        "sweep: 1/4",
        "sweep: 3/4",
        "sweep: 4/4",
    ]


def test_progress_with_real_time_and_default_interval_prints_first_and_last() -> None:
    out = io.StringIO()
    with progress.Progress(3, "quick", stream=out) as p:
        for _ in range(3):
            p.advance()

    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("quick: 1/3 [")
    assert "ETA" in lines[0]
    assert lines[1].startswith("quick: 3/3 [")


def test_disabled_progress_counts_but_prints_nothing() -> None:
    out = io.StringIO()
    p = progress.Progress(2, "quiet", stream=out, min_interval_s=0, enabled=False)
    p.advance("a")
    p.advance("b")

    assert p.done == 2
    assert out.getvalue() == ""


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_progress_draws_a_bar_instead_of_lines() -> None:
    out = FakeTerminal()
    with progress.Progress(3, "bar", stream=out) as p:
        for _ in range(3):
            p.advance("step")

    text = out.getvalue()
    assert "\r" in text  # tqdm redraws in place
    assert "3/3" in text
    assert "ETA" not in text  # the log-line format is not used
