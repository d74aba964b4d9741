"""``gpuplace loadtest``: flags (made from :data:`gpuplace.steps.loadtest.PARAMS`) → one run, a sweep
or a knee search. Exit 0 when some request completed, 1 when every request failed (the report still
says why), 2 for bad input."""

from __future__ import annotations

import argparse
import sys

from gpuplace.cli.base import Command, comma_floats, comma_ints

_RATE_HELP = (
    "open loop, mean requests/s, > 0 (default: the plan's rate; without a plan or --concurrency, a closed "
    "loop of one request at a time)"
)


class LoadTestCommand(Command):
    name = "loadtest"
    help = "load-test an OpenAI-compatible endpoint: TTFT, TPOT, ITL, throughput, goodput"
    description = (
        "Synthetic or trace-replayed streaming load with vLLM's metric definitions (docs/loadtest.md).\n"
        "Given --plan, the SLO, the traffic and the rate default to the plan's, and the report compares\n"
        "the measurement with the plan's prediction. Writes report.json, records.parquet, records.jsonl\n"
        "and summary.md in --out."
    )
    epilog = "example: gpuplace loadtest --endpoint http://127.0.0.1:8000 --rate 2 --max-requests 50 --out lt"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        from gpuplace.params import add_flags
        from gpuplace.steps.loadtest import PARAMS

        p.add_argument(
            "--deployment", default="", help="a deployment.json (gpuplace deploy) instead of --endpoint"
        )
        p.add_argument(
            "--plan", default="", help="plan directory: SLO, traffic, rate and prediction come from it"
        )
        load = p.add_argument_group("workload")
        add_flags(load, PARAMS, helps={"rate": _RATE_HELP})
        # the table's 0 means "unset" for the components; on the command line an explicit --rate 0 is a
        # mistake, refused below, so the flag's own default is None
        p.set_defaults(rate=None)
        load.add_argument(
            "--no-warmup", action="store_true", help="skip the probe and 2-token warm-up request"
        )
        slo = p.add_argument_group("SLO and sweeps")
        slo.add_argument(
            "--slo-ttft-ms",
            type=float,
            default=0.0,
            help="p99 TTFT bound for goodput (0: the plan's, else none)",
        )
        slo.add_argument(
            "--slo-tpot-ms",
            type=float,
            default=0.0,
            help="p99 TPOT bound for goodput (0: the plan's, else none)",
        )
        slo.add_argument("--rates", default="", help="sweep: comma list of rates, one run each")
        slo.add_argument("--concurrencies", default="", help="sweep: comma list of concurrencies")
        slo.add_argument(
            "--knee", default="", help="LOW,HIGH: the highest rate whose SLO attainment ≥ --target-share"
        )
        slo.add_argument(
            "--target-share", type=float, default=0.9, help="attainment the knee search aims for"
        )
        p.add_argument("--out", required=True, help="output directory")
        p.add_argument("--quiet", action="store_true", help="no progress lines")

    def run(self, args: argparse.Namespace) -> int:
        from gpuplace.errors import InvalidInput
        from gpuplace.loadtest.run import run_loadtest_step
        from gpuplace.loadtest.summary import format_prediction, format_table
        from gpuplace.loadtest.sweep import run_knee_step, run_sweep_step
        from gpuplace.steps.loadtest import load_test_config, read_load_test_inputs
        from gpuplace.types.plan import Slo

        if args.rate is None:
            args.rate = 0.0
        elif not args.rate > 0:
            raise InvalidInput(
                "rate",
                args.rate,
                "must be positive",
                "Omit --rate for the plan's rate (without a plan: a closed loop of one request at a time)",
            )
        slo = None
        if args.slo_ttft_ms or args.slo_tpot_ms:
            slo = Slo.from_ms(ttft_ms=args.slo_ttft_ms, tpot_ms=args.slo_tpot_ms)
        record, plan = read_load_test_inputs(args.deployment, args.plan)
        config = load_test_config(
            vars(args), deployment=record, plan=plan, slo=slo, warmup=not args.no_warmup
        )
        show = not args.quiet
        if args.knee:
            bounds = comma_floats(args.knee, "knee")
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
                f"\nknee: {knee:g} req/s (SLO attainment ≥ {args.target_share:.0%}); "
                f"wrote {args.out}/knee.json"
            )
            return 0
        if args.rates or args.concurrencies:
            points = run_sweep_step(
                config,
                args.out,
                rates=comma_floats(args.rates, "rates") if args.rates else [],
                concurrencies=comma_ints(args.concurrencies, "concurrencies") if args.concurrencies else [],
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
        for note in result.notes:
            print(f"note: {note}")
        print(f"\nwrote {args.out}/report.json, records.parquet, records.jsonl, summary.md")
        if result.report.completed == 0:
            kinds = ", ".join(f"{k}={v}" for k, v in result.report.errors.items())
            first = next((r.error for r in result.records if r.error), "")
            print(f"gpuplace loadtest: every request failed ({kinds}): {first}", file=sys.stderr)
            return 1
        return 0
