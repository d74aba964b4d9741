"""``gpuplace profile``: flags → :class:`~gpuplace.profiling.ProfileConfig` → one profiling run."""

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
        p.add_argument("--model", default="tiny", help="preset name, a config.json, or a model directory")
        p.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
        p.add_argument("--batch-sizes", default="1,4", help="batch sizes to sweep, comma-separated")
        p.add_argument("--prompt-tokens", default="128", help="prompt lengths to sweep, comma-separated")
        p.add_argument("--output-tokens", default="32", help="output lengths to sweep, comma-separated")
        p.add_argument(
            "--dtypes", default="auto", help="auto (bf16 on GPU, fp32 on CPU), float32, bfloat16, float16"
        )
        p.add_argument(
            "--mode",
            default="eager",
            choices=["eager", "static", "both"],
            help="eager: dynamic KV cache; static: static KV cache + torch.compile (CUDA graphs on a GPU)",
        )
        p.add_argument("--repeats", type=int, default=5, help="timed generations per sweep point")
        p.add_argument(
            "--warmup",
            type=int,
            default=None,
            help="untimed generations per point (default: 2, 3 with static)",
        )
        p.add_argument("--seed", type=int, default=0, help="seed of the random weights and inputs")
        p.add_argument(
            "--real-weights",
            action="store_true",
            help="load a model directory's weights instead of random ones",
        )
        p.add_argument(
            "--memory-limit-gib", type=float, default=None, help="fail sweep points needing more than this"
        )
        p.add_argument("--gpu-catalog", default=None, help="a gpus.csv to use instead of the bundled one")
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

    def run(self, args: argparse.Namespace) -> int:
        from gpuplace.errors import InvalidInput

        if args.engine_steps:
            return self.engine_steps(args)
        from gpuplace.profiling import ProfileConfig, format_table
        from gpuplace.profiling.step import run_profile_step

        config = ProfileConfig.from_params(
            model=args.model,
            device=args.device,
            batch_sizes=args.batch_sizes,
            prompt_tokens=args.prompt_tokens,
            output_tokens=args.output_tokens,
            dtypes=args.dtypes,
            mode=args.mode,
            repeats=args.repeats,
            warmup=args.warmup,
            seed=args.seed,
            random_weights=not args.real_weights,
            memory_limit_gib=args.memory_limit_gib,
            gpu_catalog=args.gpu_catalog,
        )
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
        from gpuplace.deploy.calibrate import run_engine_steps_step
        from gpuplace.errors import InvalidInput

        if Path(args.out).suffix != ".json":  # the flag's file, before anything is measured
            raise InvalidInput(
                "out", args.out, "must end in .json with --engine-steps", "e.g. --out steps.json"
            )
        steps = run_engine_steps_step(args.model, Path(args.out), device=args.device)
        print(steps.describe())
        for note in steps.notes:
            print(f"note: {note}")
        print(f"wrote {args.out}")
        return 0
