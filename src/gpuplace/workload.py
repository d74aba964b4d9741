"""Traffic shapes, shared by the planner's serving simulation and the load tester: what to send (prompt and
output lengths) and when (arrival times), seeded. Pure standard library, so the planner may import it.

A workload is a list of :class:`RequestSpec`. Synthetic workloads draw lengths from a
:class:`LengthDist` (fixed, uniform or normal) and arrival times from a Poisson, gamma (burstiness)
or constant-rate process, as vLLM's ``bench serve`` does; a workload with no arrival times is sent at
a fixed concurrency (closed loop). Trace replay reads (timestamp, input tokens, output tokens) rows,
e.g. the Azure LLM inference trace, scaled in time and capped in count.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Sequence
from pathlib import Path

from gpuplace.errors import InvalidInput
from gpuplace.types.workload import ARRIVALS, LengthDist, RequestSpec, Traffic

__all__ = [
    "ARRIVALS",
    "LengthDist",
    "RequestSpec",
    "Traffic",
    "arrival_times",
    "check_rate",
    "read_trace",
    "synthetic",
]

# Column names accepted for trace files: the Azure trace's, and plain ones for user files.
TRACE_COLUMNS = {
    "timestamp": ("TIMESTAMP", "timestamp", "timestamp_s"),
    "input_tokens": ("ContextTokens", "input_tokens", "prompt_tokens"),
    "output_tokens": ("GeneratedTokens", "output_tokens", "completion_tokens"),
}


def check_rate(rate: float, field: str = "rate") -> float:
    if not (isinstance(rate, int | float) and math.isfinite(rate) and rate > 0):
        raise InvalidInput(field, rate, "must be a positive number of requests per second", "e.g. --rate 4")
    return float(rate)


def arrival_times(
    n: int, rate: float, *, process: str = "poisson", burstiness: float = 1.0, seed: int = 0
) -> list[float]:
    """``n`` send times (seconds, the first at 0) at a mean ``rate`` req/s.

    Gaps are gamma-distributed with shape ``burstiness`` and mean ``1/rate`` (vLLM): shape 1 is the
    Poisson process (exponential gaps), < 1 is burstier, > 1 smoother; ``constant`` has equal gaps.
    """
    rate = check_rate(rate)
    if process not in ARRIVALS:
        raise InvalidInput("arrival", process, f"must be one of {', '.join(ARRIVALS)}", "")
    if process == "poisson":
        burstiness = 1.0
    if not burstiness > 0:
        raise InvalidInput("burstiness", burstiness, "must be positive", "1 is Poisson; <1 burstier")
    rng = random.Random(seed)
    times, t = [], 0.0
    for i in range(n):
        if i:
            t += (
                1.0 / rate
                if process == "constant"
                else rng.gammavariate(burstiness, 1.0 / (rate * burstiness))
            )
        times.append(t)
    return times


def synthetic(
    n: int,
    prompt_tokens: LengthDist,
    output_tokens: LengthDist,
    *,
    rate: float | None = None,
    process: str = "poisson",
    burstiness: float = 1.0,
    seed: int = 0,
) -> list[RequestSpec]:
    """``n`` requests with seeded lengths; arrival times when ``rate`` is given, else NaN (closed loop)."""
    if n < 1:
        raise InvalidInput("max_requests", n, "must be at least 1", "")
    rng = random.Random(seed + 1)
    times = (
        arrival_times(n, rate, process=process, burstiness=burstiness, seed=seed) if rate else [math.nan] * n
    )
    return [RequestSpec(i, times[i], prompt_tokens.sample(rng), output_tokens.sample(rng)) for i in range(n)]


def _column(header: Sequence[str], role: str, path: Path) -> int:
    for name in TRACE_COLUMNS[role]:
        if name in header:
            return header.index(name)
    raise InvalidInput(
        "trace",
        str(path),
        f"has no {role} column (looked for {', '.join(TRACE_COLUMNS[role])}; found {', '.join(header)})",
        "Use the Azure trace layout TIMESTAMP,ContextTokens,GeneratedTokens",
    )


def _parse_time(text: str) -> float:
    """Seconds: a plain number, or an ISO timestamp such as the Azure trace's (7 fractional digits)."""
    try:
        return float(text)
    except ValueError:
        pass
    from datetime import datetime

    date, _, frac = text.strip().partition(".")
    seconds = datetime.fromisoformat(date).timestamp()
    return seconds + (float(f"0.{frac}") if frac else 0.0)


def check_trace_pace(trace: str | Path, rate: float | None, time_scale: float) -> None:
    """What :func:`read_trace` refuses before it reads a row: a file that is not there, a rate that is not
    a positive number, and a ``rate`` with a ``time_scale`` other than 1 (both would set the pace)."""
    if not Path(trace).is_file():
        raise InvalidInput("trace", str(trace), "no such file", "Give the path of a trace CSV")
    if not (math.isfinite(time_scale) and time_scale > 0):
        raise InvalidInput("time_scale", time_scale, "must be positive", "0.1 replays 10× faster")
    if rate is not None:
        check_rate(rate)
    if rate is not None and time_scale != 1.0:
        raise InvalidInput(
            "rate",
            rate,
            f"and time_scale={time_scale:g} both set the trace's pace",
            "Give one: --rate replays it at that mean rate, --time-scale scales its own",
        )


def read_trace(
    path: str | Path,
    *,
    max_requests: int | None = None,
    time_scale: float = 1.0,
    rate: float | None = None,
    max_prompt_tokens: int | None = None,
    max_output_tokens: int | None = None,
) -> list[RequestSpec]:
    """Requests replayed from a trace CSV, arrival times relative to its first row × ``time_scale``, or,
    given a ``rate`` (requests/s), scaled so the rows read have that mean rate, the gaps' pattern kept:
    (rows − 1) ÷ (their span × rate); rows that span no time stay as recorded.

    Rows must be in time order (a trace that goes back in time is rejected, naming the row); a ``rate``
    with a ``time_scale`` other than 1 is refused, as both would set the pace; token counts are capped
    at ``max_prompt_tokens``/``max_output_tokens`` when given (for small models).
    """
    import csv

    path = Path(path)
    check_trace_pace(path, rate, time_scale)
    specs: list[RequestSpec] = []
    with path.open(newline="") as f:
        reader = csv.reader(f)
        header = [h.strip() for h in next(reader, [])]
        cols = [_column(header, role, path) for role in ("timestamp", "input_tokens", "output_tokens")]
        first = previous = math.nan
        for line_no, row in enumerate(reader, start=2):
            if max_requests is not None and len(specs) >= max_requests:
                break
            if not row:
                continue
            try:
                t = _parse_time(row[cols[0]])
                inp, out = int(row[cols[1]]), int(row[cols[2]])
            except (ValueError, IndexError):
                raise InvalidInput(
                    "trace", str(path), f"line {line_no} is not (time, tokens, tokens): {row}", "Fix the row"
                ) from None
            if t < previous:
                raise InvalidInput(
                    "trace",
                    str(path),
                    f"timestamps go back in time at line {line_no} ({row[cols[0]]})",
                    "Sort the trace by time",
                )
            if inp < 1 or out < 1:
                raise InvalidInput("trace", str(path), f"line {line_no} has a token count < 1", "Fix the row")
            if math.isnan(first):
                first = t
            previous = t
            inp = min(inp, max_prompt_tokens) if max_prompt_tokens else inp
            out = min(out, max_output_tokens) if max_output_tokens else out
            specs.append(RequestSpec(len(specs), (t - first) * time_scale, inp, out))
    if not specs:
        raise InvalidInput("trace", str(path), "has no requests", "Give a trace with at least one row")
    span = specs[-1].arrival_s
    if rate is None or span <= 0:
        return specs
    scale = (len(specs) - 1) / (span * rate)
    return [dataclasses.replace(r, arrival_s=r.arrival_s * scale) for r in specs]
