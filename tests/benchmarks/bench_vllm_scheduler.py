"""gpuplace's serving simulation against vLLM 0.34's own V1 ``Scheduler``, step by step (issue 21).

Part ``agreement``: the referee's request streams (``tests/support/vllm_scheduler.py``: light load, a
token-budget-bound burst, a KV cache that preempts, a ``max_num_seqs``-bound burst, sustained Poisson
traffic, the issue's hand run, and the preempting stream with vLLM's prefix cache on) go through
gpuplace's simulation and through vLLM's scheduler (``tests/referee/vllm_scheduler_driver.py`` in the
referee venv, which ``tests/referee/vllm_venv.sh`` creates on first use); every step is compared: the
requests scheduled, the prefill chunks, the decodes, the preemptions. It also times the driver.

Part ``impact``: what following vLLM 0.33 changed in predictions. The simulation as it was before the
referee (``engine_sim.py`` at commit ``BEFORE``, read with ``git show``) and as it is now predict
p50/p99 TTFT and TPOT for shapes whose KV cache is tight, on the GPU roofline step model.

Writes docs/benchmarks/vllm_scheduler.{md,json} (a part not run keeps its previous figures).
Run: `.venv/bin/python tests/benchmarks/bench_vllm_scheduler.py --part all`.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # tests.support, when run as a script

from tests.support import vllm_scheduler as vs  # noqa: E402
from tests.support.v1_rules import async_steps  # noqa: E402

OUT = REPO / "docs" / "benchmarks"
BEFORE = "c7cabae"  # main before the referee: admission on the first chunk, every block usable
TRACED_BEFORE = "9c094db"  # the same rules, with the step trace the comparison needs
IMPACT_SHAPES = (  # model, GPU, TP, prompt, output: KV caches that fill at these loads
    ("llama-3.1-8b", "L4-24GB", 1, 2048, 256),
    ("llama-3.1-8b", "A10-24GB", 1, 1024, 512),
    ("llama-3.1-70b", "H100-SXM5-80GB", 2, 4096, 256),
)
IMPACT_LOADS = (0.5, 0.7, 0.85)


def part_agreement(recorded: dict[str, Any]) -> dict[str, Any]:
    """Every stream through vLLM and the simulation; ``recorded``: the last run's figures, whose *before*
    columns are kept when the commit they were simulated at is no longer in this clone's history."""
    with tempfile.TemporaryDirectory() as tmp:
        run = vs.referee(vs.streams(), vs.write_model_dir(Path(tmp)))
    streams = {s.name: s for s in vs.streams()}
    old_module = _engine_sim_at(TRACED_BEFORE)
    kept = {r["name"]: r for r in recorded.get("streams", [])}
    rows = []
    for a in run.agreements:
        s = streams[a.name]
        t0 = time.perf_counter()
        vs.simulated_steps(s)
        wall = time.perf_counter() - t0
        if old_module is not None:
            before = vs.compare(a.name, vs.simulated_steps(s, old_module.simulate), run.vllm_steps[a.name])
            was = {
                "before_same_step": before.same_step,
                "before_compared": before.compared,
                "before_steps_gpuplace": before.steps_gpuplace,
            }
        else:  # recorded when the commit was in the history (a vLLM run does not change it)
            old = kept.get(a.name, {})
            was = {
                k: old.get(k, "n/a") for k in ("before_same_step", "before_compared", "before_steps_gpuplace")
            }
        rows.append(
            a.as_dict()
            | {
                "what": s.what,
                "requests": len(s.requests),
                "vllm_wall_s": run.stream_wall_s.get(a.name),
                "gpuplace_wall_s": wall,
            }
            | was
            | (
                {"lag_model_same_step": vs.compare(a.name, async_steps(s), run.vllm_steps[a.name]).same_step}
                if s.async_scheduling
                else {}
            )
        )
        print(f"{a.name}: {a.same_step}/{a.compared} identical steps", flush=True)
    return {
        "vllm_version": run.vllm_version,
        "import_s": run.import_s,
        "driver_wall_s": run.wall_s,
        "streams": rows,
    }


def _engine_sim_at(commit: str) -> Any:
    """``planner/engine_sim.py`` as it was at ``commit`` (over today's other modules); None when the commit
    is not in this clone's history (the history was rewritten since: the figures then stay as recorded)."""
    shown = subprocess.run(
        ["git", "show", f"{commit}:src/gpuplace/planner/engine_sim.py"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    if shown.returncode != 0:
        print(f"commit {commit} is not in this clone's history: its figures stay as recorded", flush=True)
        return None
    source = shown.stdout
    path = Path(tempfile.mkdtemp()) / f"engine_sim_{commit}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"engine_sim_{commit}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def part_impact(requests: int) -> dict[str, Any] | None:
    from gpuplace.catalog import load_gpu_catalog, model_arch_from_config, resolve_model
    from gpuplace.catalog.efficiency import load_efficiency_table
    from gpuplace.planner.engine import vllm_engine_params
    from gpuplace.planner.engine_sim import simulate
    from gpuplace.planner.hardware import ReplicaHardware
    from gpuplace.planner.replica import ReplicaModel, TrafficShape
    from gpuplace.planner.steptime import roofline_step_model
    from gpuplace.workload import LengthDist

    before = _engine_sim_at(BEFORE)
    if before is None:
        return None
    catalog = load_gpu_catalog()
    rows = []
    for model_name, gpu, tp, prompt, output in IMPACT_SHAPES:
        spec = catalog.get(gpu)
        arch = model_arch_from_config(model_name, resolve_model(model_name).config)
        shape = ReplicaHardware(spec, tp=tp, link="nvlink" if tp > 1 else "single")
        model = roofline_step_model(arch, shape, load_efficiency_table().for_gpu(spec, arch))
        engine = vllm_engine_params(arch, spec, tp)
        traffic = TrafficShape(LengthDist("fixed", prompt), LengthDist("fixed", output), requests=requests)
        capacity = ReplicaModel(engine, model, traffic).capacity_rps
        for load in IMPACT_LOADS:
            reqs = traffic.at_rate(load * capacity)
            old, new = before.simulate(reqs, engine, model), simulate(reqs, engine, model)
            row: dict[str, Any] = {
                "model": model_name, "gpu": gpu, "tp": tp, "prompt": prompt, "output": output,
                "num_gpu_blocks": engine.num_gpu_blocks, "load": load, "rate_rps": load * capacity,
            }  # fmt: skip
            for tag, p in (("before", old), ("now", new)):
                row |= {
                    f"{tag}_stable": p.stable, f"{tag}_preemptions": p.preemptions,
                    f"{tag}_ttft_p50_s": p.ttft.p50, f"{tag}_ttft_p99_s": p.ttft.p99,
                    f"{tag}_tpot_p50_s": p.tpot.p50, f"{tag}_tpot_p99_s": p.tpot.p99,
                }  # fmt: skip
            rows.append(row)
            print(
                f"impact {model_name} {gpu} TP{tp} {load:.0%}: {old.preemptions} → {new.preemptions}",
                flush=True,
            )
    return {"before": BEFORE, "requests": requests, "rows": rows}


def _pct(now: float, before: float) -> str:
    if not (before > 0 and now < float("inf") and before < float("inf")):
        return "—"
    return f"{(now - before) / before:+.1%}"


def render(data: dict[str, Any]) -> str:
    lines = [
        "# gpuplace's simulation against vLLM's own V1 scheduler",
        "",
        "Produced by `.venv/bin/python tests/benchmarks/bench_vllm_scheduler.py --part all` "
        "(tests/benchmarks/bench_vllm_scheduler.py); the test that fails when the agreement drops is "
        "tests/referee/test_vllm_scheduler.py (`make referee`). Method: docs/serving-model.md, "
        '"vLLM\'s own scheduler as a referee".',
        "",
    ]
    agreement = data.get("agreement")
    if agreement:
        lines += [
            f"## Agreement, step by step (vLLM {agreement['vllm_version']}, {agreement.get('date', '')})",
            "",
            "Each stream is scheduled by gpuplace's simulation and by vLLM's `Scheduler` with the same "
            "step clock; step k of one is compared with step k of the other. *identical*: the same "
            "requests, the same prefill chunks (request, tokens), the same decodes and the same "
            "preemptions. Totals are gpuplace / vLLM. *Before*: the identical steps of the simulation "
            f"before it followed the referee (commit {TRACED_BEFORE}: admission on a prompt's first "
            "chunk, every block usable), against the same vLLM run.",
            "",
            "| stream | what | requests | steps (gpuplace / vLLM) | identical steps | before | same requests "
            "| same prefill chunks | same decodes | same preemptions | prefill tokens | decodes | preemptions |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in agreement["streams"]:
            n = max(r["compared"], 1)
            g, v = r["totals"]["gpuplace"], r["totals"]["vllm"]
            lines.append(
                f"| {r['name']} | {r['what']} | {r['requests']} | {r['steps_gpuplace']} / {r['steps_vllm']} "
                f"| {r['same_step']} ({r['same_step'] / n:.1%}) "
                f"| {r['before_same_step']} of {r['before_steps_gpuplace']} | {r['same_scheduled'] / n:.1%} "
                f"| {r['same_prefills'] / n:.1%} | {r['same_decodes'] / n:.1%} | {r['same_preempted'] / n:.1%} "
                f"| {g['prefill_tokens']} / {v['prefill_tokens']} | {g['decodes']} / {v['decodes']} "
                f"| {g['preemptions']} / {v['preemptions']} |"
            )
        lines += ["", "First difference per stream (none: every step identical):", ""]
        for r in agreement["streams"]:
            d = r["first_difference"]
            if r["error"]:
                lines.append(f"- {r['name']}: the driver failed: `{r['error'].splitlines()[0]}`")
            elif d is None:
                lines.append(f"- {r['name']}: none")
            else:
                lines.append(
                    f"- {r['name']}: step {d['step']}: gpuplace `{d['gpuplace']}`, vLLM `{d['vllm']}`"
                )
        lags = [r for r in agreement["streams"] if "lag_model_same_step" in r]
        if lags:
            lines += [
                "",
                "vLLM's asynchronous scheduling against the synchronous rules with two lags "
                "(async_steps in tests/support/v1_rules.py: arrivals seen at the start of the step in flight, a "
                "finished request freed a step later), identical steps: "
                + ", ".join(f"{r['name']} {r['lag_model_same_step']} of {r['steps_vllm']}" for r in lags)
                + ".",
            ]
        lines += [
            "",
            "What each schedule gives on the streams' step clock (read from the steps the same way for "
            "both: a first token at the end of the step that completes the prompt; open-loop streams), "
            "gpuplace / vLLM, milliseconds:",
            "",
            "| stream | p50 TTFT | p99 TTFT | p50 TPOT | p99 TPOT |",
            "|---|---:|---:|---:|---:|",
        ]
        for r in agreement["streams"]:
            g, v = r["latency"]["gpuplace"], r["latency"]["vllm"]
            if not g or not v:
                continue
            cells = [
                f"{g[m] * 1e3:.2f} / {v[m] * 1e3:.2f}"
                for m in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s")
            ]
            lines.append(f"| {r['name']} | " + " | ".join(cells) + " |")
        walls = ", ".join(f"{r['name']} {r['vllm_wall_s']:.1f} s" for r in agreement["streams"])
        sims = sum(r["gpuplace_wall_s"] for r in agreement["streams"])
        lines += [
            "",
            f"Cost on this machine: the driver process {agreement['driver_wall_s']:.0f} s in all, of which "
            f"importing vLLM {agreement['import_s']:.0f} s; per stream: {walls}. gpuplace's traced "
            f"simulations of all streams: {sims:.2f} s.",
            "",
        ]
    impact = data.get("impact")
    if impact:
        lines += [
            f"## What following vLLM 0.33 changed in predictions (against commit {impact['before']})",
            "",
            f"Fixed lengths, Poisson arrivals at a share of the replica's fluid capacity, {impact['requests']} "
            "requests, the GPU roofline step model, vLLM's engine defaults for the shape. Change = "
            "(now − before) / before.",
            "",
            "| model | GPU | TP | prompt/output | blocks | load | preemptions (before → now) "
            "| p50 TTFT | p99 TTFT | p50 TPOT | p99 TPOT |",
            "|---|---|---:|---|---:|---:|---|---:|---:|---:|---:|",
        ]
        for r in impact["rows"]:
            cells = [
                _pct(r[f"now_{m}"], r[f"before_{m}"])
                for m in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s")
            ]
            stable = (
                ""
                if r["now_stable"] and r["before_stable"]
                else f" (stable: {r['before_stable']} → {r['now_stable']})"
            )
            lines.append(
                f"| {r['model']} | {r['gpu']} | {r['tp']} | {r['prompt']}/{r['output']} | {r['num_gpu_blocks']} "
                f"| {r['load']:.0%} | {r['before_preemptions']} → {r['now_preemptions']}{stable} | "
                + " | ".join(cells)
                + " |"
            )
        lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("agreement", "impact", "all"), default="all")
    parser.add_argument("--requests", type=int, default=1200, help="requests per impact simulation")
    args = parser.parse_args()
    path = OUT / "vllm_scheduler.json"
    data = json.loads(path.read_text()) if path.exists() else {}
    today = datetime.date.today().isoformat()
    if args.part in ("agreement", "all"):
        data["agreement"] = part_agreement(data.get("agreement", {})) | {"date": today}
    if args.part in ("impact", "all"):
        impact = part_impact(args.requests)
        if impact is not None:  # else the recorded figures stay
            data["impact"] = impact | {"date": today}
    OUT.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, default=str) + "\n")
    (OUT / "vllm_scheduler.md").write_text(render(data))
    print(f"wrote {path} and vllm_scheduler.md")


if __name__ == "__main__":
    main()
