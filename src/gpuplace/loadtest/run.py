"""One load test end to end: resolve the served model and tokenizer, build prompts, run, write outputs.

:func:`run_loadtest_step` is what ``gpuplace loadtest`` and the ``load_test`` component run; the sweep
and the knee search (:mod:`.sweep`) reuse one :class:`Target` (an endpoint with its prompts built) for
every point. Outputs are written by :mod:`.io`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuplace.errors import CheckFailed
from gpuplace.loadtest.config import LoadTestConfig
from gpuplace.loadtest.io import write_outputs
from gpuplace.types.latency import PredictedVsMeasured
from gpuplace.types.loadtest import LatencyReport, RequestResult
from gpuplace.types.workload import RequestSpec


def _tokenizer_candidates(config: LoadTestConfig, served_model: str) -> list[str]:
    if config.tokenizer:
        return [config.tokenizer]
    out = []
    for spec in (config.deployment_model, served_model):
        if spec and (Path(spec).is_dir() or _is_preset(spec)):
            out.append(spec)
    return out


def _is_preset(name: str) -> bool:
    from gpuplace.catalog.models import model_preset_names

    return name in model_preset_names()


def served_model_name(endpoint: str, timeout_s: float = 10.0) -> str:
    """The first model id of ``GET /v1/models``; "" when the endpoint does not answer."""
    import urllib.request

    try:
        with urllib.request.urlopen(endpoint + "/v1/models", timeout=timeout_s) as resp:
            data = json.loads(resp.read()).get("data") or []
            return str(data[0]["id"]) if data else ""
    except (OSError, ValueError, KeyError, IndexError):
        return ""


@dataclass(frozen=True, slots=True)
class LoadTestResult:
    report: LatencyReport
    records: tuple[RequestResult, ...]
    prediction: PredictedVsMeasured | None  # the plan's, when it is for the device measured
    notes: tuple[str, ...]
    out_dir: Path


def build_prompts(config: LoadTestConfig, model: str, specs: Sequence[RequestSpec]) -> tuple[list[str], str]:
    """Prompts for the specs, and which tokenizer built them ("" = the approximate fallback)."""
    from gpuplace.loadtest.prompts import PromptBuilder, load_tokenizer

    tokenizer, source = None, ""
    for spec in _tokenizer_candidates(config, model):
        tokenizer, source = load_tokenizer(spec), spec
        break
    builder = PromptBuilder(tokenizer, api=config.api, seed=config.seed)
    return [builder.build(s.prompt_tokens) for s in specs], source


@dataclass
class Target:
    """An endpoint with its prompts built: what every point of a run, sweep or knee search shares."""

    config: LoadTestConfig
    endpoint: Any  # gpuplace.loadtest.client.EndpointState (aiohttp is imported lazily)
    prompts: list[str]
    tokenizer_source: str

    @classmethod
    def prepare(cls, config: LoadTestConfig, specs: Sequence[RequestSpec]) -> Target:
        from gpuplace.loadtest.client import EndpointState

        model = config.model or served_model_name(config.endpoint)
        prompts, tokenizer_source = build_prompts(config, model, specs)
        endpoint = EndpointState(base_url=config.endpoint, model=model, api=config.api)
        if not tokenizer_source:
            endpoint.notes.append("no tokenizer for the served model: prompt lengths are approximate")
        return cls(config, endpoint, prompts, tokenizer_source)

    def run(
        self,
        specs: Sequence[RequestSpec],
        *,
        concurrency: int | None,
        rate: float | None,
        show_progress: bool,
        stop_after: Callable[[Any], None] | None = None,
        label: str = "",
    ) -> Any:
        from gpuplace.loadtest.runner import RunOptions, run_load

        if rate is None and concurrency is None and not self.config.traffic.trace:
            concurrency = 1  # neither arrivals nor a cap: a closed loop of one, not a burst

        config = self.config
        options = RunOptions(
            concurrency=concurrency,
            max_duration_s=config.max_duration_s,
            request_timeout_s=config.request_timeout_s,
            slo=config.slo.with_rate(rate or config.slo.rate_rps),
            show_progress=show_progress,
            warmup=config.warmup,
        )
        workload = {**config.workload(), "model": self.endpoint.model, "tokenizer": self.tokenizer_source}
        workload["concurrency"] = concurrency
        if label:
            workload["point"] = label
        if rate is not None and not config.traffic.trace:
            workload["rate_rps"] = rate
        return run_load(self.endpoint, specs, self.prompts, options, workload=workload, stop_after=stop_after)


def run_loadtest_step(
    config: LoadTestConfig,
    out_dir: str | Path,
    *,
    show_progress: bool = True,
    stop_after: Callable[[Any], None] | None = None,
) -> LoadTestResult:
    """Run the load test and write records, report.json and summary.md under ``out_dir``."""
    out = Path(out_dir)
    specs = config.specs()
    target = Target.prepare(config, specs)
    result = target.run(
        specs,
        concurrency=config.concurrency,
        rate=config.rate,
        show_progress=show_progress,
        stop_after=stop_after,
    )
    prediction = PredictedVsMeasured.of(config.predicted, result.report) if config.predicted else None
    notes = (*result.endpoint_notes, *((config.prediction_note,) if config.prediction_note else ()))
    write_outputs(out, result.records, result.report, prediction, notes)
    return LoadTestResult(result.report, result.records, prediction, notes, out)


class NothingServed(CheckFailed):
    """The load test ran and no request succeeded (or the SLO attainment cannot be computed): the step
    fails, after its outputs are written, so a pipeline never reports a figure of a server that did not
    serve."""


def require_served(result: LoadTestResult, where: str = "the load test", endpoint: str = "") -> None:
    """Raise :class:`NothingServed` when no request of ``result`` succeeded or its SLO attainment is
    unknown; the message has the error kinds and the first error."""
    report = result.report
    if report.completed > 0 and not math.isnan(report.slo_attainment):
        return
    kinds = ", ".join(f"{k}={v}" for k, v in report.errors.items()) or "no request sent"
    first = next((r.error for r in result.records if r.error), "")
    raise NothingServed(
        f"{where}: no request succeeded of {report.completed + report.failed} sent ({kinds})"
        + (f"; first error: {first}" if first else "")
        + (f"; endpoint {endpoint}" if endpoint else "")
        + ". The records and report were written."
    )


def run_loadtest_to_paths(
    config: LoadTestConfig, *, records: str | Path, report: str | Path, summary: str | Path
) -> LoadTestResult:
    """Run the load test and put records.parquet, report.json and summary.md at the given paths
    (KFP hands each output its own path)."""
    import shutil
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        result = run_loadtest_step(config, tmp)
        for src, dest in (("records.parquet", records), ("report.json", report), ("summary.md", summary)):
            Path(dest).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(Path(tmp) / src, dest)
    return result
