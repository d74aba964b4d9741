"""``gpuplace loadtest``: drive an OpenAI-compatible endpoint and write records and a LatencyReport.

A thin adapter: flags → :class:`gpuplace.loadtest.step.LoadTestConfig` → one run, a sweep
(``--rates``/``--concurrencies``) or a knee search (``--knee``); prints the report. Exit status 0 when
some request completed, 1 when every request failed (the report still says why), 2 for bad input.
"""

from __future__ import annotations

import argparse
import sys

from gpuplace.errors import InvalidInput


def _floats(text: str, field: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InvalidInput(field, text, "is not a comma list of numbers", "e.g. 1,2,4") from None


def _ints(text: str, field: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InvalidInput(field, text, "is not a comma list of integers", "e.g. 1,2,4") from None


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "loadtest",
        help="load-test an OpenAI-compatible endpoint: TTFT, TPOT, ITL, throughput, goodput",
        description="Synthetic or trace-replayed streaming load with vLLM's metric definitions "
        "(docs/loadtest.md). Writes report.json, records.parquet, records.jsonl and summary.md in --out.",
    )
    target = p.add_argument_group("target")
    target.add_argument("--endpoint", default="", help="base URL, e.g. http://127.0.0.1:8000")
    target.add_argument(
        "--deployment", default="", help="a deployment.json (gpuplace deploy) instead of --endpoint"
    )
    target.add_argument(
        "--model", default="", help="the requests' model field (default: the server's first model)"
    )
    target.add_argument("--api", default="completions", choices=["completions", "chat"])
    target.add_argument("--tokenizer", default="", help="model dir or preset for exact prompt lengths")
    load = p.add_argument_group("workload")
    load.add_argument("--trace", default="", help="replay a trace CSV (Azure LLM trace layout)")
    load.add_argument("--time-scale", type=float, default=1.0, help="trace time × this (0.1 = 10× faster)")
    load.add_argument(
        "--prompt-tokens", default="64", help="N | uniform:LO:HI | normal:MEAN:STD (default 64)"
    )
    load.add_argument(
        "--output-tokens", default="32", help="N | uniform:LO:HI | normal:MEAN:STD (default 32)"
    )
    load.add_argument("--max-prompt-tokens", type=int, default=None, help="cap trace prompt lengths")
    load.add_argument("--max-output-tokens", type=int, default=None, help="cap trace output lengths")
    load.add_argument("--rate", type=float, default=None, help="open loop: mean requests/s")
    load.add_argument("--arrival", default="poisson", choices=["poisson", "gamma", "constant"])
    load.add_argument("--burstiness", type=float, default=1.0, help="gamma shape (<1 burstier)")
    load.add_argument("--concurrency", type=int, default=None, help="closed loop, or a cap on an open loop")
    load.add_argument("--max-requests", type=int, default=100)
    load.add_argument("--max-duration", type=float, default=None, help="stop sending after this many seconds")
    load.add_argument("--request-timeout", type=float, default=600.0, help="seconds per request")
    load.add_argument("--seed", type=int, default=0)
    load.add_argument("--no-warmup", action="store_true", help="skip the probe and 2-token warm-up request")
    slo = p.add_argument_group("SLO, sweeps, plan")
    slo.add_argument("--slo-ttft-ms", type=float, default=None)
    slo.add_argument("--slo-tpot-ms", type=float, default=None)
    slo.add_argument("--rates", default="", help="sweep: comma list of rates, one run each")
    slo.add_argument("--concurrencies", default="", help="sweep: comma list of concurrencies")
    slo.add_argument(
        "--knee", default="", help="LOW,HIGH: highest rate whose SLO attainment ≥ --target-share"
    )
    slo.add_argument("--target-share", type=float, default=0.9)
    slo.add_argument("--plan", default="", help="plan.json: report measured vs the plan's predicted p99s")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=_cmd_loadtest)


def _cmd_loadtest(args: argparse.Namespace) -> int:
    from gpuplace.loadtest.step import (
        LoadTestConfig,
        format_prediction,
        format_table,
        run_knee_step,
        run_loadtest_step,
        run_sweep_step,
    )

    config = LoadTestConfig.from_params(
        endpoint=args.endpoint,
        deployment=args.deployment,
        model=args.model,
        api=args.api,
        tokenizer=args.tokenizer,
        trace=args.trace,
        time_scale=args.time_scale,
        prompt_tokens=args.prompt_tokens,
        output_tokens=args.output_tokens,
        max_prompt_tokens=args.max_prompt_tokens,
        max_output_tokens=args.max_output_tokens,
        rate=args.rate,
        arrival=args.arrival,
        burstiness=args.burstiness,
        concurrency=args.concurrency,
        max_requests=args.max_requests,
        max_duration_s=args.max_duration,
        request_timeout_s=args.request_timeout,
        seed=args.seed,
        slo_ttft_s=None if args.slo_ttft_ms is None else args.slo_ttft_ms / 1000,
        slo_tpot_s=None if args.slo_tpot_ms is None else args.slo_tpot_ms / 1000,
        plan=args.plan,
        warmup=not args.no_warmup,
    )
    show = not args.quiet
    if args.knee:
        bounds = _floats(args.knee, "knee")
        if len(bounds) != 2:
            raise InvalidInput("knee", args.knee, "needs two rates", "e.g. --knee 1,20")
        knee, trials = run_knee_step(
            config,
            args.out,
            low_rps=bounds[0],
            high_rps=bounds[1],
            target_share=args.target_share,
            show_progress=show,
        )
        for rate, report in trials:
            print(
                f"rate {rate:8.3f} req/s: attainment {report.slo_attainment:.1%}, "
                f"goodput {report.goodput_rps:.2f}"
            )
        print(
            f"\nknee: {knee:g} req/s (SLO attainment ≥ {args.target_share:.0%}); wrote {args.out}/knee.json"
        )
        return 0
    if args.rates or args.concurrencies:
        points = run_sweep_step(
            config,
            args.out,
            rates=_floats(args.rates, "rates") if args.rates else [],
            concurrencies=_ints(args.concurrencies, "concurrencies") if args.concurrencies else [],
            show_progress=show,
        )
        for label, report in points:
            print(f"== {label}\n{format_table(report)}\n")
        print(f"wrote {args.out}/sweep.json and one directory per point")
        return 0 if any(r.completed for _, r in points) else 1
    result = run_loadtest_step(config, args.out, show_progress=show)
    print(format_table(result.report))
    if result.prediction:
        print("\n" + format_prediction(result.prediction))
    elif config.predicted is not None:
        print("\nthe plan has no predicted p99 TTFT/TPOT to compare with")
    for note in result.notes:
        print(f"note: {note}")
    print(f"\nwrote {args.out}/report.json, records.parquet, records.jsonl, summary.md")
    if result.report.completed == 0:
        kinds = ", ".join(f"{k}={v}" for k, v in result.report.errors.items())
        first = next((r.error for r in result.records if r.error), "")
        print(f"gpuplace loadtest: every request failed ({kinds}): {first}", file=sys.stderr)
        return 1
    return 0
