"""Workloads: length distributions, seeded arrivals, trace reading and its bad-input errors."""

from __future__ import annotations

import itertools
import math
import statistics
from pathlib import Path

import pytest

from gpuplace.errors import InvalidInput
from gpuplace.workload import LengthDist, arrival_times, read_trace, synthetic


def test_length_dist_parse_and_sample() -> None:
    import random

    rng = random.Random(0)
    assert LengthDist.parse("64", field="p").sample(rng) == 64
    u = LengthDist.parse("uniform:10:20", field="p")
    assert all(10 <= u.sample(rng) <= 20 for _ in range(200))
    n = LengthDist.parse("normal:5:50", field="p")
    assert all(n.sample(rng) >= 1 for _ in range(200))
    assert u.describe() == "uniform:10:20"


@pytest.mark.parametrize("text", ["0", "x", "uniform:5", "uniform:9:3", "gauss:1:2", "normal:10:-1"])
def test_length_dist_rejects_bad_values_naming_the_field(text: str) -> None:
    with pytest.raises(InvalidInput, match=r"^prompt_tokens="):
        LengthDist.parse(text, field="prompt_tokens")


def test_poisson_arrivals_are_seeded_start_at_zero_and_have_the_rate() -> None:
    a = arrival_times(4000, 50.0, seed=1)
    assert a == arrival_times(4000, 50.0, seed=1)
    assert a != arrival_times(4000, 50.0, seed=2)
    assert a[0] == 0.0 and all(x <= y for x, y in itertools.pairwise(a))
    gaps = [y - x for x, y in itertools.pairwise(a)]
    assert statistics.fmean(gaps) == pytest.approx(1 / 50, rel=0.05)
    assert statistics.pstdev(gaps) == pytest.approx(1 / 50, rel=0.08)  # exponential: std = mean


def test_gamma_burstiness_changes_the_spread_not_the_mean() -> None:
    gaps = [y - x for x, y in itertools.pairwise(arrival_times(4000, 10, process="gamma", burstiness=0.25))]
    assert statistics.fmean(gaps) == pytest.approx(0.1, rel=0.1)
    assert statistics.pstdev(gaps) / statistics.fmean(gaps) == pytest.approx(2.0, rel=0.15)  # cv = 1/sqrt(k)


def test_constant_arrivals() -> None:
    assert arrival_times(3, 4.0, process="constant") == [0.0, 0.25, 0.5]


@pytest.mark.parametrize("rate", [0, -1, math.nan, math.inf])
def test_rate_must_be_positive(rate: float) -> None:
    with pytest.raises(InvalidInput, match=r"^rate="):
        arrival_times(3, rate)


def test_synthetic_closed_loop_has_no_arrival_times() -> None:
    specs = synthetic(3, LengthDist("fixed", 8), LengthDist("fixed", 4))
    assert [s.index for s in specs] == [0, 1, 2]
    assert all(math.isnan(s.arrival_s) and s.prompt_tokens == 8 and s.output_tokens == 4 for s in specs)


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "trace.csv"
    p.write_text(text)
    return p


def test_read_azure_layout_scaled_capped_and_counted(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n"
        "2023-11-16 18:15:50.9951690,3960,109\n"
        "2023-11-16 18:15:51.0000000,10,1\n",
    )
    specs = read_trace(p, max_requests=2, time_scale=0.5, max_prompt_tokens=1000)
    assert len(specs) == 2
    assert specs[0].arrival_s == 0.0
    assert specs[1].arrival_s == pytest.approx((50.995169 - 46.68059) * 0.5)
    assert (specs[1].prompt_tokens, specs[1].output_tokens) == (1000, 109)


def test_trace_with_missing_columns_names_them(tmp_path: Path) -> None:
    p = _write(tmp_path, "TIMESTAMP,ContextTokens\n1,2\n")
    with pytest.raises(InvalidInput, match="no output_tokens column"):
        read_trace(p)


def test_trace_going_back_in_time_names_the_line(tmp_path: Path) -> None:
    p = _write(tmp_path, "timestamp,input_tokens,output_tokens\n1.0,5,5\n3.0,5,5\n2.0,5,5\n")
    with pytest.raises(InvalidInput, match="back in time at line 4"):
        read_trace(p)


def test_trace_bad_rows_and_files(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="line 2"):
        read_trace(_write(tmp_path, "timestamp,input_tokens,output_tokens\n1.0,abc,5\n"))
    with pytest.raises(InvalidInput, match="token count < 1"):
        read_trace(_write(tmp_path, "timestamp,input_tokens,output_tokens\n1.0,0,5\n"))
    with pytest.raises(InvalidInput, match="no requests"):
        read_trace(_write(tmp_path, "timestamp,input_tokens,output_tokens\n"))
    with pytest.raises(InvalidInput, match="no such file"):
        read_trace(tmp_path / "missing.csv")
    with pytest.raises(InvalidInput, match="time_scale"):
        read_trace(_write(tmp_path, "timestamp,input_tokens,output_tokens\n1,1,1\n"), time_scale=0)


def test_a_trace_takes_one_pace_a_rate_or_a_time_scale(tmp_path: Path) -> None:
    """The library refuses a rate with a time scale, naming both, instead of silently using the rate;
    a rate that is not a positive number is refused by name."""
    p = _write(tmp_path, "timestamp,input_tokens,output_tokens\n0,1,1\n2,1,1\n4,1,1\n")
    assert [r.arrival_s for r in read_trace(p, rate=1.0)] == pytest.approx([0, 1, 2])
    assert [r.arrival_s for r in read_trace(p, time_scale=0.5)] == pytest.approx([0, 1, 2])
    with pytest.raises(InvalidInput, match=r"^rate=1\.0: and time_scale=0\.5 both set"):
        read_trace(p, time_scale=0.5, rate=1.0)
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(InvalidInput, match=r"^rate="):
            read_trace(p, rate=bad)
