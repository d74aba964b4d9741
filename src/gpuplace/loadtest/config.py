"""One load test's configuration: a :class:`LoadTestConfig` of typed, validated values.

The load-test step (:mod:`gpuplace.steps.loadtest`) builds it from its parameter table, the deployment
record and the plan (the edges' ``0`` and ``""`` for "unset" parsed there); this room takes the values only.
The config says how the load is generated (:meth:`LoadTestConfig.specs`) and how it is recorded in
report.json (:meth:`LoadTestConfig.workload`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuplace.types.plan import Prediction, Slo
from gpuplace.types.workload import LengthDist, RequestSpec, Traffic
from gpuplace.workload import read_trace, synthetic

APIS = ("completions", "chat")  # the endpoint's API the requests go to
DEFAULT_TRAFFIC = Traffic(LengthDist("fixed", 64), LengthDist("fixed", 32))


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadTestConfig:
    """Everything one load test needs, typed and checked by the step that builds it; times in seconds.
    No field has a default: the load-test step's table (:data:`gpuplace.steps.loadtest.PARAMS`) holds
    them, and :func:`gpuplace.steps.loadtest.load_test_config` is where a config is made."""

    endpoint: str
    model: str  # the `model` field of requests; "" asks the server (/v1/models)
    api: str
    tokenizer: str  # model directory or preset; "" tries the deployment's model and the served name
    traffic: Traffic
    time_scale: float
    max_prompt_tokens: int | None
    max_output_tokens: int | None
    rate: float | None
    concurrency: int | None
    max_requests: int
    max_duration_s: float | None
    request_timeout_s: float
    seed: int
    slo: Slo
    predicted: Prediction | None  # the plan's prediction, when it is for the device measured
    prediction_note: str  # why the plan's prediction is not compared, when it is not
    plan_id: str
    deployment_model: str
    warmup: bool

    def workload(self) -> dict[str, Any]:
        """How the load was generated, as recorded in report.json."""
        t = self.traffic
        if t.trace:
            # rate_rps: the mean rate its arrivals were scaled to (None: its own pace × time_scale)
            kind: dict[str, Any] = {
                "kind": "trace",
                "trace": t.trace,
                "time_scale": self.time_scale,
                "rate_rps": self.rate,
            }
        else:
            kind = {
                "kind": "synthetic",
                "prompt_tokens": t.prompt_tokens.describe(),
                "output_tokens": t.output_tokens.describe(),
                "rate_rps": self.rate,
                "arrival": t.arrival if self.rate else None,
                "burstiness": t.burstiness if t.arrival == "gamma" else None,
            }
        return {
            **kind,
            "endpoint": self.endpoint,
            "api": self.api,
            "concurrency": self.concurrency,
            "max_requests": self.max_requests,
            "max_duration_s": self.max_duration_s,
            "max_prompt_tokens": self.max_prompt_tokens,
            "max_output_tokens": self.max_output_tokens,
            "seed": self.seed,
        }

    def specs(self, rate: float | None = None) -> list[RequestSpec]:
        """The requests to send: the trace's, or synthetic ones at ``rate`` (default: the config's)."""
        t = self.traffic
        if t.trace:
            return read_trace(
                t.trace,
                max_requests=self.max_requests,
                time_scale=self.time_scale,
                rate=self.rate,
                max_prompt_tokens=self.max_prompt_tokens,
                max_output_tokens=self.max_output_tokens,
            )
        return synthetic(
            self.max_requests,
            t.prompt_tokens,
            t.output_tokens,
            rate=rate if rate is not None else self.rate,
            process=t.arrival,
            burstiness=t.burstiness,
            seed=self.seed,
        )
