"""Load-test configuration: one table of parameters, parsed once into a validated :class:`LoadTestConfig`.

:data:`PARAMS` is the single spelling of a load test's parameters: ``gpuplace loadtest`` makes its flags
from it, the ``load_test`` and ``serve_and_load_test`` components use the same names, and
:meth:`LoadTestConfig.from_params` reads a mapping of them (``0`` and ``""`` mean "unset", as KFP has no
None). The SLO, the prediction and the default traffic come from the plan (:mod:`gpuplace.plandir`)
when one is given, so a load test measures what the plan predicted; every bad value is rejected, naming
the field, before anything is sent or written.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuplace.errors import InvalidInput
from gpuplace.plandir import read_plan_dir
from gpuplace.types import DeploymentRecord
from gpuplace.types.plan import Prediction, Slo
from gpuplace.types.workload import LengthDist, RequestSpec, Traffic
from gpuplace.workload import check_rate, read_trace, synthetic

APIS = ("completions", "chat")
_DEFAULT_TRAFFIC = Traffic(LengthDist("fixed", 64), LengthDist("fixed", 32))


@dataclass(frozen=True, slots=True)
class Param:
    """One load-test parameter: its name (the component's, and the CLI flag with ``-``), type, default."""

    name: str
    kind: type
    default: Any
    help: str
    flag: str = ""  # the CLI flag when it is not --<name with dashes>
    choices: tuple[str, ...] = ()

    @property
    def cli_flag(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")


PARAMS: tuple[Param, ...] = (
    Param("endpoint", str, "", "base URL of the OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000"),
    Param("model", str, "", "the requests' model field (default: the deployment's, else the server's)"),
    Param("api", str, "completions", "completions or chat", choices=APIS),
    Param("tokenizer", str, "", "model directory or preset for exact prompt lengths (default: the served)"),
    Param("trace", str, "", "replay a trace CSV (Azure LLM trace layout) instead of synthetic load"),
    Param("time_scale", float, 1.0, "trace time × this (0.1 replays 10× faster)"),
    Param("prompt_tokens", str, "", "N | uniform:LO:HI | normal:MEAN:STD (default: the plan's, else 64)"),
    Param("output_tokens", str, "", "forced output length, same forms (default: the plan's, else 32)"),
    Param("max_prompt_tokens", int, 0, "cap on trace prompt lengths; 0 = none"),
    Param("max_output_tokens", int, 0, "cap on trace output lengths; 0 = none"),
    Param("rate", float, 0.0, "open loop, mean requests/s; 0 = the plan's rate, else a closed loop"),
    Param("arrival", str, "", "poisson | gamma | constant (default: the plan's, else poisson)"),
    Param("burstiness", float, 0.0, "gamma shape, < 1 burstier (default: the plan's, else 1)"),
    Param("concurrency", int, 0, "most requests in flight (closed loop, or a cap on an open one); 0 = none"),
    Param("max_requests", int, 100, "requests to send"),
    Param("max_duration_s", float, 0.0, "stop sending after this many seconds; 0 = none", "--max-duration"),
    Param("request_timeout_s", float, 600.0, "seconds per request", "--request-timeout"),
    Param("seed", int, 0, "seed of lengths, arrivals and prompts"),
)
PARAM_NAMES = frozenset(p.name for p in PARAMS)


@dataclass(frozen=True, slots=True)
class LoadTestConfig:
    """Everything one load test needs, validated; times in seconds."""

    endpoint: str
    model: str = ""  # the `model` field of requests; "" asks the server (/v1/models)
    api: str = "completions"
    tokenizer: str = ""  # model directory or preset; "" tries the deployment's model and the served name
    traffic: Traffic = _DEFAULT_TRAFFIC
    time_scale: float = 1.0
    max_prompt_tokens: int | None = None
    max_output_tokens: int | None = None
    rate: float | None = None
    concurrency: int | None = None
    max_requests: int = 100
    max_duration_s: float | None = None
    request_timeout_s: float = 600.0
    seed: int = 0
    slo: Slo = field(default_factory=Slo)
    predicted: Prediction | None = None  # the plan's prediction, when it is for the device measured
    prediction_note: str = ""  # why the plan's prediction is not compared, when it is not
    plan_id: str = ""
    deployment_model: str = ""
    warmup: bool = True

    @classmethod
    def from_params(
        cls,
        params: Mapping[str, Any],
        *,
        deployment: DeploymentRecord | None = None,
        plan: str | Path = "",
        slo: Slo | None = None,
        warmup: bool = True,
    ) -> LoadTestConfig:
        """From :data:`PARAMS` by name (missing names take their defaults; other keys are ignored).

        ``deployment`` (the deploy step's record) gives the endpoint and model; ``plan`` (a directory) gives
        the SLO, the prediction and the default traffic; the bounds ``slo`` sets override the plan's.
        """
        p = {q.name: params.get(q.name, q.default) for q in PARAMS}
        p = {k: (PARAM_DEFAULTS[k] if v is None else v) for k, v in p.items()}
        endpoint, model, deployment_model = str(p["endpoint"]), str(p["model"]), ""
        if deployment is not None:
            if endpoint and endpoint != deployment.endpoint:
                raise InvalidInput(
                    "endpoint", endpoint, f"conflicts with the deployment's {deployment.endpoint}", "Give one"
                )
            endpoint, model = deployment.endpoint, model or deployment.served_model_name
            deployment_model = deployment.model
        _check_endpoint(endpoint)
        planned = read_plan_dir(plan) if plan else None
        base = planned.plan.traffic if planned is not None else _DEFAULT_TRAFFIC
        traffic = Traffic(
            _length(p["prompt_tokens"], "prompt_tokens", base.prompt_tokens),
            _length(p["output_tokens"], "output_tokens", base.output_tokens),
            str(p["arrival"] or base.arrival),
            float(p["burstiness"] or base.burstiness),
            str(p["trace"]),
        )
        rate = _positive(p["rate"], "rate")
        concurrency = _count(p["concurrency"], "concurrency")
        if rate is None and concurrency is None and planned is not None and not traffic.trace:
            rate = planned.plan.slo.rate_rps  # measure the load the plan was made for
        if traffic.trace:
            if rate is not None and p["rate"]:
                raise InvalidInput("rate", rate, "does not apply to trace replay", "Use --time-scale")
            if not Path(traffic.trace).is_file():
                raise InvalidInput("trace", traffic.trace, "no such file", "Give the path of a trace CSV")
            rate = None
        if rate is not None:
            check_rate(rate)
        max_requests = int(p["max_requests"])
        if max_requests < 1:
            raise InvalidInput("max_requests", max_requests, "must be at least 1", "")
        time_scale = float(p["time_scale"])
        if not (math.isfinite(time_scale) and time_scale > 0):
            raise InvalidInput("time_scale", time_scale, "must be positive", "0.1 replays 10× faster")
        timeout = _positive(p["request_timeout_s"], "request_timeout_s")
        if timeout is None:
            raise InvalidInput("request_timeout_s", p["request_timeout_s"], "must be positive", "")
        if p["api"] not in APIS:
            raise InvalidInput("api", p["api"], f"must be one of {', '.join(APIS)}", "")
        plan_slo = planned.plan.slo if planned is not None else Slo()
        predicted, prediction_note = None, ""
        if planned is not None and planned.plan.prediction is not None:
            served_on = deployment.served_on if deployment is not None else ""
            predicted = planned.plan.prediction_for(served_on)
            if predicted is None:
                prediction_note = (
                    f"the plan's prediction is for {planned.plan.chosen.unit}; the requests were served on "
                    f"{served_on or 'a device the load test does not know (no deployment record)'}: "
                    "not compared"
                )
        return cls(
            endpoint=endpoint.rstrip("/"),
            model=model,
            api=str(p["api"]),
            tokenizer=str(p["tokenizer"]),
            traffic=traffic,
            time_scale=time_scale,
            max_prompt_tokens=_count(p["max_prompt_tokens"], "max_prompt_tokens"),
            max_output_tokens=_count(p["max_output_tokens"], "max_output_tokens"),
            rate=rate,
            concurrency=concurrency,
            max_requests=max_requests,
            max_duration_s=_positive(p["max_duration_s"], "max_duration_s"),
            request_timeout_s=timeout,
            seed=int(p["seed"]),
            slo=_merged(plan_slo, slo).with_rate(rate),
            predicted=predicted,
            prediction_note=prediction_note,
            plan_id=planned.plan.plan_id if planned is not None else "",
            deployment_model=deployment_model,
            warmup=warmup,
        )

    def workload(self) -> dict[str, Any]:
        """How the load was generated, as recorded in report.json."""
        t = self.traffic
        if t.trace:
            kind: dict[str, Any] = {"kind": "trace", "trace": t.trace, "time_scale": self.time_scale}
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


PARAM_DEFAULTS: Mapping[str, Any] = {p.name: p.default for p in PARAMS}


def _merged(base: Slo, override: Slo | None) -> Slo:
    if override is None:
        return base
    return Slo(
        ttft_p99_s=override.ttft_p99_s if override.ttft_p99_s is not None else base.ttft_p99_s,
        tpot_p99_s=override.tpot_p99_s if override.tpot_p99_s is not None else base.tpot_p99_s,
        rate_rps=override.rate_rps if override.rate_rps is not None else base.rate_rps,
    )


def _check_endpoint(endpoint: str) -> None:
    if not endpoint:
        raise InvalidInput("endpoint", endpoint, "is required", "Give --endpoint URL or --deployment FILE")
    if not endpoint.startswith(("http://", "https://")):
        raise InvalidInput("endpoint", endpoint, "is not an http(s) URL", "e.g. http://127.0.0.1:8000")


def _length(value: Any, name: str, default: LengthDist) -> LengthDist:
    return LengthDist.parse(value, field=name) if value not in ("", 0, None) else default


def _positive(value: Any, name: str) -> float | None:
    """``None`` for the edges' "unset" (0); else a positive finite number."""
    if value in (0, 0.0, None, ""):
        return None
    number = float(value)
    if not (math.isfinite(number) and number > 0):
        raise InvalidInput(name, value, "must be positive (0 = unset)", "")
    return number


def _count(value: Any, name: str) -> int | None:
    if value in (0, None, ""):
        return None
    number = int(value)
    if number < 1:
        raise InvalidInput(name, value, "must be at least 1 (0 = unset)", "")
    return number
