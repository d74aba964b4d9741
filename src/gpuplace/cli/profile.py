"""``gpuplace profile``: the profile step's table (:data:`gpuplace.steps.profile.PARAMS`) as flags →
:func:`~gpuplace.steps.profile.profile_config` → one profiling run."""

from __future__ import annotations

import argparse
from pathlib import Path

from gpuplace.cli.base import Command


class ProfileCommand(Command):
    name = "profile"
    help = "measure a model's prefill (TTFT) and per-token decode (TPOT) latency on this device"
    description = (
        "Build the model's architecture (random weights by default: latency depends on shapes), run it\n"
        "with torch on this device (CUDA when present, else CPU) over a sweep of batch sizes, prompt and\n"
        "output lengths, and write one row per sweep point to a Parquet file (docs/profiling.md)."
    )
    epilog = (
        "examples: gpuplace profile --model tiny --device cpu --out profile.parquet\n"
        "          gpuplace profile --model tiny --engine-steps --out steps.json"
    )

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        from gpuplace.params import add_flags
        from gpuplace.steps.profile import PARAMS

        add_flags(p, PARAMS)
        p.add_argument("--out", default="profile.parquet", help="Parquet file to write")
        p.add_argument(
            "--device-json",
            default=None,
            help="where to write the device record (default: <out>.device.json)",
        )
        p.add_argument("--markdown", default=None, help="also write a Markdown summary here")
        p.add_argument("--quiet", action="store_true", help="no progress lines")
        p.add_argument(
            "--engine-steps",
            action="store_true",
            help="instead of the torch sweep, measure the local serving engine (transformers serve "
            "--continuous-batching on this device) step time against tokens per step and write it as JSON "
            "to --out: what `gpuplace plan --inventory local --engine-steps FILE` plans with",
        )

        p.add_argument(
            "--engine-steps-repeats",
            type=int,
            default=None,
            help="with --engine-steps: repeats of each measurement, spread over the run (default 5)",
        )
        p.add_argument(
            "--operators",
            action="store_true",
            help="instead of the sweep, time the model's kernels on this device (GEMMs over 1 to "
            "--operator-max-tokens tokens per step, prefill and decode attention, all-reduce over several "
            "GPUs) and write the operator table as JSON to --out: what `gpuplace predict/plan --operators "
            "FILE` price this GPU with",
        )

    def run(self, args: argparse.Namespace) -> int:
        from gpuplace.errors import InvalidInput

        if args.engine_steps and args.operators:
            raise InvalidInput("operators", True, "and --engine-steps are two measurements", "Give one")
        if args.engine_steps:
            return self.engine_steps(args)
        if args.operators:
            return self.operators(args)
        from gpuplace.profiling import format_table
        from gpuplace.steps.profile import profile_config, run_profile_step

        config = profile_config(vars(args))
        out = Path(args.out)
        if out.suffix != ".parquet":
            raise InvalidInput("out", args.out, "must end in .parquet", "e.g. --out profile.parquet")
        device_json = Path(args.device_json) if args.device_json else out.with_suffix(".device.json")
        result = run_profile_step(config, out, device_json, args.markdown, show_progress=not args.quiet)
        print(format_table(result.profile))
        failed = sum(not r.ok for r in result.profile.results)
        print(f"\nwrote {out} ({len(result.profile.results)} points, {failed} failed) and {device_json}")
        return 0 if failed < len(result.profile.results) else 1

    def engine_steps(self, args: argparse.Namespace) -> int:
        """The --engine-steps mode: one measurement of the local engine, written as JSON."""
        from gpuplace.errors import InvalidInput
        from gpuplace.steps.calibrate import run_engine_steps_step

        if Path(args.out).suffix != ".json":  # the flag's file, before anything is measured
            raise InvalidInput(
                "out", args.out, "must end in .json with --engine-steps", "e.g. --out steps.json"
            )
        steps = run_engine_steps_step(
            args.model, Path(args.out), device=args.device, repeats=args.engine_steps_repeats
        )
        print(steps.describe())
        for note in steps.notes:
            print(f"note: {note}")
        print(f"wrote {args.out}")
        return 0

    def operators(self, args: argparse.Namespace) -> int:
        """The --operators mode: the operator table, written as JSON (and Markdown with --markdown)."""
        from gpuplace.errors import InvalidInput
        from gpuplace.steps.profile import operator_config, run_operators_step

        if Path(args.out).suffix != ".json":  # the flag's file, before anything is measured
            raise InvalidInput(
                "out", args.out, "must end in .json with --operators", "e.g. --out operators.json"
            )
        table = run_operators_step(
            operator_config(vars(args)), args.out, args.markdown, show_progress=not args.quiet
        )
        print(table.describe())
        for note in table.notes:
            print(f"note: {note}")
        print(f"wrote {args.out}" + (f" and {args.markdown}" if args.markdown else ""))
        return 0
