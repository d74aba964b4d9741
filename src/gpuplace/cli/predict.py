"""``gpuplace predict``: flags → :func:`gpuplace.steps.predict.run_predict_step` → a table or JSON."""

from __future__ import annotations

import argparse
import json
import sys

from gpuplace.cli.base import Command
from gpuplace.units import to_ms


class PredictCommand(Command):
    name = "predict"
    help = "predict the latency and throughput of one GPU shape under one traffic, and its headroom"
    description = (
        "Simulate one replica of --model on --gpu (whole GPUs at --tp, a MIG slice or a time-sliced\n"
        "share) at an open-loop --rate or a closed loop of --concurrency users, with the serving model\n"
        "`gpuplace plan` sizes with. Prints p50/p90/p99 TTFT, TPOT, ITL and E2E, requests/s and output\n"
        "tokens/s, with the error band the published-measurement benchmark found for the GPU's class.\n"
        "With --slo-ttft-ms/--slo-tpot-ms it also finds the highest rate and concurrency that meet them\n"
        "(docs/placement.md)."
    )
    epilog = (
        "examples: gpuplace predict --model llama-3.1-8b --gpu H100-SXM5-80GB --tp 1 --concurrency 8 \\\n"
        "            --prompt-tokens 1024 --output-tokens 128 --json\n"
        "          gpuplace predict --model llama-3.1-8b --gpu H100-SXM5-80GB --dtype fp8 --rate 4 \\\n"
        "            --slo-tpot-ms 50 --slo-ttft-ms 2000 --plot headroom.png"
    )

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        from gpuplace.params import add_flags
        from gpuplace.steps.predict import HEADROOM, SHAPE, TRAFFIC

        add_flags(p.add_argument_group("shape"), SHAPE)
        add_flags(p.add_argument_group("traffic (give --rate or --concurrency)"), TRAFFIC)
        slo = p.add_argument_group("headroom")
        add_flags(slo, HEADROOM)
        slo.add_argument("--plot", default="", help="draw load against p50/p99 latency with the SLO (PNG)")
        p.add_argument("--gpu-catalog", default=None, help="a gpus.csv to use instead of the bundled one")
        p.add_argument("--json", action="store_true", help="print one JSON object")

    def run(self, args: argparse.Namespace) -> int:
        from gpuplace.catalog import load_gpu_catalog
        from gpuplace.steps.predict import run_predict_step

        result = run_predict_step(vars(args), load_gpu_catalog(args.gpu_catalog))
        if args.plot:
            from gpuplace.planner.predict import curve
            from gpuplace.report.plots import headroom_figure

            room = result.headroom
            if room is None:
                print("note: --plot needs --slo-ttft-ms or --slo-tpot-ms", file=sys.stderr)
            else:
                title = f"{result.model} on {result.shape} ({result.precision.label}): predicted headroom"
                panels = (
                    ("request rate (req/s, open loop)", curve(room.rate_points), room.max_rate_rps),
                    (
                        "concurrency (users, closed loop)",
                        curve(room.concurrency_points),
                        room.max_concurrency,
                    ),
                )
                headroom_figure(title, room.slo, panels).savefig(args.plot, dpi=120)
                print(f"wrote {args.plot}", file=sys.stderr)
        if args.json:
            print(json.dumps(result.to_json_dict(), indent=2))
            return 0
        print(predict_text(result))
        return 0


def predict_text(result: object) -> str:
    """The prediction as a few lines for a terminal."""
    from gpuplace.planner.predict import ShapePrediction

    assert isinstance(result, ShapePrediction)
    lines = [
        f"{result.model} on {result.shape} ({result.precision.label}), {result.load.describe()}, "
        f"{result.traffic}",
        "            p50        p90        p99   (ms)",
    ]
    for name, d in result.distributions().items():
        lines.append(f"  {name.upper():5} {to_ms(d.p50):10.2f} {to_ms(d.p90):10.2f} {to_ms(d.p99):10.2f}")
    lines.append(
        f"  {result.requests_per_s:.2f} requests/s, {result.output_tokens_per_s:.0f} output tokens/s"
        + (
            ""
            if result.serving.stable
            else " at saturation — OVERLOADED: the replica cannot keep up with this load"
        )
    )
    lines.append(f"  load: {result.load_share:.0%} of the replica's fluid capacity ({result.regime} load)")
    for edge in result.band:
        lines.append(f"  band {edge.describe()}")
    if result.headroom is not None:
        h = result.headroom
        rate = "none" if h.max_rate_rps is None else f"{h.max_rate_rps:.3g} req/s"
        conc = "none" if h.max_concurrency is None else str(h.max_concurrency)
        lines.append(
            f"  headroom: highest rate {rate}, highest concurrency {conc} within the SLO (the prediction)"
        )
        if h.band_rate_rps is not None:
            (slow_r, fast_r), (slow_c, fast_c) = h.band_rate_rps, h.band_concurrency or (None, None)
            edges = ", ".join(f"{e.metric} × {e.low:.2f}–{e.high:.2f}" for e in h.band_edges)
            lines.append(
                f"  headroom within the band ({edges}, {h.band_edges[0].regime} load): "
                f"rate {_or_none(slow_r, 'req/s')} to {_or_none(fast_r, 'req/s')}, "
                f"concurrency {_or_none(slow_c)} to {_or_none(fast_c)}"
                " (slow edge to fast edge)"
            )
        lines += [f"  note: {n}" for n in h.notes]
    lines += [f"  note: {n}" for n in result.notes]
    return "\n".join(lines)


def _or_none(value: float | None, unit: str = "") -> str:
    return "none" if value is None else f"{value:.3g}" + (f" {unit}" if unit else "")
