"""The ``gpuplace`` command. Subcommands mirror the components; each is a thin wrapper that parses
flags into the library's types, calls one library function and prints or writes its result.

Heavy imports (torch, kfp, mlflow) happen inside the subcommand that needs them, so ``gpuplace
--help`` is instant and ``gpuplace profile`` works where kfp and mlflow are not installed.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path

from gpuplace import __version__
from gpuplace.errors import GpuplaceError, InvalidInput


def _add_profile(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "profile",
        help="measure prefill (TTFT) and per-token decode (TPOT) latency of a model on this device",
        description="Profile a model's latency over a sweep with torch (docs/profiling.md).",
    )
    p.add_argument("--model", default="tiny", help="preset name, path to a config.json, or a model directory")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (default: auto)")
    p.add_argument("--batch-sizes", default="1,4", help="comma list (default 1,4)")
    p.add_argument("--prompt-tokens", default="128", help="comma list (default 128)")
    p.add_argument("--output-tokens", default="32", help="comma list (default 32)")
    p.add_argument(
        "--dtypes", default="auto", help="comma list of auto | float32 | bfloat16 | float16 (default auto)"
    )
    p.add_argument(
        "--mode",
        default="eager",
        choices=["eager", "static", "both"],
        help="eager: dynamic KV cache; static: static KV cache + torch.compile (CUDA graphs on GPU)",
    )
    p.add_argument("--repeats", type=int, default=5, help="timed generations per point (default 5)")
    p.add_argument(
        "--warmup", type=int, default=None, help="untimed generations per point (default 2; 3 with static)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--real-weights",
        action="store_true",
        help="load the weights of a model directory instead of random ones",
    )
    p.add_argument("--memory-limit-gib", type=float, default=None, help="fail points needing more than this")
    p.add_argument("--gpu-catalog", default=None, help="a gpus.csv to use instead of the bundled one")
    p.add_argument("--out", default="profile.parquet", help="Parquet file to write (default profile.parquet)")
    p.add_argument(
        "--device-json", default=None, help="also write the device record here (default: <out>.device.json)"
    )
    p.add_argument("--markdown", default=None, help="also write a Markdown summary here")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=_cmd_profile)


def _cmd_profile(args: argparse.Namespace) -> int:
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
                f"{name:16} {arch.model_type:8} {arch.num_params / 1e9:7.3f}B params  "
                f"layers={arch.num_layers} hidden={arch.hidden_size} "
                f"heads={arch.num_attention_heads}/{arch.num_kv_heads} vocab={arch.vocab_size}"
            )
    return 0


def _add_run(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "run", help="the main job: the pipeline end to end through kfp's local runner (make run)"
    )
    p.add_argument(
        "--workdir", default=".gpuplace/runs", help="where run directories go (default .gpuplace/runs)"
    )
    p.add_argument("--model", default="", help="default: tiny on CPU, llama-3.1-8b on a GPU")
    p.add_argument("--device", default="auto", help="profiling device: auto, cpu, cuda, cuda:N")
    p.add_argument("--inventory", default="mixed-a100-h100-l4", help="fleet: bundled name, fleet YAML or CSV")
    p.add_argument("--slo-tpot-ms", type=float, default=50.0)
    p.add_argument("--slo-ttft-ms", type=float, default=2000.0)
    p.add_argument("--rate", type=float, default=2.0, help="target and load-test request rate (req/s)")
    p.add_argument("--max-requests", type=int, default=20, help="requests the load test sends")
    p.add_argument("--trace", default="", help="Azure-format trace CSV to replay instead of synthetic load")
    p.add_argument("--compare", action="store_true", help="run orchestration_comparison (native vs Kubeflow)")
    p.add_argument("--target", default="local", choices=["local", "kubernetes"], help="serving target")
    p.add_argument("--kubeconfig", default="", help="cluster for --target kubernetes")
    p.add_argument("--namespace", default="default", help="namespace for --target kubernetes")
    p.add_argument(
        "--mlflow-uri", default="", help="MLflow server (default: $MLFLOW_TRACKING_URI, else a local store)"
    )
    p.set_defaults(func=_cmd_run)


def _cmd_run(args: argparse.Namespace) -> int:
    from gpuplace.mainjob import MainJobConfig, format_summary, run_main_job

    config = MainJobConfig(
        workdir=Path(args.workdir),
        model=args.model,
        device=args.device,
        inventory=args.inventory,
        slo_tpot_ms=args.slo_tpot_ms,
        slo_ttft_ms=args.slo_ttft_ms,
        rate=args.rate,
        max_requests=args.max_requests,
        trace=args.trace,
        compare=args.compare,
        target=args.target,
        kubeconfig=args.kubeconfig,
        namespace=args.namespace,
        mlflow_uri=args.mlflow_uri,
    )
    result = run_main_job(config)
    print()
    print(format_summary(result))
    return 0


def _add_compile_submit(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    c = sub.add_parser("compile", help="compile pipelines to their checked-in pipeline.yaml (make compile)")
    c.add_argument("pipelines", nargs="*", help="pipeline names (default: all)")
    c.add_argument("--out", default=None, help="write here instead (one pipeline only)")
    c.set_defaults(func=_cmd_compile)
    s = sub.add_parser("submit", help="submit a pipeline run to a Kubeflow Pipelines API with the kfp SDK")
    s.add_argument("pipeline", help="pipeline name (see gpuplace compile --help)")
    s.add_argument("--host", required=True, help="KFP API URL, e.g. https://kubeflow.example.com/pipeline")
    s.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="a pipeline argument")
    s.add_argument("--experiment", default="gpuplace")
    s.add_argument("--run-name", default=None)
    s.add_argument("--token", default=None, help="an existing bearer token (default: $KFP_TOKEN)")
    s.add_argument("--namespace", default=None, help="the Kubeflow profile namespace (multi-user installs)")
    s.add_argument("--upload", action="store_true", help="also upload the package as a pipeline")
    s.add_argument("--wait", type=float, default=None, metavar="SECONDS", help="wait for the run to finish")
    s.set_defaults(func=_cmd_submit)


def _cmd_compile(args: argparse.Namespace) -> int:
    from gpuplace.submit import compile_pipeline, pipeline_names

    names = args.pipelines or list(pipeline_names())
    if args.out and len(names) != 1:
        raise InvalidInput(
            "out", args.out, "needs exactly one pipeline name", "e.g. gpuplace compile llm_placement"
        )
    for name in names:
        print(f"compiled {name} -> {compile_pipeline(name, Path(args.out) if args.out else None)}")
    return 0


def _cmd_submit(args: argparse.Namespace) -> int:
    import os

    from gpuplace.submit import submit

    result = submit(
        args.pipeline,
        host=args.host,
        params=args.param,
        experiment=args.experiment,
        run_name=args.run_name,
        token=args.token or os.environ.get("KFP_TOKEN"),
        namespace=args.namespace,
        upload=args.upload,
        wait_timeout_s=args.wait,
    )
    print(f"run {result.run_id} in experiment {result.experiment_id or '-'}: {result.url}")
    if result.pipeline_id:
        print(f"uploaded pipeline {result.pipeline_id}")
    if result.state:
        print(f"state: {result.state}")
    return 0


# Subcommands that live beside the library module they wrap: each module has
# ``register(sub: argparse._SubParsersAction) -> None`` and imports its heavy dependencies lazily.
COMMAND_MODULES: tuple[str, ...] = (
    "gpuplace.loadtest.commands",
    "gpuplace.deploy",
    "gpuplace.testenv.commands",
    "gpuplace.compare.command",
    "gpuplace.inventory.commands",
    "gpuplace.planner.commands",
    "gpuplace.extender.commands",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpuplace",
        description="Measure, plan, deploy and compare LLM inference placement on Kubernetes GPUs.",
    )
    parser.add_argument("--version", action="version", version=f"gpuplace {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_profile(sub)
    _add_catalog(sub)
    _add_run(sub)
    _add_compile_submit(sub)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
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
