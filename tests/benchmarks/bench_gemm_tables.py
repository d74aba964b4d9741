"""gpuplace's linear-layer time against the GEMMs NVIDIA AIConfigurator measured with vLLM (issue 32, Build 2).

The class roofline prices a step's linear layers (QKV, O, gate-up, down of every layer and the LM head) from a
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

**What the step model uses.** Since 2026-12-07 the step model prices the linear layers of a whole H100 SXM,
H200 SXM or A100 SXM from these tables (``src/gpuplace/catalog/data/gemm_curves.csv``, written by
``write_gemm_curves.py`` for the catalog's presets at TP 1–8, bf16 and on the Hoppers FP8), and falls back on the
class roofline above for other GPUs, other shapes, MIG slices and time-sliced shares. The benchmark checks
the shipped curves against the tables (``shipped ÷ measured``, 1.00 when the file is current) and predicts
the published measurements again with the roofline in place of the curves (``bench_published.py``'s goals),
to show what the curves changed.

Run: ``.venv/bin/python tests/benchmarks/bench_gemm_tables.py`` (creates ``.venv-aic`` on first use: a
pip install of aiconfigurator 0.12.0; the counterfactual takes about three minutes). Writes
docs/benchmarks/gemm_tables.{md,json}.
"""

from __future__ import annotations

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
FIT_NK = (4096, 32768)  # efficiency.csv's MFU fit: n and k in this range, m >= 2048; MBU: m <= 32


def in_sample(m: int, shapes: list[tuple[str, int, int]]) -> bool:
    if m <= 32:
        return True
    return m >= 2048 and all(
        FIT_NK[0] <= n <= FIT_NK[1] and FIT_NK[0] <= k <= FIT_NK[1] for _, n, k in shapes
    )


def ask(system: str, points: list[list[int]], dtype: str = "bfloat16") -> dict[str, Any]:
    from tests.benchmarks.bench_fidelity import ensure_aic

    python = ensure_aic()
    job = {"system": system, "dtype": dtype, "points": points}
    done = subprocess.run(
        [str(python), str(DRIVER)], input=json.dumps(job), capture_output=True, text=True, check=True
    )
    return dict(json.loads(done.stdout))


@functools.cache
def powers_of_two_measured(system: str) -> tuple[int, ...]:
    """The tokens-per-step counts of ``system``'s table that are powers of two (read once per system)."""
    return tuple(m for m in ask(system, [])["grid_m"] if m & (m - 1) == 0)


def counterfactual() -> dict[str, Any]:
    """The published benchmark's goals, today's (the measured GEMM curves) and with the class roofline in
    their place (what the step model did before it read them)."""
    sys.path.insert(0, str(REPO / "tests" / "benchmarks"))
    import bench_published
    from published_rows import read_rows

    import gpuplace.planner.steptime as steptime

    rows = read_rows(bench_published.MEASUREMENTS)
    today = bench_published.goal_counts(bench_published.evaluate(rows)[0])
    original = steptime.gemm_curves_for
    steptime.gemm_curves_for = lambda *args, **kwargs: None  # type: ignore[assignment]
    try:
        roofline = bench_published.goal_counts(bench_published.evaluate(rows)[0])
    finally:
        steptime.gemm_curves_for = original
    return {"today": today, "with_the_roofline": roofline}


def measure() -> dict[str, Any]:
    from gpuplace.catalog import load_gpu_catalog, model_arch_from_config, resolve_model
    from gpuplace.catalog.efficiency import load_efficiency_table
    from gpuplace.planner.predict import shape_spec
    from gpuplace.planner.steptime import choose_efficiencies, interp_loglog, roofline_step_model
    from gpuplace.types.operators import sharded_shapes

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
            shapes = sharded_shapes(arch, tp)
            for m in TOKENS:
                first = len(points)
                points += [[m, n, k] for _, n, k in shapes]
                ours = max(step.weights_s, m * step.gemm_s_per_token + m * step.head_s_per_sample)
                shipped = interp_loglog(step.gemm_curve, m) + interp_loglog(step.head_curve, m)
                plan.append((model, tp, m, shapes, first, ours, shipped, arch.num_layers))
        answer = ask(system, points)
        sources[gpu] = (
            f"{answer['device']}, vLLM {answer['framework_version']} (AIConfigurator 0.12.0 {system})"
        )
        lat = answer["latency_ms"]
        for model, tp, m, shapes, first, ours, shipped, layers in plan:
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
                    "shipped_ratio": shipped / measured if measured > 0 else math.nan,
                    "in_sample": in_sample(m, shapes),
                    "narrowest": min(min(n, k) for _, n, k in shapes),
                }
            )
    return {"rows": rows, "sources": sources}


def _shipped_line(rows: list[dict[str, Any]]) -> str:
    """Whether the shipped curves are the tables' (1.00 at every point when the file is current)."""
    got = sorted(r["shipped_ratio"] for r in rows if math.isfinite(r.get("shipped_ratio", math.nan)))
    if not got:
        return "The shipped curves (`gemm_curves.csv`) cover none of these points."
    off = sum(1 for q in got if abs(q - 1) > 0.01)
    return (
        f"The shipped curves (`gemm_curves.csv`) ÷ the tables: {got[0]:.3f}–{got[-1]:.3f} over {len(got)} points, "
        f"{off} off by more than 1% (0 when the file is current; else rerun `write_gemm_curves.py`)."
    )


def markdown(data: dict[str, Any], seconds: float) -> str:
    rows = data["rows"]
    lines = [
        "# The step model's linear layers against AIConfigurator's measured GEMMs",
        "",
        f"Generated by `.venv/bin/python tests/benchmarks/bench_gemm_tables.py` on {time.strftime('%Y-%m-%d')} "
        f"({seconds:.0f} s). Tables: "
        + "; ".join(f"{gpu}: {src}" for gpu, src in data["sources"].items())
        + ". roofline ÷ measured below 1 is the class roofline faster than the measured kernels (optimistic). "
        "The step model uses the measured curves for these shapes (`gemm_curves.csv`); the roofline is what it "
        "falls back on elsewhere.",
        "",
        _shipped_line(rows),
        "",
        "Out of sample (tokens 33–2047, or a GEMM shard narrower than 4096, outside efficiency.csv's fit):",
        "",
        "| GPU | out-of-sample points | median roofline ÷ measured | range | within ±15% |",
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
        "`*`: out of sample. Figures are the class roofline's linear-layer time ÷ the measured GEMMs' sum.",
        "",
    ]
    goals = data.get("counterfactual")
    if goals:
        lines += [
            "## What the measured curves changed",
            "",
            "The published benchmark's goals (docs/benchmarks/published.md) as gpuplace predicts them today, and "
            "again with the class roofline in place of the measured curves for the linear layers (everything else "
            "as today):",
            "",
            "| goal | today (measured GEMMs) | with the class roofline |",
            "|---|---|---|",
        ]
        for key, label in (("tpot_p50", "p50 TPOT within 20%"), ("ttft_p50", "p50 TTFT within 30%")):
            a, b = goals["today"][key], goals["with_the_roofline"][key]
            lines.append(
                f"| {label} | {a['within']} of {a['rows']} (median {a['median_error']:+.1%}) | "
                f"{b['within']} of {b['rows']} (median {b['median_error']:+.1%}) |"
            )
        a, b = goals["today"]["saturation_vs_trt"], goals["with_the_roofline"]["saturation_vs_trt"]
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
