"""Read decode-attention latencies from NVIDIA AIConfigurator's measured tables (in its own venv, offline).

Run by ``write_attention_fits.py`` with ``.venv-aic/bin/python``; imports only the standard library, pandas
and ``aiconfigurator_core``'s data directory (never gpuplace). Reads a JSON job on stdin:
``{"system": "a100_sxm", "combos": [[query_heads, kv_heads, head_dim], ...]}`` (heads on one GPU) and writes
``{"framework_version", "device", "kernel_source", "points": [[kv_dtype, query_heads, kv_heads, head_dim,
batch, context, seconds], ...]}``: every measured point of vLLM's ``generation_attention`` table for those
heads, full attention only (no sliding window), context = the table's ``isl + step`` cached tokens. Where the
table holds two kernels (FlashAttention 3 and 4 on Hopper), the FA3 rows: vLLM's default on Hopper.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

PREFERRED_KERNEL = "vllm_flash_attn_fa3"


def main() -> None:
    import aiconfigurator_core
    import pandas as pd

    job = json.load(sys.stdin)
    root = (
        Path(aiconfigurator_core.__file__).parent / "systems" / "data" / job["system"] / "attention" / "vllm"
    )
    version = sorted(p.name for p in root.iterdir() if p.is_dir())[-1]
    df = pd.read_parquet(root / version / "generation_attention_perf.parquet")
    if "window_size" in df:
        df = df[df["window_size"] == 0]
    kernels = sorted(df["kernel_source"].unique())
    kernel = PREFERRED_KERNEL if PREFERRED_KERNEL in kernels else kernels[0]
    df = df[df["kernel_source"] == kernel]
    wanted = {tuple(c) for c in job["combos"]}
    points = [
        [str(r.kv_cache_dtype), int(r.num_heads), int(r.num_key_value_heads), int(r.head_dim),
         int(r.batch_size), int(r.isl + r.step), float(r.latency) / 1e3]
        for r in df.itertuples()
        if (int(r.num_heads), int(r.num_key_value_heads), int(r.head_dim)) in wanted
    ]  # fmt: skip
    json.dump(
        {
            "framework_version": version,
            "device": str(df["device"].iloc[0]),
            "kernel_source": kernel,
            "points": points,
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main()
