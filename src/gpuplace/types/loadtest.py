"""Load-test value types: the latency SLO, one record per request, and the summary report.

The load tester (:mod:`gpuplace.loadtest`) produces :class:`RequestResult` records and summarises them
into a :class:`LatencyReport`, judging goodput by the plan's :class:`~gpuplace.types.plan.Slo`. Times
are seconds; request times are relative to the start of the run (a monotonic clock), so records of one
run compare directly. Metric
definitions follow vLLM's ``bench serve`` (docs/loadtest.md).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from gpuplace.types.plan import Slo
from gpuplace.types.stats import Distribution


def _nan_to_none(value: Any) -> Any:
    return None if isinstance(value, float) and (math.isnan(value) or math.isinf(value)) else value


@dataclass(frozen=True, slots=True)
class RequestResult:
    """One request of a load test, successful or not; a failure is data, never an exception.

    ``scheduled_s`` is when the arrival process wanted the request sent and ``start_s`` when it was
    sent (both relative to the run start); ``ttft_s`` and ``e2e_s`` are relative to ``start_s``.
    ``chunk_times_s`` holds the arrival time (relative to ``start_s``) of every streamed chunk that
    carried text. ``output_tokens`` is the server's ``usage.completion_tokens`` when it sent usage
    (``output_tokens_source == "usage"``), else the count of text chunks (``"chunks"``).
    """

    index: int
    scheduled_s: float
    start_s: float
    prompt_tokens: int  # the prompt length the workload asked for
    max_tokens: int  # the output length the workload asked for
    success: bool
    ttft_s: float = math.nan
    e2e_s: float = math.nan
    chunk_times_s: tuple[float, ...] = ()
    output_tokens: int = 0
    output_tokens_source: str = ""
    server_prompt_tokens: int | None = None  # usage.prompt_tokens, when the server sent it
    status: int | None = None  # HTTP status; None when no response arrived
    error_kind: str = ""  # "", connect, timeout, http_4xx, http_5xx, stream_cut, malformed, cancelled, ...
    error: str = ""

    @property
    def tpot_s(self) -> float:
        """(e2e − TTFT) / (output tokens − 1); NaN with fewer than two output tokens (vLLM)."""
        if not self.success or self.output_tokens < 2:
            return math.nan
        return (self.e2e_s - self.ttft_s) / (self.output_tokens - 1)

    @property
    def itl_s(self) -> tuple[float, ...]:
        """Gaps between consecutive streamed chunks (the first gap starts at the first token)."""
        t = self.chunk_times_s
        return tuple(b - a for a, b in itertools.pairwise(t))

    @property
    def end_s(self) -> float:
        return self.start_s + self.e2e_s

    def to_json_dict(self) -> dict[str, Any]:
        data = {k: _nan_to_none(v) for k, v in asdict(self).items()}
        data["chunk_times_s"] = list(self.chunk_times_s)
        return data

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> RequestResult:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        for key in ("scheduled_s", "start_s", "ttft_s", "e2e_s"):
            if known.get(key) is None:
                known[key] = math.nan
        known["chunk_times_s"] = tuple(float(t) for t in known.get("chunk_times_s") or ())
        return cls(**known)


@dataclass(frozen=True, slots=True)
class LatencyReport:
    """The summary of a load test (``summarize``), in seconds; report.json holds exactly this.

    Throughputs divide by ``duration_s``, the wall time from the run start to the last completion
    (vLLM's ``benchmark_duration``). ``goodput_rps`` counts successful requests that meet every SLO
    bound; ``slo_attainment`` is their share of all sent requests. ``arrival_lag`` is how late each
    request left against its schedule: the generator's own accuracy.
    """

    requests: int
    completed: int
    failed: int
    errors: Mapping[str, int]  # error_kind → count
    duration_s: float
    ttft: Distribution
    tpot: Distribution
    itl: Distribution
    e2e: Distribution
    arrival_lag: Distribution
    request_throughput_rps: float
    output_throughput_tps: float
    total_token_throughput_tps: float
    input_tokens: int
    output_tokens: int
    goodput_rps: float
    slo_attainment: float
    peak_concurrency: int
    slo: Slo = field(default_factory=Slo)
    slo_met: bool | None = None  # None when the SLO has no bound
    interrupted: bool = False
    workload: Mapping[str, Any] = field(default_factory=dict)  # how the load was generated
    started_at_s: float = math.nan  # wall clock (epoch s) when the run started, and when it ended
    finished_at_s: float = math.nan

    def to_json_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if isinstance(value, Distribution | Slo):
                data[name] = value.to_json_dict()
            elif isinstance(value, Mapping):
                data[name] = dict(value)
            else:
                data[name] = _nan_to_none(value)
        return data

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> LatencyReport:
        known: dict[str, Any] = {}
        for name, f in cls.__dataclass_fields__.items():
            if name not in data:
                continue
            value = data[name]
            if f.type == "Distribution":
                known[name] = Distribution.from_json_dict(value)
            elif name == "slo":
                known[name] = Slo.from_json_dict(value)
            elif value is None and f.type == "float":
                known[name] = math.nan
            else:
                known[name] = value
        return cls(**known)
