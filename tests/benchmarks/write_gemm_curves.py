"""Write ``src/gpuplace/catalog/data/gemm_curves.csv``: the linear layers' measured time by tokens per step,
from the GEMM tables NVIDIA AIConfigurator 0.12.0 measured with vLLM's kernels (issue 32, Build 2).

For every catalog GPU that AIConfigurator measured with vLLM (:data:`SYSTEMS`), every catalog model preset
with real sizes (:data:`MODELS`) and every TP degree its heads split over (1, 2, 4, 8), at every
power-of-two tokens per step the table measured: one layer's QKV, O, gate-up and down GEMMs, sharded as
vLLM shards them (column-parallel QKV, gate-up and LM head split ``n``; row-parallel O and down split
``k``), and the LM head's, log-bilinear between the measured ``n`` and ``k`` around each shard
(``aic_gemm_driver.py``, in AIConfigurator's own venv ``.venv-aic``; never a dependency of gpuplace).

The step model (``planner/steptime.roofline_step_model``) reads the file for whole GPUs serving bf16
weights, in place of the class efficiencies' roofline of the linear layers; a table the user measured with
``gpuplace profile --operators`` still comes first. Rows are keyed by the layers' shapes, so a model with
the same shapes as a preset (Llama-3-8B and Llama-3.1-8B) takes the same curve.

Run: ``.venv/bin/python tests/benchmarks/write_gemm_curves.py`` (a pip install of aiconfigurator on first
use, then seconds). bf16 on every GPU; on the H100 and H200 also FP8 (W8A8, per-tensor scales: the table's
``fp8``), whose LM head stays bf16 as in vLLM.
"""

from __future__ import annotations

import csv
import math
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
OUT = REPO / "src" / "gpuplace" / "catalog" / "data" / "gemm_curves.csv"
SYSTEMS = {"H100-SXM5-80GB": "h100_sxm", "H200-SXM-141GB": "h200_sxm", "A100-SXM4-80GB": "a100_sxm"}
MODELS = ("llama-3.1-8b", "llama-3.1-70b", "mistral-7b", "qwen2.5-7b")
TPS = (1, 2, 4, 8)
DTYPES = {
    "H100-SXM5-80GB": ("bfloat16", "fp8"),
    "H200-SXM-141GB": ("bfloat16", "fp8"),
    "A100-SXM4-80GB": ("bfloat16",),
}  # A100: no FP8 cores


def _rows(gpu: str, system: str, dtype: str, plan: list[Any], points: list[list[int]]) -> list[list[str]]:
    """The file's rows of ``gpu`` in ``dtype``: the body GEMMs from the ``dtype`` table, the LM head from the
    bf16 one (vLLM's FP8 methods leave the head in bf16)."""
    from gpuplace.catalog.gemm_curves import shapes_key
    from tests.benchmarks.bench_gemm_tables import ask

    answer = ask(system, points, dtype)
    heads = answer if dtype == "bfloat16" else ask(system, points)
    source = (
        f"AIConfigurator 0.12.0 {system} GEMM table ({answer['device']}, vLLM {answer['framework_version']}, "
        f"{dtype}{'' if dtype == 'bfloat16' else '; LM head bfloat16'})"
    )
    rows = []
    for arch, tp, m, first, shapes in plan:
        names = [s[0] for s in shapes]
        per = dict(zip(names, answer["latency_ms"][first : first + len(shapes)], strict=True))
        per["lm_head"] = heads["latency_ms"][first + names.index("lm_head")]
        if any(not math.isfinite(v) or v <= 0 for v in per.values()):
            continue  # below the table's grid for this shard
        body = sum(v for name, v in per.items() if name != "lm_head") / 1e3
        rows.append(
            [
                gpu,
                dtype,
                shapes_key(arch),
                str(tp),
                str(m),
                f"{body:.6e}",
                f"{per['lm_head'] / 1e3:.6e}",
                source,
            ]
        )
    return rows


def main() -> int:
    from gpuplace.catalog import model_arch_from_config, resolve_model
    from gpuplace.catalog.gemm_curves import COLUMNS
    from gpuplace.types.operators import sharded_shapes
    from tests.benchmarks.bench_gemm_tables import powers_of_two_measured

    rows: list[list[str]] = []
    for gpu, system in SYSTEMS.items():
        grid = powers_of_two_measured(system)
        plan = []
        points: list[list[int]] = []
        for model in MODELS:
            arch = model_arch_from_config(model, resolve_model(model).config)
            for tp in TPS:
                heads, kv = arch.num_attention_heads, arch.num_kv_heads
                if heads % tp or (kv % tp and tp % kv):
                    continue
                shapes = sharded_shapes(arch, tp)
                for m in grid:
                    plan.append((arch, tp, m, len(points), shapes))
                    points += [[m, n, k] for _, n, k in shapes]
        for dtype in DTYPES.get(gpu, ("bfloat16",)):
            rows += _rows(gpu, system, dtype, plan, points)
    with OUT.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        w.writerows(rows)
    print(f"wrote {len(rows)} rows to {OUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
