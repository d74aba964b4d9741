"""gpuplace's linear-layer time against the GEMMs NVIDIA AIConfigurator measured with vLLM (issue 32, Build 2).

The step model prices a step's linear layers (QKV, O, gate-up, down of every layer and the LM head) from a
roofline and two GPU-class efficiencies, ``max(weights ÷ (bandwidth · MBU) + kernel floors, FLOPs ÷ (peak ·
MFU))``. AIConfigurator 0.12.0 ships GEMM latencies it measured with vLLM's kernels (H100 SXM: vLLM 0.24.0;
A100 SXM: vLLM 0.14.0) over tokens per step ``m`` and weight shapes ``n × k``. This benchmark reads those
tables as data, in AIConfigurator's own venv (``.venv-aic``, never a dependency of gpuplace), and compares,
per GPU, model, TP degree and tokens per step, the step model's linear-layer time with the sum of the
measured GEMMs of the same sharded shapes (column-parallel QKV, gate-up and LM head split ``n``;
row-parallel O and down split ``k``), log-bilinear between measured sizes.

**In or out of sample.** ``efficiency.csv``'s MBU and MFU were fitted on these tables: MBU on ``m ≤ 32``, MFU on
``m ≥ 2048`` with ``n`` and ``k`` in [4096; 32768]. A point is *in sample* when its tokens are in a fitted range
and every GEMM of the step has ``n`` and ``k`` in the fitted range; the others (tokens 33–2047; the narrow
shards of TP 4 and 8) are out of sample, and only they test the step model.

**What if the step model used them.** The benchmark then predicts the published measurements again
(``bench_published.py``'s rows and goals) with the measured GEMMs in place of the class efficiencies for the
linear layers of every bf16 shape on these two GPUs (``StepTimeModel.gemm_curve``/``head_curve``, built per
model and TP degree from the tables; everything else unchanged), and reports the goals beside today's. A
counterfactual, not gpuplace's prediction: the step model does not read these tables.

Run: ``.venv/bin/python tests/benchmarks/bench_gemm_tables.py`` (creates ``.venv-aic`` on first use: a
pip install of aiconfigurator 0.12.0; the counterfactual takes about three minutes). Writes
docs/benchmarks/gemm_tables.{md,json}.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
OUT = REPO / "docs" / "benchmarks"
DRIVER = REPO / "tests" / "benchmarks" / "aic_gemm_driver.py"
SYSTEMS = {"H100-SXM5-80GB": "h100_sxm", "A100-SXM4-80GB": "a100_sxm"}
SHAPES = (
    ("llama-3.1-8b", 1),
    ("llama-3.1-8b", 2),
    ("llama-3.1-70b", 2),
    ("llama-3.1-70b", 4),
    ("llama-3.1-70b", 8),
)
TOKENS = (1, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
COLUMN_PARALLEL = {"qkv", "gate_up", "lm_head"}
FIT_NK = (4096, 32768)  # efficiency.csv's MFU fit: n and k in this range, m >= 2048; MBU: m <= 32


def sharded(arch: Any, tp: int) -> list[tuple[str, int, int]]:
    from gpuplace.types.operators import layer_shapes

    return [
        (name, n // tp, k) if name in COLUMN_PARALLEL else (name, n, k // tp)
        for name, n, k in layer_shapes(arch)
    ]


def in_sample(m: int, shapes: list[tuple[str, int, int]]) -> bool:
    if m <= 32:
        return True
    return m >= 2048 and all(
        FIT_NK[0] <= n <= FIT_NK[1] and FIT_NK[0] <= k <= FIT_NK[1] for _, n, k in shapes
    )


def ask(system: str, points: list[list[int]]) -> dict[str, Any]:
    from tests.benchmarks.bench_fidelity import ensure_aic

    python = ensure_aic()
    job = {"system": system, "dtype": "bfloat16", "points": points}
    done = subprocess.run(
        [str(python), str(DRIVER)], input=json.dumps(job), capture_output=True, text=True, check=True
    )
    return dict(json.loads(done.stdout))


@functools.cache
def powers_of_two_measured(system: str) -> tuple[int, ...]:
    """The tokens-per-step counts of ``system``'s table that are powers of two (read once per system)."""
    return tuple(m for m in ask(system, [])["grid_m"] if m & (m - 1) == 0)


def curves(gpu: str, arch: Any, tp: int) -> tuple[tuple[tuple[float, float], ...], ...]:
    """The linear layers' seconds (all layers) and the LM head's, by tokens, from the measured GEMMs."""
    grid = powers_of_two_measured(SYSTEMS[gpu])
    shapes = sharded(arch, tp)
    lat = ask(SYSTEMS[gpu], [[m, n, k] for m in grid for _, n, k in shapes])["latency_ms"]
    body, head = [], []
    for i, m in enumerate(grid):
        per = dict(zip([s[0] for s in shapes], lat[i * len(shapes) : (i + 1) * len(shapes)], strict=True))
        body.append(
            (float(m), sum(v for name, v in per.items() if name != "lm_head") * arch.num_layers / 1e3)
        )
        head.append((float(m), per["lm_head"] / 1e3))
    return tuple(body), tuple(head)


def counterfactual() -> dict[str, Any]:
    """The published benchmark's goals, today's and with the measured GEMMs in the step model."""
    sys.path.insert(0, str(REPO / "tests" / "benchmarks"))
    import bench_published
    from published_rows import read_rows

    import gpuplace.planner.predict as predict_module
    from gpuplace.types.precision import BF16

    rows = read_rows(bench_published.MEASUREMENTS)
    today = bench_published.goal_counts(bench_published.evaluate(rows)[0])
    original = predict_module.roofline_step_model
    cached = functools.cache(curves)

    def with_tables(arch: Any, hw: Any, eff: Any, precision: Any = BF16) -> Any:
        base = original(arch, hw, eff, precision)
        if hw.spec.name not in SYSTEMS or precision != BF16:
            return base
        body, head = cached(hw.spec.name, arch, hw.tp)
        return dataclasses.replace(
            base, gemm_curve=body, head_curve=head, source=f"{base.source} + AIC GEMMs"
        )

    predict_module.roofline_step_model = with_tables  # type: ignore[assignment]
    try:
        tables = bench_published.goal_counts(bench_published.evaluate(rows)[0])
    finally:
        predict_module.roofline_step_model = original
    return {"today": today, "with_measured_gemms": tables}


def measure() -> dict[str, Any]:
    from gpuplace.catalog import load_gpu_catalog, model_arch_from_config, resolve_model
    from gpuplace.catalog.efficiency import load_efficiency_table
    from gpuplace.planner.predict import shape_spec
    from gpuplace.planner.steptime import choose_efficiencies, roofline_step_model

    catalog, eff_table = load_gpu_catalog(), load_efficiency_table()
    rows: list[dict[str, Any]] = []
    sources: dict[str, str] = {}
    for gpu, system in SYSTEMS.items():
        points: list[list[int]] = []
        plan = []
        for model, tp in SHAPES:
            arch = model_arch_from_config(model, resolve_model(model).config)
            shape = shape_spec(arch, catalog.get(gpu), tp=tp)
            eff, _ = choose_efficiencies(arch, shape.hardware(), eff_table)
            step = roofline_step_model(arch, shape.hardware(), eff)
            shapes = sharded(arch, tp)
            for m in TOKENS:
                first = len(points)
                points += [[m, n, k] for _, n, k in shapes]
                ours = max(step.weights_s, m * step.gemm_s_per_token + m * step.head_s_per_sample)
                plan.append((model, tp, m, shapes, first, ours, arch.num_layers))
        answer = ask(system, points)
        sources[gpu] = (
            f"{answer['device']}, vLLM {answer['framework_version']} (AIConfigurator 0.12.0 {system})"
        )
        lat = answer["latency_ms"]
        for model, tp, m, shapes, first, ours, layers in plan:
            per = dict(zip([s[0] for s in shapes], lat[first : first + len(shapes)], strict=True))
            body = sum(v for name, v in per.items() if name != "lm_head")
            measured = (layers * body + per["lm_head"]) / 1e3
            rows.append(
                {
                    "gpu": gpu,
                    "model": model,
                    "tp": tp,
                    "tokens": m,
                    "gpuplace_s": ours,
                    "measured_s": measured,
                    "ratio": ours / measured if measured > 0 else math.nan,
                    "in_sample": in_sample(m, shapes),
                    "narrowest": min(min(n, k) for _, n, k in shapes),
                }
            )
    return {"rows": rows, "sources": sources}


def markdown(data: dict[str, Any], seconds: float) -> str:
    rows = data["rows"]
    lines = [
        "# The step model's linear layers against AIConfigurator's measured GEMMs",
        "",
        f"Generated by `.venv/bin/python tests/benchmarks/bench_gemm_tables.py` on {time.strftime('%Y-%m-%d')} "
        f"({seconds:.0f} s). Tables: "
        + "; ".join(f"{gpu}: {src}" for gpu, src in data["sources"].items())
        + ". gpuplace ÷ measured below 1 is the step model faster than the measured kernels (optimistic).",
        "",
        "Out of sample (tokens 33–2047, or a GEMM shard narrower than 4096, outside efficiency.csv's fit):",
        "",
        "| GPU | out-of-sample points | median gpuplace ÷ measured | range | within ±15% |",
        "|---|---|---|---|---|",
    ]
    for gpu in SYSTEMS:
        out = sorted(
            r["ratio"] for r in rows if r["gpu"] == gpu and not r["in_sample"] and math.isfinite(r["ratio"])
        )
        if out:
            within = sum(1 for q in out if abs(q - 1) <= 0.15)
            lines.append(
                f"| {gpu} | {len(out)} | {out[len(out) // 2]:.2f} | {out[0]:.2f}–{out[-1]:.2f} | {within} of {len(out)} |"
            )
    lines += [
        "",
        "| GPU | model | TP | narrowest n or k | " + " | ".join(f"{m} tok" for m in TOKENS) + " |",
        "|---|---|---|---|" + "---|" * len(TOKENS),
    ]
    for gpu in SYSTEMS:
        for model, tp in SHAPES:
            cells = [r for r in rows if (r["gpu"], r["model"], r["tp"]) == (gpu, model, tp)]
            fmt = [f"{r['ratio']:.2f}" + ("" if r["in_sample"] else "*") for r in cells]
            lines.append(f"| {gpu} | {model} | {tp} | {cells[0]['narrowest']} | " + " | ".join(fmt) + " |")
    lines += [
        "",
        "`*`: out of sample. Figures are gpuplace's linear-layer time ÷ the measured GEMMs' sum.",
        "",
    ]
    goals = data.get("counterfactual")
    if goals:
        lines += [
            "## What if the step model used the measured GEMMs (a counterfactual)",
            "",
            "The published benchmark's goals (docs/benchmarks/published.md), predicted again with these tables "
            "in place of the class efficiencies for the linear layers of the bf16 shapes on these two GPUs:",
            "",
            "| goal | today | with the measured GEMMs |",
            "|---|---|---|",
        ]
        for key, label in (("tpot_p50", "p50 TPOT within 20%"), ("ttft_p50", "p50 TTFT within 30%")):
            a, b = goals["today"][key], goals["with_measured_gemms"][key]
            lines.append(
                f"| {label} | {a['within']} of {a['rows']} (median {a['median_error']:+.0%}) | "
                f"{b['within']} of {b['rows']} (median {b['median_error']:+.0%}) |"
            )
        a, b = goals["today"]["saturation_vs_trt"], goals["with_measured_gemms"]["saturation_vs_trt"]
        lines += [
            f"| saturation 0.5–1.05 × TensorRT-LLM offline | {a['within']} of {a['rows']} ({a['above']} above) | "
            f"{b['within']} of {b['rows']} ({b['above']} above) |",
            "",
        ]
    return "\n".join(lines)


def main() -> None:
    t0 = time.perf_counter()
    data = measure()
    data["counterfactual"] = counterfactual()
    seconds = time.perf_counter() - t0
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "gemm_tables.json").write_text(json.dumps(data, indent=1) + "\n")
    (OUT / "gemm_tables.md").write_text(markdown(data, seconds))
    print(markdown(data, seconds))


if __name__ == "__main__":
    main()
