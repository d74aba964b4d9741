"""The load-test step: its parameter table, the deployment record and the plan in, a load test's files out.

Shared by ``gpuplace loadtest`` and the ``load_test`` component. :data:`PARAMS` (a :mod:`gpuplace.params`
table) makes the command's flags and is checked against the component's signature (the
``serve_and_load_test`` step's table takes its rows from it). :func:`read_load_test_inputs` reads the deploy
step's record (:mod:`gpuplace.deploy.record`) and the plan directory (:mod:`gpuplace.plandir`) once into
values, and :func:`load_test_config` reads the parameters by the table's names into a
:class:`~gpuplace.loadtest.config.LoadTestConfig`: the endpoint and model from the record, the SLO, the
prediction and the default traffic from the plan, the edges' ``0`` and ``""`` as "unset" (KFP has no
None), every bad value refused by name before anything is sent or written. The run and its files are
:mod:`gpuplace.loadtest.run`'s and :mod:`gpuplace.loadtest.io`'s.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuplace.deploy.record import read_record
from gpuplace.errors import InvalidInput
from gpuplace.loadtest.config import APIS, DEFAULT_TRAFFIC, LoadTestConfig
from gpuplace.loadtest.run import LoadTestResult, run_loadtest_to_paths
from gpuplace.params import Param, parse_as
from gpuplace.plandir import read_plan_dir
from gpuplace.types import DeploymentRecord
from gpuplace.types.plan import PlacementPlan, Prediction, Slo
from gpuplace.types.workload import LengthDist, Traffic
from gpuplace.workload import check_rate, check_trace_pace

PARAMS: tuple[Param, ...] = (
    Param("endpoint", str, "", "base URL of the OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000"),
    Param("model", str, "", "the requests' model field (default: the deployment's, else the server's)"),
    Param("api", str, "completions", "completions or chat", choices=APIS),
    Param(
        "tokenizer",
        str,
        "",
        "model directory or preset for exact prompt lengths (default: the served)",
        component=False,  # a task tokenizes with the plan's model
    ),
    Param("trace", str, "", "replay a trace CSV (Azure LLM trace layout) instead of synthetic load"),
    Param("time_scale", float, 1.0, "trace time × this (0.1 replays 10× faster)"),
    Param("prompt_tokens", str, "", "N | uniform:LO:HI | normal:MEAN:STD (default: the plan's, else 64)"),
    Param("output_tokens", str, "", "forced output length, same forms (default: the plan's, else 32)"),
    Param("max_prompt_tokens", int, 0, "cap on trace prompt lengths; 0 = none"),
    Param("max_output_tokens", int, 0, "cap on trace output lengths; 0 = none"),
    Param(
        "rate",
        float,
        0.0,
        "open loop, mean requests/s; 0 = the plan's rate, else a closed loop",
        unit="req/s",
    ),
    Param("arrival", str, "", "poisson | gamma | constant (default: the plan's, else poisson)"),
    Param("burstiness", float, 0.0, "gamma shape, < 1 burstier (default: the plan's, else 1)"),
    Param("concurrency", int, 0, "most requests in flight (closed loop, or a cap on an open one); 0 = none"),
    Param("max_requests", int, 100, "requests to send"),
    Param(
        "max_duration_s",
        float,
        0.0,
        "stop sending after this many seconds; 0 = none",
        "--max-duration",
        unit="s",
    ),
    Param(
        "request_timeout_s",
        float,
        600.0,
        "seconds per request",
        "--request-timeout",
        unit="s",
        component=False,
    ),
    Param("seed", int, 0, "seed of lengths, arrivals and prompts"),
)


@dataclass(frozen=True, slots=True)
class LoadTestValues:
    """:data:`PARAMS`'s values, typed: one field per row, read by :func:`~gpuplace.params.parse_as` (its
    defaults are the table's alone)."""

    endpoint: str
    model: str
    api: str
    tokenizer: str
    trace: str
    time_scale: float
    prompt_tokens: str
    output_tokens: str
    max_prompt_tokens: int
    max_output_tokens: int
    rate: float
    arrival: str
    burstiness: float
    concurrency: int
    max_requests: int
    max_duration_s: float
    request_timeout_s: float
    seed: int


def read_load_test_inputs(
    deployment: str | Path = "", plan: str | Path = ""
) -> tuple[DeploymentRecord | None, PlacementPlan | None]:
    """The deployment record in the file ``deployment`` and the plan in the directory ``plan``, each read
    once ("" for none)."""
    return (
        read_record(deployment) if str(deployment) else None,
        read_plan_dir(plan).plan if str(plan) else None,
    )


def load_test_config(
    params: Mapping[str, Any],
    *,
    deployment: DeploymentRecord | None = None,
    plan: PlacementPlan | None = None,
    slo: Slo | None = None,
    warmup: bool = True,
) -> LoadTestConfig:
    """The load test ``params`` describe (:data:`PARAMS` by name; missing names take the table's
    defaults, other keys are ignored), validated.

    ``deployment`` (the deploy step's record) gives the endpoint and model; ``plan`` gives the SLO, the
    prediction and the default traffic; the bounds ``slo`` sets override the plan's.
    """
    p = parse_as(LoadTestValues, PARAMS, params)
    endpoint, model, deployment_model = p.endpoint, p.model, ""
    if deployment is not None:
        if endpoint and endpoint != deployment.endpoint:
            raise InvalidInput(
                "endpoint", endpoint, f"conflicts with the deployment's {deployment.endpoint}", "Give one"
            )
        endpoint, model = deployment.endpoint, model or deployment.served_model_name
        deployment_model = deployment.model
    _check_endpoint(endpoint)
    base = plan.traffic if plan is not None else DEFAULT_TRAFFIC
    traffic = Traffic(
        _length(p.prompt_tokens, "prompt_tokens", base.prompt_tokens),
        _length(p.output_tokens, "output_tokens", base.output_tokens),
        p.arrival or base.arrival,
        p.burstiness or base.burstiness,
        p.trace,
    )
    rate = _positive(p.rate, "rate")
    concurrency = _count(p.concurrency, "concurrency")
    if rate is None and concurrency is None and plan is not None and not traffic.trace:
        rate = plan.slo.rate_rps  # measure the load the plan was made for
    if p.max_requests < 1:
        raise InvalidInput("max_requests", p.max_requests, "must be at least 1", "")
    time_scale = p.time_scale
    if not (math.isfinite(time_scale) and time_scale > 0):
        raise InvalidInput("time_scale", time_scale, "must be positive", "0.1 replays 10× faster")
    if traffic.trace:
        check_trace_pace(traffic.trace, rate, time_scale)
    if rate is not None:
        check_rate(rate)
    timeout = _positive(p.request_timeout_s, "request_timeout_s")
    if timeout is None:
        raise InvalidInput("request_timeout_s", p.request_timeout_s, "must be positive", "")
    if p.api not in APIS:
        raise InvalidInput("api", p.api, f"must be one of {', '.join(APIS)}", "")
    plan_slo = plan.slo if plan is not None else Slo()
    predicted, prediction_note = _plan_prediction(plan, deployment)
    return LoadTestConfig(
        endpoint=endpoint.rstrip("/"),
        model=model,
        api=p.api,
        tokenizer=p.tokenizer,
        traffic=traffic,
        time_scale=time_scale,
        max_prompt_tokens=_count(p.max_prompt_tokens, "max_prompt_tokens"),
        max_output_tokens=_count(p.max_output_tokens, "max_output_tokens"),
        rate=rate,
        concurrency=concurrency,
        max_requests=p.max_requests,
        max_duration_s=_positive(p.max_duration_s, "max_duration_s"),
        request_timeout_s=timeout,
        seed=p.seed,
        slo=_merged(plan_slo, slo).with_rate(rate),
        predicted=predicted,
        prediction_note=prediction_note,
        plan_id=plan.plan_id if plan is not None else "",
        deployment_model=deployment_model,
        warmup=warmup,
    )


def _plan_prediction(
    plan: PlacementPlan | None, deployment: DeploymentRecord | None
) -> tuple[Prediction | None, str]:
    """The plan's prediction when it is for the device the requests were served on, else why it is not
    compared ("" when the plan has none)."""
    if plan is None or plan.prediction is None:
        return None, ""
    served_on = deployment.served_on if deployment is not None else ""
    predicted = plan.prediction_for(served_on)
    if predicted is not None:
        return predicted, ""
    return None, (
        f"the plan's prediction is for {plan.chosen.unit}; the requests were served on "
        f"{served_on or 'a device the load test does not know (no deployment record)'}: not compared"
    )


def run_load_test_step(
    params: Mapping[str, Any],
    *,
    deployment: str | Path,
    plan: str | Path,
    records: str | Path,
    report: str | Path,
    summary: str | Path,
) -> tuple[LoadTestConfig, LoadTestResult]:
    """The ``load_test`` component's step: its inputs read once, the config, then the run with each
    output in its own file."""
    record, placement = read_load_test_inputs(deployment, plan)
    config = load_test_config(params, deployment=record, plan=placement)
    return config, run_loadtest_to_paths(config, records=records, report=report, summary=summary)


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


def _length(value: str, name: str, default: LengthDist) -> LengthDist:
    return LengthDist.parse(value, field=name) if value else default  # "": the plan's, else the default


def _positive(value: float, name: str) -> float | None:
    """``None`` for the edges' "unset" (0); else a positive finite number."""
    if value == 0:
        return None
    if not (math.isfinite(value) and value > 0):
        raise InvalidInput(name, value, "must be positive (0 = unset)", "")
    return value


def _count(value: int, name: str) -> int | None:
    if value == 0:
        return None
    if value < 1:
        raise InvalidInput(name, value, "must be at least 1 (0 = unset)", "")
    return value
