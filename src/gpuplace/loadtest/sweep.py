"""Several load tests against one endpoint: a sweep over rates or concurrencies, and a knee search.

Both reuse one :class:`~gpuplace.loadtest.run.Target` (the endpoint with its prompts built) and write
one output directory per point beside a summary file (``sweep.json`` or ``knee.json``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from gpuplace.errors import InvalidInput
from gpuplace.loadtest.config import LoadTestConfig
from gpuplace.loadtest.io import write_outputs
from gpuplace.loadtest.run import Target
from gpuplace.types.latency import PredictedVsMeasured
from gpuplace.types.loadtest import LatencyReport
from gpuplace.workload import check_rate


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
    if config.traffic.trace and rates:
        raise InvalidInput("rates", list(rates), "do not apply to trace replay", "Sweep --concurrencies")
    out = Path(out_dir)
    points: list[tuple[str, float | None, int | None]] = [
        (f"rate-{r:g}", r, config.concurrency) for r in rates
    ]
    points += [(f"concurrency-{c}", config.rate, c) for c in concurrencies]
    if not points:
        raise InvalidInput("rates", "", "a sweep needs rates or concurrencies", "e.g. --rates 1,2,4")
    base_specs = config.specs()
    target = Target.prepare(config, base_specs)
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
        prediction = PredictedVsMeasured.of(config.predicted, result.report) if config.predicted else None
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
    if config.traffic.trace:
        raise InvalidInput("trace", config.traffic.trace, "a knee search varies a synthetic load's rate", "")
    out = Path(out_dir)
    base_specs = config.specs(low_rps)
    target = Target.prepare(config, base_specs)

    def evaluate(rate: float) -> LatencyReport:
        label = f"rate-{rate:g}"
        result = target.run(
            config.specs(rate),
            concurrency=config.concurrency,
            rate=rate,
            show_progress=show_progress,
            label=label,
        )
        write_outputs(out / label, result.records, result.report, None, result.endpoint_notes)
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
