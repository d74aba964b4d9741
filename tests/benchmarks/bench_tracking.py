"""Tracking benchmark (issue: MLflow tracking, comparison, reports). Writes docs/benchmarks/tracking.{md,json}.

Time to log one complete pipeline run — parent run, profile step with a nested run per sweep point,
plan step with plan.json and manifests, one run per path with its records, the comparison with its
table, report and four figures; about 200 metrics — to a local ``mlflow server`` (SQLite backend,
proxied artifacts) on this machine. Batched (``log_batch``) against a baseline that sends one request
per metric, param and tag, same run structure, same server, interleaved rounds. Goal: under 5 s.

Run: `make bench` (or `.venv/bin/python tests/benchmarks/bench_tracking.py`).
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from gpuplace.plandir import read_plan_dir
from gpuplace.profiling.io import load_profile
from gpuplace.progress import Progress
from gpuplace.steps.compare import CompareOptions, run_compare_step
from gpuplace.steps.track import read_path
from gpuplace.tracking.client import Tracker
from gpuplace.tracking.config import TrackingConfig
from gpuplace.tracking.naming import (
    comparison_metric_dict,
    path_metric_dict,
    plan_metric_dict,
    point_metric_dict,
)
from gpuplace.tracking.pipeline import RunBundle, log_pipeline_run
from gpuplace.tracking.server import start_local_server
from tests.support.sample import write_sample_inputs

OUT = Path(__file__).resolve().parents[2] / "docs" / "benchmarks"
ROUNDS = 3
GOAL_S = 5.0


def metric_count(bundle: RunBundle) -> int:
    from gpuplace.profiling.summary import profile_metrics

    c = bundle.comparison
    assert c is not None and c.plan is not None and bundle.profile is not None
    profile = bundle.profile
    n = len(profile_metrics(profile)) + sum(len(point_metric_dict(r)) for r in profile.results)
    n += len(plan_metric_dict(c.plan)) + sum(len(path_metric_dict(m)) for m in c.paths)
    return n + len(comparison_metric_dict(c))


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="bench-tracking-"))
    sample = write_sample_inputs(work / "in", requests=200, with_profile=True)
    manifests = work / "manifests"
    manifests.mkdir()
    for name in ("deployment", "service", "pdb"):
        (manifests / f"{name}.yaml").write_text(f"apiVersion: v1\nkind: {name}\nmetadata: {{name: x}}\n")
    paths = sample.path_inputs()
    result = run_compare_step(
        CompareOptions(
            paths=paths,
            plan=str(sample.plan),
            inventory="h100-nvlink",
            penalty_usd_per_breach=0.05,
            engineering_weeks=3,
            rate_usd_per_week=5000,
        ),
        work / "report",
    )
    bundle = RunBundle(
        name="bench",
        comparison=result.comparison,
        profile=load_profile(sample.profile),
        profile_file=sample.profile,
        plan=read_plan_dir(sample.plan),
        manifests=manifests,
        paths=tuple(read_path(p.path, Path(p.deployment), Path(p.loadtest)) for p in paths),
        report_dir=result.out_dir,
    )
    n_metrics = metric_count(bundle)
    print(f"starting mlflow server (one-off, ~30 s on 2 cores) under {work}", file=sys.stderr)
    server = start_local_server(work / "mlflow")
    times: dict[str, list[float]] = {"batched": [], "per_call": []}
    try:
        config = TrackingConfig(server.uri, experiment="bench")
        trackers = {"batched": Tracker(config), "per_call": Tracker(config, batching=False)}
        log_pipeline_run(trackers["batched"], bundle)  # warm-up: imports, experiment, connection pool
        with Progress(2 * ROUNDS, "tracking benchmark") as progress:
            for _ in range(ROUNDS):
                for mode in ("batched", "per_call"):
                    t0 = time.perf_counter()
                    log_pipeline_run(trackers[mode], bundle)
                    times[mode].append(time.perf_counter() - t0)
                    progress.advance(f"{mode} {times[mode][-1]:.2f} s")
    finally:
        server.stop()
    batched = statistics.median(times["batched"])
    per_call = statistics.median(times["per_call"])
    figures = {
        "metrics_per_run": n_metrics,
        "runs_per_pipeline_run": 3 + len(bundle.paths) + 4,  # parent, profile, plan, paths, sweep points
        "rounds": ROUNDS,
        "batched_s": times["batched"],
        "per_call_s": times["per_call"],
        "batched_median_s": batched,
        "per_call_median_s": per_call,
        "speedup": per_call / batched,
        "goal_s": GOAL_S,
        "goal_met": batched < GOAL_S,
    }
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "tracking.json").write_text(json.dumps(figures, indent=2) + "\n")
    (OUT / "tracking.md").write_text(
        f"""# Tracking benchmark

`tests/benchmarks/bench_tracking.py` (run by `make bench`) logs one complete pipeline run — parent run,
profile step with one nested run per sweep point (4), plan step with plan.json and 3 manifests, one run per
path with deployment.json, report.json, records.jsonl and a dataset, and the comparison with its table,
comparison.json, report.md/.html and four figures; **{n_metrics} metrics** in all — to a local
`mlflow server` (SQLite backend, `--artifacts-destination`, loopback) on this machine (2 CPU cores,
shared with other work, so figures are noisy). Both modes log the same runs and artifacts to the same
server, interleaved, {ROUNDS} rounds; the table shows medians.

| mode | median wall time | all rounds |
|---|---:|---|
| batched (`log_batch`, gpuplace's `Tracker`) | **{batched:.2f} s** | {", ".join(f"{t:.2f}" for t in times["batched"])} |
| baseline: one request per metric, param and tag | {per_call:.2f} s | {", ".join(f"{t:.2f}" for t in times["per_call"])} |

Batching is **{per_call / batched:.1f}×** faster than one call per metric in the same run. Goal: under
{GOAL_S:.0f} s for the complete run — **{"met" if batched < GOAL_S else "NOT met"}**. What remains is mostly
run creation (one request per run), artifact uploads (one request per file) and figure rendering by
`log_figure`, which batching cannot merge.
"""
    )
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
