"""gpuplace's GPU predictions against serving measurements others published on real GPUs (issue 21).

Reads ``../shared/data/published-llm-serving/measurements.csv`` (249 rows: MLPerf v5.0/v5.1, the vLLM
and SGLang projects, NVIDIA's TensorRT-LLM performance overviews, Argonne's LLM-Inference-Bench,
Lambda, Neural Magic; its README says how to read them). For every row gpuplace can express
(:mod:`published_rows`: model, GPU, TP, precision, documented lengths, the load) it predicts the row
with :func:`gpuplace.planner.predict.predict` — the library function behind ``gpuplace predict`` — and
reports predicted, measured and the error; every other row is listed with its reason.

Loads: an open-loop rate is Poisson at that rate (1,200 requests); a closed loop of C users is that
(the row's request count); an ``inf`` burst of N prompts or a static batch of N is N requests sent at
once; ``offline`` (everything queued) is three waves of what the engine runs at once (200–1,500
requests) sent at once, its output tokens/s the saturation
throughput. TensorRT-LLM's offline figures are compared with gpuplace's vLLM prediction at saturation
for the same GPU, precision, TP and lengths: the goal is 0.5–1.05 × (TensorRT-LLM is an upper bound).

Goals, on vLLM rows predicted at their own precision: p50 TPOT/ITL within 20%, p50 TTFT within 30%.
Means (``[STAT=MEAN]`` rows) and static-batch latencies are reported beside, not scored. Nothing is
fitted to these rows here; the rows another benchmark fitted a term on (the step floor's fit subset,
``docs/benchmarks/step_floor.json``) are shown and kept out of the goals and the band. Rows are named by
their line in the file (the header is line 1). The error band (``src/gpuplace/catalog/data/prediction_band.csv``),
its coverage measured by leaving each publisher out, the breakdown of the errors by regime and the
checks against published server runs are :mod:`published_band`'s. A precision the step model does not
distinguish yet (fp8 predicting the same as bf16) is flagged and left out of the goals.

Run: `.venv/bin/python tests/benchmarks/bench_published.py` (simulation only, about a minute).
Writes docs/benchmarks/published.{md,json} and the band file.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
SHARED_DATA = Path(os.environ.get("GPUPLACE_SHARED_DATA", REPO.parent / "shared" / "data"))
MEASUREMENTS = SHARED_DATA / "published-llm-serving" / "measurements.csv"
OUT = REPO / "docs" / "benchmarks"
BAND = REPO / "src" / "gpuplace" / "catalog" / "data" / "prediction_band.csv"
STEP_FLOOR = OUT / "step_floor.json"  # tests/benchmarks/fit_step_floor.py: the rows the floor was fitted on
GOALS = {"tpot_p50": 0.20, "itl_p50": 0.20, "ttft_p50": 0.30}
SATURATION = (0.5, 1.05)
RATE_REQUESTS = 1200

from published_band import (  # noqa: E402
    band_points,
    breakdown,
    coverage_report,
    markdown_sections,
    publisher,
    saturation_breakdown,
    server_checks,
    write_band,
)
from published_rows import Row, read_rows  # noqa: E402


def predicted_value(pred: Any, metric: str) -> float:
    s = pred.serving
    if metric == "output_tokens_per_s":
        return float(pred.output_tokens_per_s)
    if metric == "batch_latency":
        return float(s.e2e.max)
    name, stat = metric.rsplit("_", 1)
    return float(getattr(getattr(s, name), stat))


def offline_requests(arch: Any, shape: Any, row: Row, precision: Any) -> int:
    """Requests to queue at once for a saturation run: three waves of what the engine can run at once
    (max_num_seqs, or what the KV cache holds), 200 to 1,500."""
    from gpuplace.planner.predict import shape_engine

    engine = shape_engine(arch, shape, precision=precision).with_changes(dict(row.engine_changes))
    at_once = min(engine.max_num_seqs, engine.kv_capacity_tokens // (row.prompt[1] + row.output[1]))
    return max(200, min(1500, 3 * at_once))


def predict_row(
    row: Row, models: dict[str, Any], eff: Any, catalog: Any, slo: Any = None, band: Any = None
) -> tuple[Any, str]:
    """The prediction of ``row`` (with ``slo`` and ``band``: its headroom too), or (None, why gpuplace
    refused it)."""
    from gpuplace.errors import InvalidInput
    from gpuplace.planner.predict import Load, predict, shape_spec
    from gpuplace.planner.replica import TrafficShape
    from gpuplace.types.precision import Precision
    from gpuplace.workload import LengthDist

    arch = models[row.model]

    def dist(lo_hi: tuple[int, int]) -> LengthDist:
        lo, hi = lo_hi
        return LengthDist("fixed", lo) if lo == hi else LengthDist("uniform", lo, hi)

    try:
        shape = shape_spec(arch, catalog.get(row.gpu), tp=row.tp)
        precision = Precision(row.dtype, row.kv_cache_dtype)
        if row.load_kind == "rate":
            n, load = RATE_REQUESTS, Load(rate_rps=row.load_value)
        elif row.load_kind == "concurrency":  # the vLLM blog's run: 150 requests at concurrency 8
            n, load = 150, Load(concurrency=int(row.load_value))
        else:  # a burst, a static batch, or everything queued at once
            n = (
                int(row.load_value)
                if row.load_kind == "burst"
                else offline_requests(arch, shape, row, precision)
            )
            load = Load(concurrency=n)
        traffic = TrafficShape(dist(row.prompt), dist(row.output), requests=n)
        pred = predict(
            arch, shape, load, traffic, eff, precision=precision, slo=slo, band=band,
            engine_changes=dict(row.engine_changes),
        )  # fmt: skip
    except InvalidInput as e:
        return None, str(e)
    return pred, ""


def fp8_modelled(models: dict[str, Any], eff: Any, catalog: Any) -> bool:
    """Whether the step model tells fp8 from bf16 (else fp8 rows are predicted as bf16 and not scored)."""
    from gpuplace.planner.predict import Load, predict, shape_spec
    from gpuplace.planner.replica import TrafficShape
    from gpuplace.types.precision import Precision
    from gpuplace.workload import LengthDist

    arch = models["llama-3.1-8b"]
    shape = shape_spec(arch, catalog.get("H100-SXM5-80GB"))
    t = TrafficShape(LengthDist("fixed", 512), LengthDist("fixed", 64), requests=100)
    a = predict(arch, shape, Load(concurrency=1), t, eff, precision=Precision("bf16"))
    b = predict(arch, shape, Load(concurrency=1), t, eff, precision=Precision("fp8", "fp8"))
    return bool(a.serving.tpot.p50 != b.serving.tpot.p50)


def evaluate(rows: list[Row]) -> tuple[list[dict[str, Any]], list[dict[str, Any]], bool]:
    from gpuplace.catalog import load_gpu_catalog, model_arch_from_config, resolve_model
    from gpuplace.catalog.efficiency import load_efficiency_table

    catalog, eff = load_gpu_catalog(), load_efficiency_table()
    fitted = fitted_lines()
    models = {
        m: model_arch_from_config(m, resolve_model(m).config) for m in ("llama-3.1-8b", "llama-3.1-70b")
    }
    fp8 = fp8_modelled(models, eff, catalog)
    results, skipped = [], []
    cache: dict[tuple[Any, ...], tuple[Any, str]] = {}
    for row in rows:
        line = row.index + 2  # the file's line (the header is line 1), as fit_step_floor.py counts
        base = {
            "line": line,
            "model": row.raw["model"],
            "gpu": row.raw["gpu"],
            "engine": row.raw["engine"],
            "publisher": publisher(row.raw),
        }
        if row.reason:
            skipped.append(base | {"reason": row.reason})
            continue
        key = (row.model, row.gpu, row.tp, row.dtype, row.kv_cache_dtype, row.prompt, row.output, row.load_kind,
               row.load_value, row.engine_changes)  # fmt: skip
        if key not in cache:
            cache[key] = predict_row(row, models, eff, catalog)
        pred, why = cache[key]
        spec = catalog.get(row.gpu)
        unmodelled = not fp8 and "fp8" in (row.dtype, row.kv_cache_dtype)
        for m in row.measured:
            entry = base | {
                "engine_family": row.engine,
                "catalog_gpu": row.gpu,
                "gpu_class": spec.architecture,
                "tp": row.tp,
                "precision": row.precision,
                "lengths": f"{row.prompt}/{row.output}",
                "lengths_source": row.lengths_source,
                "load": f"{row.load_kind} {row.load_value:g}" if row.load_kind != "offline" else "offline",
                "metric": m.metric,
                "measured": m.value,
                "notes": list(row.notes)
                + (["fp8 not modelled yet: predicted as bf16"] if unmodelled else []),
                "precision_modelled": not unmodelled,
                "fitted": line in fitted,
            }
            if line in fitted:
                entry["notes"].append("fitted on (step floor): not scored")
            if pred is None:
                results.append(entry | {"predicted": None, "error": None, "refused": why, "regime": ""})
                continue
            entry |= regime_fields(pred, row)
            value = predicted_value(pred, m.metric)
            if row.engine == "TensorRT-LLM" and m.metric == "output_tokens_per_s":
                entry["ratio_vllm_to_trt"] = value / m.value
            results.append(entry | {"predicted": value, "error": (value - m.value) / m.value, "refused": ""})
    return results, skipped, fp8


def fitted_lines() -> set[int]:
    """File lines (the header is line 1) of the rows a model term was fitted on: the step floor's fit
    subset (docs/benchmarks/step_floor.json). They are shown, and kept out of goals and band."""
    if not STEP_FLOOR.is_file():
        return set()
    subsets = json.loads(STEP_FLOOR.read_text())["subsets"]
    return {r["line"] for name, sub in subsets.items() if name.startswith("fit") for r in sub["rows"]}


def scored(r: dict[str, Any]) -> bool:
    return (
        r["engine_family"] == "vLLM"
        and r["metric"] in GOALS
        and r["error"] is not None
        and r["precision_modelled"]
        and not r["fitted"]
    )


def goal_counts(results: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for metric, tol in GOALS.items():
        rs = [r for r in results if scored(r) and r["metric"] == metric]
        out[metric] = {
            "within": sum(abs(r["error"]) <= tol for r in rs),
            "rows": len(rs),
            "tolerance": tol,
            "median_error": statistics.median(r["error"] for r in rs) if rs else None,
            "under_predicted": sum(r["error"] < 0 for r in rs),
        }
    sat = [r for r in results if "ratio_vllm_to_trt" in r and r["precision_modelled"]]
    lo, hi = SATURATION
    out["saturation_vs_trt"] = {
        "within": sum(lo <= r["ratio_vllm_to_trt"] <= hi for r in sat),
        "rows": len(sat),
        "range": list(SATURATION),
        "refused": sum(1 for r in results if r["engine_family"] == "TensorRT-LLM" and r["predicted"] is None),
        "median_ratio": statistics.median(r["ratio_vllm_to_trt"] for r in sat) if sat else math.nan,
        "above": sum(r["ratio_vllm_to_trt"] > hi for r in sat),
    }
    return out


def regime_fields(pred: Any, row: Row) -> dict[str, Any]:
    """Where the prediction puts the row: its load regime and share, tokens per step, batch, prefill share."""
    sv = pred.serving
    prompt, output = sum(row.prompt) / 2, sum(row.output) / 2
    rps = sv.throughput_rps if sv.stable else (pred.saturated_rps or 0.0)
    step_s = sv.simulated_s / sv.steps if sv.steps else 0.0
    return {
        "regime": pred.regime,
        "load_share": pred.load_share,
        "mean_batch": sv.mean_running if sv.stable else float(pred.engine.max_num_seqs),
        "tokens_per_step": rps * (prompt + output) * step_s,
        "prefill_share": prompt / (prompt + output),
        "prompt_mean": prompt,
    }


def summary(results: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    groups: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in results:
        # held-out rows only; TensorRT-LLM's figures are a bound (their ratio is in the goals), not a target
        if r["error"] is not None and not r["fitted"] and r["engine_family"] != "TensorRT-LLM":
            groups[(r[key], r["metric"])].append(abs(r["error"]))
    return [
        {
            key: k,
            "metric": m,
            "rows": len(v),
            "median_abs_error": statistics.median(v),
            "max_abs_error": max(v),
        }
        for (k, m), v in sorted(groups.items())
    ]


def implied_output_tokens(rows: list[Row]) -> list[tuple[int, float]]:
    """(line, output tokens/s ÷ requests/s) of the ShareGPT rows that publish both: the mean output
    length those runs really had (a check of the paper's mean, not used by the predictions)."""
    out = []
    for row in rows:
        tok, req = row.raw["output_tok_per_s"], row.raw["requests_per_s"]
        if row.raw["osl"].startswith("ShareGPT") and tok and req:
            out.append((row.index + 2, float(tok) / float(req)))
    return out


def pct(x: float | None) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{x:+.0%}"


def fmt(metric: str, v: float | None) -> str:
    if v is None:
        return "—"
    return f"{v:,.0f} tok/s" if metric == "output_tokens_per_s" else f"{v * 1e3:,.1f} ms"


def row_head(r: dict[str, Any]) -> str:
    """A table row's first cells: line, model, GPU, TP, precision, lengths (and the separator after)."""
    return (
        f"| {r['line']} | {r['model']} | {r['catalog_gpu']} | {r['tp']} | {r['precision']} | {r['lengths']} |"
    )


def row_note(r: dict[str, Any]) -> str:
    return "; ".join(r["notes"] + ([r["refused"]] if r["refused"] else []))


def markdown(report: dict[str, Any]) -> str:
    g = report["goals"]
    lines = [
        "# gpuplace predictions against published GPU measurements",
        "",
        f"Generated by `.venv/bin/python tests/benchmarks/bench_published.py` on {report['date']} "
        f"({report['seconds']:.0f} s, simulation only). Data: `../shared/data/published-llm-serving/measurements.csv` "
        f"({report['rows']} rows; sources: MLPerf Inference v5.0/v5.1, the vLLM blog, the SGLang repository's "
        "benchmark of vLLM 0.6.0, Neural Magic's nm-vllm nightly, NVIDIA's TensorRT-LLM performance overviews, "
        "Argonne's LLM-Inference-Bench (arXiv 2411.00136), Lambda's vllm-benchmark). "
        f"{report['expressible']} rows are expressible ({len(report['results'])} figures); "
        f"{len(report['skipped'])} are not (listed at the end). Nothing is fitted here; lines "
        f"{', '.join(map(str, report['fitted_lines'])) or 'none'} are the step floor's fit subset "
        "(docs/benchmarks/step_floor.md): shown, not scored, not in the band. Rows are named by their line "
        "in the file (the header is line 1).",
        "",
        f"FP8 modelled by the step model: **{'yes' if report['fp8_modelled'] else 'no'}**"
        + (
            ""
            if report["fp8_modelled"]
            else " — fp8 rows are predicted as bf16, shown, and left out of the goals"
        ),
        "",
        "## Goals (vLLM rows at their own precision)",
        "",
        "| goal | within | rows | median error | predicted low |",
        "|---|---|---|---|---|",
    ]
    for metric, tol in GOALS.items():
        m = g[metric]
        lines.append(
            f"| p50 {metric.split('_')[0].upper()} within {tol:.0%} | {m['within']} | {m['rows']} "
            f"| {pct(m['median_error'])} | {m['under_predicted']} of {m['rows']} |"
        )
    s = g["saturation_vs_trt"]
    lines += [
        f"| saturation output tok/s 0.5–1.05 × TensorRT-LLM offline | {s['within']} | {s['rows']} "
        f"(+{s['refused']} refused) | ratio median {s['median_ratio']:.2f} | above 1.05: {s['above']} |",
        "",
        f"Error band, held out by publisher: {report['coverage']['inside']} of {report['coverage']['judged']} "
        f"figures inside the {report['coverage']['nominal']:.0%} band drawn without their publisher "
        f"({report['coverage']['no_band']} had none); published server runs within {25}% of the rate they held: "
        f"{sum(s['within'] for s in report['server_runs'])} of {len(report['server_runs'])} (sections below).",
        "",
        "Dataset lengths: ShareGPT mean input 161 / output 338 tokens (Kwon et al., *Efficient Memory Management "
        "for Large Language Model Serving with PagedAttention*, SOSP 2023, §6.1, Fig. 11); CNN/DailyMail articles "
        "781 tokens (See, Liu, Manning, *Get To The Point*, ACL 2017, §4), outputs at MLPerf's cap of 128. Means "
        "are used as fixed lengths (the sources give no distribution). The ShareGPT rows that publish both output "
        "tokens/s and requests/s imply mean outputs of "
        + ", ".join(f"{v:.0f} (line {line})" for line, v in report["implied_sharegpt_output"])
        + " tokens with Llama-3's tokenizer and the benchmarks' filters, well below the paper's 338: their "
        "throughput and E2E are over-predicted for that reason (reported as they are; the rows' own figures are "
        "not used as inputs).",
        "",
    ]
    lines += markdown_sections(report)
    for key, title in (("catalog_gpu", "GPU"), ("engine_family", "engine")):
        lines += [
            f"## Summary per {title} and metric (|error|, rows not fitted on)",
            "",
            f"| {title} | metric | figures | median | max |",
            "|---|---|---|---|---|",
        ]
        for r in summary(report["results"], key):
            lines.append(
                f"| {r[key]} | {r['metric']} | {r['rows']} | {r['median_abs_error']:.0%} | {r['max_abs_error']:.0%} |"
            )
        lines.append("")
    lines += [
        "## vLLM and SGLang rows",
        "",
        "| line | model | GPU | TP | precision | lengths | load | metric | measured | predicted | error | notes |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    trt = [r for r in report["results"] if r["engine_family"] == "TensorRT-LLM"]
    for r in report["results"]:
        if r["engine_family"] != "TensorRT-LLM":
            lines.append(
                f"{row_head(r)} {r['load']} | {r['metric']} | {fmt(r['metric'], r['measured'])} "
                f"| {fmt(r['metric'], r['predicted'])} | {pct(r['error'])} | {row_note(r)} |"
            )
    lines += [
        "",
        "## TensorRT-LLM offline rows against gpuplace's vLLM saturation",
        "",
        *saturation_breakdown(report["results"], *SATURATION),
        "| line | model | GPU | TP | precision | lengths | TRT-LLM | gpuplace vLLM | ratio | notes |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in trt:
        ratio = r.get("ratio_vllm_to_trt")
        lines.append(
            f"{row_head(r)} {fmt(r['metric'], r['measured'])} | {fmt(r['metric'], r['predicted'])} "
            f"| {'—' if ratio is None else f'{ratio:.2f}'} | {row_note(r)} |"
        )
    lines += [
        "",
        "## Rows gpuplace cannot express",
        "",
        "| line | model | GPU | engine | reason |",
        "|---|---|---|---|---|",
    ]
    for r in report["skipped"]:
        lines.append(f"| {r['line']} | {r['model']} | {r['gpu']} | {r['engine']} | {r['reason']} |")
    return "\n".join(lines) + "\n"


def server_runs(rows: list[Row], points: list[Any]) -> list[dict[str, Any]]:
    """The published server runs against the headroom gpuplace predicts, each with a band fitted without
    its own publisher's figures (out of sample: the run's own figures are in the full band)."""
    import tempfile

    from gpuplace.catalog import load_gpu_catalog, model_arch_from_config, resolve_model
    from gpuplace.catalog.band import load_prediction_band
    from gpuplace.catalog.efficiency import load_efficiency_table

    catalog, eff = load_gpu_catalog(), load_efficiency_table()
    models = {
        m: model_arch_from_config(m, resolve_model(m).config) for m in ("llama-3.1-8b", "llama-3.1-70b")
    }

    def band_without(source: str) -> Any:
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "band.csv"
            write_band([p for p in points if p.source != source], path)
            return load_prediction_band(path)

    def at(row: Row, slo: Any) -> Any:
        band = band_without(publisher(row.raw))
        pred, why = predict_row(row, models, eff, catalog, slo=slo, band=band)
        if pred is None:
            raise RuntimeError(f"line {row.index + 2}: {why}")
        return pred

    return server_checks(rows, at)


def main() -> int:
    if not MEASUREMENTS.is_file():
        print(
            f"no {MEASUREMENTS}: the shared data set sits beside the repository (../shared/data)",
            file=sys.stderr,
        )
        return 2
    t0 = time.perf_counter()
    rows = read_rows(MEASUREMENTS)
    results, skipped, fp8 = evaluate(rows)
    points = band_points(results)
    cells = write_band(points, BAND)
    report = {
        "date": time.strftime("%Y-%m-%d"),
        "rows": len(rows),
        "expressible": sum(1 for r in rows if not r.reason),
        "fp8_modelled": fp8,
        "goals": goal_counts(results),
        "band_cells": cells,
        "coverage": coverage_report(points),
        "breakdown": breakdown(results),
        "server_runs": server_runs(rows, points),
        "fitted_lines": sorted(fitted_lines()),
        "implied_sharegpt_output": implied_output_tokens(rows),
        "results": results,
        "skipped": skipped,
        "seconds": time.perf_counter() - t0,
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "published.json").write_text(json.dumps(report, indent=1) + "\n")
    (OUT / "published.md").write_text(markdown(report))
    print(
        json.dumps(
            report["goals"]
            | {"coverage": {k: report["coverage"][k] for k in ("inside", "judged", "no_band")}},
            indent=1,
        )
    )
    print(json.dumps(report["server_runs"], indent=1))
    print(
        f"{report['expressible']} expressible rows, {len(skipped)} not; {report['seconds']:.0f} s; wrote {OUT}/published.md"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
