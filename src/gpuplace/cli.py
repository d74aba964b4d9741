"""The ``gpuplace`` command. Subcommands mirror the components; each is a thin wrapper that parses
flags into the library's types, calls one library function and prints or writes its result.

Heavy imports (torch, kfp, mlflow) happen inside the subcommand that needs them, so ``gpuplace
--help`` is instant and ``gpuplace profile`` works where kfp and mlflow are not installed.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from gpuplace import __version__
from gpuplace.errors import GpuplaceError, InvalidInput


def int_list(field: str):  # type: ignore[no-untyped-def]
    def parse(text: str) -> tuple[int, ...]:
        try:
            values = tuple(int(x) for x in text.split(",") if x.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{field}={text!r}: not a comma-separated list of integers") from None
        if not values:
            raise argparse.ArgumentTypeError(f"{field}={text!r}: empty")
        return values

    return parse


def str_list(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def _add_profile(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "profile",
        help="measure prefill (TTFT) and per-token decode (TPOT) latency of a model on this device",
        description="Profile a model's latency over a sweep with torch (docs/profiling.md).",
    )
    p.add_argument("--model", default="tiny", help="preset name, path to a config.json, or a model directory")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (default: auto)")
    p.add_argument("--batch-sizes", type=int_list("batch_sizes"), default=(1, 4), help="comma list (default 1,4)")
    p.add_argument("--prompt-tokens", type=int_list("prompt_tokens"), default=(128,), help="comma list (default 128)")
    p.add_argument("--output-tokens", type=int_list("output_tokens"), default=(32,), help="comma list (default 32)")
    p.add_argument("--dtypes", type=str_list, default=("auto",), help="auto | float32 | bfloat16 | float16, comma list")
    p.add_argument("--mode", default="eager", choices=["eager", "static", "both"],
                   help="eager: dynamic KV cache; static: static KV cache + torch.compile (CUDA graphs on GPU)")
    p.add_argument("--repeats", type=int, default=5, help="timed generations per point (default 5)")
    p.add_argument("--warmup", type=int, default=None, help="untimed generations per point (default 2; 3 with static)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--real-weights", action="store_true", help="load the weights of a model directory instead of random ones")
    p.add_argument("--memory-limit-gib", type=float, default=None, help="fail points needing more than this")
    p.add_argument("--gpu-catalog", default=None, help="a gpus.csv to use instead of the bundled one")
    p.add_argument("--out", default="profile.parquet", help="Parquet file to write (default profile.parquet)")
    p.add_argument("--device-json", default=None, help="also write the device record here (default: <out>.device.json)")
    p.add_argument("--markdown", default=None, help="also write a Markdown summary here")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=_cmd_profile)


def _cmd_profile(args: argparse.Namespace) -> int:
    from gpuplace.profiling import (
        ProfileConfig,
        format_markdown,
        format_table,
        run_profile,
        save_profile,
        write_device_json,
    )

    warmup = args.warmup if args.warmup is not None else (3 if args.mode in ("static", "both") else 2)
    config = ProfileConfig(
        model=args.model,
        device=args.device,
        batch_sizes=args.batch_sizes,
        prompt_tokens=args.prompt_tokens,
        output_tokens=args.output_tokens,
        dtypes=args.dtypes,
        modes=(args.mode,),
        repeats=args.repeats,
        warmup=warmup,
        seed=args.seed,
        random_weights=not args.real_weights,
        memory_limit_gib=args.memory_limit_gib,
        gpu_catalog=args.gpu_catalog,
    )
    out = Path(args.out)
    if out.suffix != ".parquet":
        raise InvalidInput("out", args.out, "must end in .parquet", "e.g. --out profile.parquet")
    profile = run_profile(config, show_progress=not args.quiet)
    save_profile(profile, out)
    device_json = Path(args.device_json) if args.device_json else out.with_suffix(".device.json")
    write_device_json(profile, device_json)
    if args.markdown:
        Path(args.markdown).write_text(format_markdown(profile))
    print(format_table(profile))
    failed = sum(not r.ok for r in profile.results)
    print(f"\nwrote {out} ({len(profile.results)} points, {failed} failed) and {device_json}")
    return 0


def _add_catalog(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("catalog", help="list the GPU catalog or the model presets")
    p.add_argument("what", choices=["gpus", "models"])
    p.add_argument("--gpu-catalog", default=None)
    p.set_defaults(func=_cmd_catalog)


def _cmd_catalog(args: argparse.Namespace) -> int:
    from gpuplace.catalog import load_gpu_catalog, model_preset_names, resolve_model

    if args.what == "gpus":
        catalog = load_gpu_catalog(args.gpu_catalog)
        print(f"GPU catalog {catalog.version} ({catalog.source})")
        print(f"{'name':16} {'GiB':>6} {'GB/s':>6} {'bf16 TF':>8} {'NVLink':>7} {'$/h':>6}  MIG profiles")
        for g in catalog:
            migs = ",".join(m.name for m in g.mig_profiles) or "-"
            print(
                f"{g.name:16} {g.memory_gib:6.1f} {g.hbm_bandwidth_gbps:6.0f} {g.bf16_tflops:8.0f} "
                f"{g.nvlink_gbps:7.0f} {g.price_usd_per_hour:6.2f}  {migs}"
            )
    else:
        from gpuplace.catalog.models import model_arch_from_config

        for name in model_preset_names():
            arch = model_arch_from_config(name, resolve_model(name).config)
            print(
                f"{name:16} {arch.model_type:8} {arch.num_params / 1e9:7.3f}B params  layers={arch.num_layers} "
                f"hidden={arch.hidden_size} heads={arch.num_attention_heads}/{arch.num_kv_heads} vocab={arch.vocab_size}"
            )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpuplace", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--version", action="version", version=f"gpuplace {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_profile(sub)
    _add_catalog(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except GpuplaceError as e:
        print(f"gpuplace {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"gpuplace {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
