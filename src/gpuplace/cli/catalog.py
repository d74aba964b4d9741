"""``gpuplace catalog gpus|models``: print the GPU catalog or the model presets."""

from __future__ import annotations

import argparse

from gpuplace.cli.base import Command


class CatalogCommand(Command):
    name = "catalog"
    help = "list the GPU catalog (memory, bandwidth, TFLOP/s, MIG, price) or the model presets"
    description = (
        "The catalogs are versioned data files (docs/catalog.md). Point --gpu-catalog (or\n"
        "GPUPLACE_GPU_CATALOG) at your own gpus.csv to change prices or add GPUs."
    )

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("what", choices=["gpus", "models"], help="which catalog to list")
        p.add_argument("--gpu-catalog", default=None, help="a gpus.csv to use instead of the bundled one")

    def run(self, args: argparse.Namespace) -> int:
        from gpuplace.catalog import load_gpu_catalog, model_preset_names, resolve_model
        from gpuplace.catalog.models import model_arch_from_config

        if args.what == "gpus":
            catalog = load_gpu_catalog(args.gpu_catalog)
            print(f"GPU catalog {catalog.version} ({catalog.source})")
            print(
                f"{'name':20} {'GiB':>6} {'GB/s':>6} {'bf16 TF':>8} {'fp8 TF':>7} {'NVLink':>7} "
                f"{'domain':>6} {'$/h':>6}  MIG profiles"
            )
            for g in catalog:
                migs = ",".join(m.name for m in g.mig_profiles) or "-"
                print(
                    f"{g.name:20} {g.memory_gib:6.1f} {g.hbm_bandwidth_gbps:6.0f} {g.bf16_tflops:8.0f} "
                    f"{g.fp8_tflops:7.0f} {g.nvlink_gbps:7.0f} {g.nvlink_domain:6d} "
                    f"{g.price_usd_per_hour:6.2f}  {migs}"
                )
            return 0
        for name in model_preset_names():
            arch = model_arch_from_config(name, resolve_model(name).config)
            print(
                f"{name:16} {arch.model_type:8} {_params(arch.num_params):>8} params  "
                f"layers={arch.num_layers} hidden={arch.hidden_size} "
                f"heads={arch.num_attention_heads}/{arch.num_kv_heads} vocab={arch.vocab_size}"
            )
        return 0


def _params(n: float) -> str:
    """A parameter count a reader can compare: ``8.03B``, ``1.2M`` (a tiny model is not ``0.000B``)."""
    for scale, unit in ((1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= scale:
            return f"{n / scale:.3g}{unit}" if n < 100 * scale else f"{n / scale:.0f}{unit}"
    return f"{n:.0f}"
