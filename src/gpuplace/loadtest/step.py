"""The load-test step shared by ``gpuplace loadtest`` and the ``load_test`` component.

Parses parameters once into a :class:`LoadTestConfig` (every bad value is rejected, naming the field,
before anything is sent or written), resolves the endpoint (a URL or a ``deployment.json``), the
served model and the tokenizer, builds the workload and prompts, runs it, and writes the outputs:
``records.parquet`` and ``records.jsonl`` (one row per request), ``report.json`` (the
:class:`LatencyReport`, seconds, plus the plan comparison when a plan is given) and ``summary.md``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuplace.errors import InvalidInput
from gpuplace.loadtest.metrics import prediction_error
from gpuplace.types import DeploymentRecord
from gpuplace.types.core import json_clean
from gpuplace.types.loadtest import LatencyReport, RequestResult, SloBounds
from gpuplace.workload import ARRIVALS, LengthDist, RequestSpec, check_rate, read_trace, synthetic

APIS = ("completions", "chat")


@dataclass(frozen=True, slots=True)
class LoadTestConfig:
    """Everything one load test needs, validated."""

    endpoint: str
    model: str = ""  # the `model` field of requests; "" asks the server (/v1/models)
    api: str = "completions"
    tokenizer: str = ""  # model directory or preset; "" tries the deployment's model and the served name
    trace: str = ""
    time_scale: float = 1.0
    prompt_tokens: LengthDist = field(default_factory=lambda: LengthDist("fixed", 64))
    output_tokens: LengthDist = field(default_factory=lambda: LengthDist("fixed", 32))
    max_prompt_tokens: int | None = None
    max_output_tokens: int | None = None
    rate: float | None = None
    arrival: str = "poisson"
    burstiness: float = 1.0
    concurrency: int | None = None
    max_requests: int = 100
    max_duration_s: float | None = None
    request_timeout_s: float = 600.0
    seed: int = 0
    slo: SloBounds = field(default_factory=SloBounds)
    predicted: Mapping[str, Any] | None = None  # the plan's `predicted` object
    deployment_model: str = ""
    warmup: bool = True

    @classmethod
    def from_params(
        cls,
        *,
        endpoint: str = "",
        deployment: str = "",
        model: str = "",
        api: str = "completions",
        tokenizer: str = "",
        trace: str = "",
        time_scale: float = 1.0,
        prompt_tokens: str | int = "64",
        output_tokens: str | int = "32",
        max_prompt_tokens: int | None = None,
        max_output_tokens: int | None = None,
        rate: float | None = None,
        arrival: str = "poisson",
        burstiness: float = 1.0,
        concurrency: int | None = None,
        max_requests: int = 100,
        max_duration_s: float | None = None,
        request_timeout_s: float = 600.0,
        seed: int = 0,
        slo_ttft_s: float | None = None,
        slo_tpot_s: float | None = None,
        plan: str = "",
        warmup: bool = True,
    ) -> LoadTestConfig:
        deployment_model = ""
        if deployment:
            record = read_deployment(deployment)
            if endpoint and endpoint != record.endpoint:
                raise InvalidInput(
                    "endpoint", endpoint, f"conflicts with the deployment's {record.endpoint}", "Give one"
                )
            endpoint = record.endpoint
            model = model or record.served_model_name
            deployment_model = record.model
        if not endpoint:
            raise InvalidInput(
                "endpoint", endpoint, "is required", "Give --endpoint URL or --deployment FILE"
            )
        if not endpoint.startswith(("http://", "https://")):
            raise InvalidInput("endpoint", endpoint, "is not an http(s) URL", "e.g. http://127.0.0.1:8000")
        if api not in APIS:
            raise InvalidInput("api", api, f"must be one of {', '.join(APIS)}", "")
        if arrival not in ARRIVALS:
            raise InvalidInput("arrival", arrival, f"must be one of {', '.join(ARRIVALS)}", "")
        if rate is not None:
            check_rate(rate)
        if max_requests < 1:
            raise InvalidInput("max_requests", max_requests, "must be at least 1", "")
        if concurrency is not None and concurrency < 1:
            raise InvalidInput("concurrency", concurrency, "must be at least 1", "e.g. --concurrency 4")
        if trace and rate is not None:
            raise InvalidInput("rate", rate, "does not apply to trace replay", "Use --time-scale")
        if not (math.isfinite(time_scale) and time_scale > 0):
            raise InvalidInput("time_scale", time_scale, "must be positive", "0.1 replays 10× faster")
        if not burstiness > 0:
            raise InvalidInput("burstiness", burstiness, "must be positive", "1 is Poisson")
        if max_duration_s is not None and not max_duration_s > 0:
            raise InvalidInput("max_duration_s", max_duration_s, "must be positive", "")
        if not request_timeout_s > 0:
            raise InvalidInput("request_timeout_s", request_timeout_s, "must be positive", "")
        for name, cap in (("max_prompt_tokens", max_prompt_tokens), ("max_output_tokens", max_output_tokens)):
            if cap is not None and cap < 1:
                raise InvalidInput(name, cap, "must be at least 1", "")
        slo = SloBounds()
        for name, value in (("slo_ttft_s", slo_ttft_s), ("slo_tpot_s", slo_tpot_s)):
            if value is not None and not value > 0:
                raise InvalidInput(name, value, "must be a positive number of seconds", "")
        slo = SloBounds(slo_ttft_s or math.inf, slo_tpot_s or math.inf, rate if rate else math.nan)
        if trace and not Path(trace).is_file():
            raise InvalidInput("trace", trace, "no such file", "Give the path of a trace CSV")
        return cls(
            endpoint=endpoint.rstrip("/"),
            model=model,
            api=api,
            tokenizer=tokenizer,
            trace=trace,
            time_scale=time_scale,
            prompt_tokens=LengthDist.parse(prompt_tokens, field="prompt_tokens"),
            output_tokens=LengthDist.parse(output_tokens, field="output_tokens"),
            max_prompt_tokens=max_prompt_tokens,
            max_output_tokens=max_output_tokens,
            rate=rate,
            arrival=arrival,
            burstiness=burstiness,
            concurrency=concurrency,
            max_requests=max_requests,
            max_duration_s=max_duration_s,
            request_timeout_s=request_timeout_s,
            seed=seed,
            slo=slo,
            predicted=read_plan_prediction(plan) if plan else None,
            deployment_model=deployment_model,
            warmup=warmup,
        )

    def workload(self) -> dict[str, Any]:
        """How the load was generated, as recorded in report.json."""
        if self.trace:
            kind: dict[str, Any] = {"kind": "trace", "trace": self.trace, "time_scale": self.time_scale}
        else:
            kind = {
                "kind": "synthetic",
                "prompt_tokens": self.prompt_tokens.describe(),
                "output_tokens": self.output_tokens.describe(),
                "rate_rps": self.rate,
                "arrival": self.arrival if self.rate else None,
                "burstiness": self.burstiness if self.arrival == "gamma" else None,
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
        if self.trace:
            return read_trace(
                self.trace,
                max_requests=self.max_requests,
                time_scale=self.time_scale,
                max_prompt_tokens=self.max_prompt_tokens,
                max_output_tokens=self.max_output_tokens,
            )
        return synthetic(
            self.max_requests,
            self.prompt_tokens,
            self.output_tokens,
            rate=rate if rate is not None else self.rate,
            process=self.arrival,
            burstiness=self.burstiness,
            seed=self.seed,
        )


def read_deployment(path: str | Path) -> DeploymentRecord:
    p = Path(path)
    try:
        data = json.loads(p.read_text())
        return DeploymentRecord.from_json_dict(data)
    except FileNotFoundError:
        raise InvalidInput(
            "deployment", str(p), "no such file", "Give the deployment.json of gpuplace deploy"
        ) from None
    except (json.JSONDecodeError, TypeError, AttributeError) as e:
        raise InvalidInput("deployment", str(p), f"is not a deployment record ({e})", "") from None


def read_plan_prediction(path: str | Path) -> dict[str, Any]:
    """The plan's ``predicted`` object (``tpot_p99_s``, ``ttft_p99_s``); {} when the plan has none."""
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except FileNotFoundError:
        raise InvalidInput("plan", str(p), "no such file", "Give the plan.json of gpuplace plan") from None
    except json.JSONDecodeError as e:
        raise InvalidInput("plan", str(p), f"is not JSON ({e.msg} at line {e.lineno})", "") from None
    predicted = data.get("predicted") if isinstance(data, dict) else None
    return dict(predicted) if isinstance(predicted, dict) else {}


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
    prediction: Mapping[str, Mapping[str, float]]
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
class _Target:
    """An endpoint with its prompts built: what every point of a run, sweep or knee search shares."""

    config: LoadTestConfig
    endpoint: Any  # gpuplace.loadtest.client.EndpointState (aiohttp is imported lazily)
    prompts: list[str]
    tokenizer_source: str

    @classmethod
    def prepare(cls, config: LoadTestConfig, specs: Sequence[RequestSpec]) -> _Target:
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

        config = self.config
        options = RunOptions(
            concurrency=concurrency,
            max_duration_s=config.max_duration_s,
            request_timeout_s=config.request_timeout_s,
            slo=SloBounds(
                config.slo.ttft_p99_s, config.slo.tpot_p99_s, rate if rate else config.slo.rate_rps
            ),
            show_progress=show_progress,
            warmup=config.warmup,
        )
        workload = {**config.workload(), "model": self.endpoint.model, "tokenizer": self.tokenizer_source}
        workload.update({"concurrency": concurrency, "point": label} if label else {})
        if rate is not None and not config.trace:
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
    target = _Target.prepare(config, specs)
    result = target.run(
        specs,
        concurrency=config.concurrency,
        rate=config.rate,
        show_progress=show_progress,
        stop_after=stop_after,
    )
    prediction = prediction_error(result.report, config.predicted) if config.predicted else {}
    write_outputs(out, result.records, result.report, prediction, result.endpoint_notes)
    return LoadTestResult(result.report, result.records, prediction, result.endpoint_notes, out)


def run_sweep_step(
    config: LoadTestConfig,
    out_dir: str | Path,
    *,
    rates: Sequence[float] = (),
    concurrencies: Sequence[int] = (),
    show_progress: bool = True,
) -> list[tuple[str, LatencyReport]]:
    """One load test per rate (Poisson/gamma/constant) or per concurrency, each in ``out/<label>/``.

    Writes ``sweep.json`` (label → report) beside the point directories.
    """
    for r in rates:
        check_rate(r, "rates")
    for c in concurrencies:
        if c < 1:
            raise InvalidInput("concurrencies", c, "must be at least 1", "e.g. --concurrencies 1,2,4")
    if config.trace and rates:
        raise InvalidInput("rates", list(rates), "do not apply to trace replay", "Sweep --concurrencies")
    out = Path(out_dir)
    points: list[tuple[str, float | None, int | None]] = [
        (f"rate-{r:g}", r, config.concurrency) for r in rates
    ]
    points += [(f"concurrency-{c}", config.rate, c) for c in concurrencies]
    if not points:
        raise InvalidInput("rates", "", "a sweep needs rates or concurrencies", "e.g. --rates 1,2,4")
    base_specs = config.specs()
    target = _Target.prepare(config, base_specs)
    reports = []
    for label, rate, concurrency in points:
        specs = config.specs(rate) if rate != config.rate else base_specs
        result = target.run(
            specs,
            concurrency=concurrency,
            rate=rate,
            show_progress=show_progress,
            label=label,
        )
        prediction = prediction_error(result.report, config.predicted) if config.predicted else {}
        write_outputs(out / label, result.records, result.report, prediction, result.endpoint_notes)
        reports.append((label, result.report))
    sweep = {label: report.to_json_dict() for label, report in reports}
    (out / "sweep.json").write_text(json.dumps(sweep, indent=2, allow_nan=False) + "\n")
    return reports


def run_knee_step(
    config: LoadTestConfig,
    out_dir: str | Path,
    *,
    low_rps: float,
    high_rps: float,
    target_share: float = 0.9,
    iterations: int = 4,
    show_progress: bool = True,
) -> tuple[float, list[tuple[float, LatencyReport]]]:
    """The highest rate whose SLO attainment ≥ ``target_share``; writes knee.json and a dir per trial."""
    from gpuplace.loadtest.runner import find_knee

    if not config.slo.bounded:
        raise InvalidInput("slo", "", "a knee search needs an SLO", "Give --slo-ttft-ms and/or --slo-tpot-ms")
    if config.trace:
        raise InvalidInput("trace", config.trace, "a knee search varies the rate of a synthetic load", "")
    out = Path(out_dir)
    base_specs = config.specs(low_rps)
    target = _Target.prepare(config, base_specs)

    def evaluate(rate: float) -> LatencyReport:
        label = f"rate-{rate:g}"
        result = target.run(
            config.specs(rate),
            concurrency=config.concurrency,
            rate=rate,
            show_progress=show_progress,
            label=label,
        )
        write_outputs(out / label, result.records, result.report, {}, result.endpoint_notes)
        report: LatencyReport = result.report
        return report

    knee, trials = find_knee(
        evaluate, low_rps=low_rps, high_rps=high_rps, target_share=target_share, iterations=iterations
    )
    summary = {
        "knee_rps": knee,
        "target_share": target_share,
        "slo": config.slo.to_json_dict(),
        "trials": [
            {"rate_rps": r, "slo_attainment": rep.slo_attainment, "goodput_rps": rep.goodput_rps}
            for r, rep in trials
        ],
    }
    (out / "knee.json").write_text(json.dumps(summary, indent=2, allow_nan=False) + "\n")
    return knee, trials


def write_outputs(
    out: Path,
    records: Sequence[RequestResult],
    report: LatencyReport,
    prediction: Mapping[str, Any],
    notes: Sequence[str] = (),
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    write_records(records, out / "records.parquet", out / "records.jsonl")
    data = report.to_json_dict()
    data["predicted_vs_measured"] = json_clean(dict(prediction))  # NaN when nothing completed
    data["notes"] = list(notes)
    (out / "report.json").write_text(json.dumps(data, indent=2, allow_nan=False) + "\n")
    (out / "summary.md").write_text(format_markdown(report, prediction, notes))


def write_records(records: Sequence[RequestResult], parquet: Path, jsonl: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [r.to_json_dict() for r in records]
    with jsonl.open("w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    schema = pa.schema(
        [
            ("index", pa.int64()),
            ("scheduled_s", pa.float64()),
            ("start_s", pa.float64()),
            ("prompt_tokens", pa.int64()),
            ("max_tokens", pa.int64()),
            ("success", pa.bool_()),
            ("ttft_s", pa.float64()),
            ("e2e_s", pa.float64()),
            ("chunk_times_s", pa.list_(pa.float64())),
            ("output_tokens", pa.int64()),
            ("output_tokens_source", pa.string()),
            ("server_prompt_tokens", pa.int64()),
            ("status", pa.int64()),
            ("error_kind", pa.string()),
            ("error", pa.string()),
        ]
    )
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), parquet)


def read_records(path: str | Path) -> list[RequestResult]:
    """Records from ``records.jsonl`` or ``records.parquet``."""
    p = Path(path)
    if p.suffix == ".parquet":
        import pyarrow.parquet as pq

        rows = pq.read_table(p).to_pylist()
    else:
        rows = [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
    return [RequestResult.from_json_dict(row) for row in rows]


def _ms(value: float) -> str:
    return "-" if math.isnan(value) else f"{value * 1000:.1f}"


def format_table(report: LatencyReport) -> str:
    """The report as a plain-text table (milliseconds), for the terminal."""
    lines = [
        f"requests {report.requests}: {report.completed} completed, {report.failed} failed"
        + (f" ({', '.join(f'{k}={v}' for k, v in report.errors.items())})" if report.errors else "")
        + (" — INTERRUPTED, partial results" if report.interrupted else ""),
        f"duration {report.duration_s:.2f} s   peak concurrency {report.peak_concurrency}",
        f"throughput {report.request_throughput_rps:.2f} req/s"
        f"   output {report.output_throughput_tps:.1f} tok/s"
        f"   total {report.total_token_throughput_tps:.1f} tok/s",
        "",
        f"{'metric (ms)':14}{'mean':>10}{'p50':>10}{'p90':>10}{'p95':>10}{'p99':>10}{'n':>8}",
    ]
    for name in ("ttft", "tpot", "itl", "e2e", "arrival_lag"):
        d = getattr(report, name)
        lines.append(
            f"{name:14}{_ms(d.mean):>10}{_ms(d.p50):>10}{_ms(d.p90):>10}{_ms(d.p95):>10}{_ms(d.p99):>10}{d.count:>8}"
        )
    if report.slo.bounded:
        lines += [
            "",
            f"SLO p99 TTFT ≤ {_ms(report.slo.ttft_p99_s)} ms, p99 TPOT ≤ {_ms(report.slo.tpot_p99_s)} ms: "
            f"{'met' if report.slo_met else 'MISSED'}; goodput {report.goodput_rps:.2f} req/s, "
            f"attainment {report.slo_attainment:.1%}",
        ]
    return "\n".join(lines)


def format_prediction(prediction: Mapping[str, Mapping[str, float]]) -> str:
    return "\n".join(
        f"{key.removesuffix('_s').replace('_', ' ')}: predicted {_ms(v['predicted_s'])} ms, "
        f"measured {_ms(v['measured_s'])} ms ({v['error']:+.1%})"
        for key, v in prediction.items()
    )


def format_markdown(
    report: LatencyReport, prediction: Mapping[str, Mapping[str, float]] = {}, notes: Sequence[str] = ()
) -> str:
    rows = "\n".join(
        f"| {name} | {_ms(d.mean)} | {_ms(d.p50)} | {_ms(d.p90)} | {_ms(d.p99)} | {d.count} |"
        for name, d in (
            ("TTFT", report.ttft),
            ("TPOT", report.tpot),
            ("ITL", report.itl),
            ("E2E", report.e2e),
        )
    )
    text = (
        "# Load test\n\n"
        f"{report.requests} requests, {report.completed} completed, {report.failed} failed"
        + (f" ({', '.join(f'{k}: {v}' for k, v in report.errors.items())})" if report.errors else "")
        + (" — interrupted, partial results" if report.interrupted else "")
        + f"; {report.duration_s:.2f} s; {report.request_throughput_rps:.2f} req/s; "
        f"{report.output_throughput_tps:.1f} output tok/s; peak concurrency {report.peak_concurrency}.\n\n"
        "| metric (ms) | mean | p50 | p90 | p99 | n |\n|---|---|---|---|---|---|\n" + rows + "\n"
    )
    if report.slo.bounded:
        text += (
            f"\nSLO (p99 TTFT ≤ {_ms(report.slo.ttft_p99_s)} ms, "
            f"p99 TPOT ≤ {_ms(report.slo.tpot_p99_s)} ms): "
            f"**{'met' if report.slo_met else 'missed'}**, goodput {report.goodput_rps:.2f} req/s, "
            f"attainment {report.slo_attainment:.1%}.\n"
        )
    if prediction:
        text += (
            "\nPredicted vs measured:\n\n"
            + "\n".join(f"- {line}" for line in format_prediction(prediction).splitlines())
            + "\n"
        )
    if notes:
        text += "\nNotes:\n\n" + "\n".join(f"- {n}" for n in notes) + "\n"
    return text


def report_metrics(
    report: LatencyReport, prediction: Mapping[str, Mapping[str, float]] = {}
) -> dict[str, float]:
    """Scalar metrics for KFP/MLflow: latencies in ms, throughputs, counts; NaN-free."""
    out: dict[str, float] = {
        "requests": float(report.requests),
        "completed": float(report.completed),
        "failed": float(report.failed),
        "duration_s": report.duration_s,
        "request_throughput_rps": report.request_throughput_rps,
        "output_throughput_tps": report.output_throughput_tps,
        "goodput_rps": report.goodput_rps,
        "slo_attainment": report.slo_attainment,
        "peak_concurrency": float(report.peak_concurrency),
    }
    for name in ("ttft", "tpot", "itl", "e2e"):
        d = getattr(report, name)
        for stat in ("mean", "p50", "p90", "p99"):
            out[f"{name}_{stat}_ms"] = getattr(d, stat) * 1000
    for key, v in prediction.items():
        out[f"{key.removesuffix('_s')}_prediction_error"] = v["error"]
    return {k: v for k, v in out.items() if math.isfinite(v)}


def config_from_component_params(
    *,
    plan: str = "",
    slo_ttft_ms: float = 0.0,
    slo_tpot_ms: float = 0.0,
    rate: float = 0.0,
    concurrency: int = 0,
    max_prompt_tokens: int = 0,
    max_output_tokens: int = 0,
    max_duration_s: float = 0.0,
    **params: Any,
) -> LoadTestConfig:
    """The KFP components' spelling of a load test: 0 means "unset", SLOs in milliseconds, and the
    plan as a plan directory or plan.json. A closed loop of one runs when neither rate nor
    concurrency is given."""
    plan_path = ""
    if plan:
        plan_path = plan if Path(plan).is_file() else str(Path(plan) / "plan.json")
    return LoadTestConfig.from_params(
        rate=rate or None,
        concurrency=concurrency or (None if rate else 1),
        max_prompt_tokens=max_prompt_tokens or None,
        max_output_tokens=max_output_tokens or None,
        max_duration_s=max_duration_s or None,
        slo_ttft_s=slo_ttft_ms / 1000 or None,
        slo_tpot_s=slo_tpot_ms / 1000 or None,
        plan=plan_path,
        **params,
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
