"""The profiler refuses roofline fractions above 1: re-measure the ceilings, then fail naming the point."""

from __future__ import annotations

from dataclasses import replace
from itertools import cycle

import pytest
import torch

from gpuplace.profiling import hardware
from gpuplace.profiling.fractions import check_fractions
from gpuplace.profiling.hardware import MeasurementDisturbed, measure_read_bandwidth_gbps, read_bandwidth
from gpuplace.types import Distribution, PointResult, SweepPoint

POINT = SweepPoint(1, 64, 16, "bfloat16", "eager")


def _result(step_s: float, bytes_step: float = 2e8, bandwidth_gbps: float = 10.0) -> PointResult:
    floor = bytes_step / (bandwidth_gbps * 1e9)
    return PointResult(
        point=POINT,
        ok=True,
        repeats=3,
        prefill=Distribution.of([0.1] * 3),
        decode_step=Distribution.of([step_s] * 3),
        decode_bytes_per_step=bytes_step,
        decode_floor_s=floor,
        mbu=floor / step_s,
        prefill_flops=1e9,
        mfu=1e9 / (0.1 * 1e12),
    )


def test_fractions_below_one_pass_untouched() -> None:
    results = [_result(0.05)]  # floor 20 ms: MBU 0.4

    def remeasure() -> tuple[float, dict[str, float]]:
        raise AssertionError("nothing to re-measure")

    out, bw, peaks = check_fractions(
        results,
        bandwidth_gbps=10.0,
        bandwidth_source="measured",
        peaks={"bfloat16": 1.0},
        remeasure=remeasure,
    )
    assert out == results and bw == 10.0 and peaks == {"bfloat16": 1.0}


def test_a_probe_measured_low_is_re_measured_and_the_fractions_recomputed() -> None:
    results = [_result(0.0143)]  # floor 20 ms against 10 GB/s: MBU 1.4
    out, bw, _ = check_fractions(
        results,
        bandwidth_gbps=10.0,
        bandwidth_source="measured",
        peaks={"bfloat16": 1.0},
        remeasure=lambda: (20.0, {"bfloat16": 1.0}),  # the quiet machine reads twice as fast
    )
    assert bw == 20.0
    assert out[0].mbu == pytest.approx(0.7, rel=1e-3)
    assert out[0].decode_floor_s == pytest.approx(0.01)


def test_a_fraction_still_above_one_fails_naming_the_point_and_the_fix() -> None:
    results = [_result(0.0143)]
    with pytest.raises(MeasurementDisturbed, match=r"b=1 p=64 o=16 .*MBU 1\.40.*idle machine"):
        check_fractions(
            results,
            bandwidth_gbps=10.0,
            bandwidth_source="measured",
            peaks={"bfloat16": 1.0},
            remeasure=lambda: (9.0, {"bfloat16": 1.0}),
        )
    # against a datasheet figure there is nothing to re-measure: it fails at once
    with pytest.raises(MeasurementDisturbed):
        check_fractions(
            [replace(results[0])],
            bandwidth_gbps=10.0,
            bandwidth_source="catalog:H100-SXM5-80GB",
            peaks={"bfloat16": 989.0},
            remeasure=lambda: (99.0, {}),
        )


def test_a_disturbed_bandwidth_probe_is_retried_then_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    times = cycle([0.01, 0.02, 0.04, 0.08, 0.16])  # no two rounds of an attempt agree
    monkeypatch.setattr(hardware, "_best_read_s", lambda src, device, repeats: next(times))
    pauses: list[float] = []
    monkeypatch.setattr(hardware.time, "sleep", pauses.append)
    with pytest.raises(MeasurementDisturbed, match="two best more than 15% apart, in each of 4 attempts"):
        measure_read_bandwidth_gbps(torch.device("cpu"), size_mib=1)
    assert pauses == [0.5, 1.0, 2.0]  # the pause doubles between attempts

    # one disturbed round among steady ones: the best round is the ceiling, confirmed by the second
    bursty = cycle([0.01, 0.03, 0.0105, 0.03, 0.03])
    monkeypatch.setattr(hardware, "_best_read_s", lambda src, device, repeats: next(bursty))
    assert measure_read_bandwidth_gbps(torch.device("cpu"), size_mib=1) == pytest.approx(2**20 / 0.01 / 1e9)

    # a lone fast round is not trusted: the two best must agree
    lone = cycle([0.01, 0.03, 0.03, 0.05, 0.05])
    monkeypatch.setattr(hardware, "_best_read_s", lambda src, device, repeats: next(lone))
    with pytest.raises(MeasurementDisturbed):
        measure_read_bandwidth_gbps(torch.device("cpu"), size_mib=1)

    steady = cycle([0.01, 0.0105])
    monkeypatch.setattr(hardware, "_best_read_s", lambda src, device, repeats: next(steady))
    bw = measure_read_bandwidth_gbps(torch.device("cpu"), size_mib=1)
    assert bw == pytest.approx(2**20 / 0.01 / 1e9)


def test_a_cpu_probe_that_stays_disturbed_goes_on_with_its_best_round_and_says_so(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a CPU the profile goes on with the best round of every attempt, labelled; on another device the
    disturbed probe still fails (a GPU's fractions calibrate its class)."""
    times = cycle([0.02, 0.04, 0.08, 0.16, 0.32, 0.01, 0.03, 0.05, 0.07, 0.09])  # never two agree
    monkeypatch.setattr(hardware, "_best_read_s", lambda src, device, repeats: next(times))
    monkeypatch.setattr(hardware.time, "sleep", lambda s: None)
    bw, source = read_bandwidth(torch.device("cpu"))
    assert bw == pytest.approx(2**28 / 0.01 / 1e9)  # the best round, from the second attempt
    assert source == "measured (disturbed: best round)"
    assert "the best round" in capsys.readouterr().err
    with pytest.raises(MeasurementDisturbed, match="in each of 4 attempts"):
        read_bandwidth(torch.device("meta"))

    steady = cycle([0.01, 0.0105])
    monkeypatch.setattr(hardware, "_best_read_s", lambda src, device, repeats: next(steady))
    assert read_bandwidth(torch.device("cpu")) == (pytest.approx(2**28 / 0.01 / 1e9), "measured")
