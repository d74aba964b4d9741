"""Ask NVIDIA AIConfigurator (in its own venv, offline) the questions the fidelity benchmark compares.

Run by ``bench_fidelity.py`` with ``.venv-aic/bin/python``; imports only the standard library and
``aiconfigurator`` (never gpuplace, which is not installed there). Reads a JSON list of jobs on stdin
and writes a JSON list of answers on stdout, one per job, in order:

* ``{"kind": "recommend", model, system, isl, osl, rate, ttft_ms, tpot_ms}``: ``cli recommend`` for a
  request rate under the SLA, vLLM backend, aggregated serving; the answer lists, per TP degree, the
  replicas and GPUs it needs and its operating point (concurrency, req/s per replica, TTFT, TPOT).
* ``{"kind": "at_rate", model, system, tp, isl, osl, rate, max_batch}``: ``cli estimate`` (agg) over
  batch sizes, bisected to the concurrency whose throughput is ``rate`` req/s per replica; TTFT and
  TPOT are interpolated between the two batch sizes that bracket it.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import math
import sys
from typing import Any


def _quiet() -> None:
    logging.disable(logging.WARNING)


def _estimate(job: dict[str, Any], batch: int) -> dict[str, float]:
    from aiconfigurator.cli.api import cli_estimate

    with contextlib.redirect_stdout(io.StringIO()):
        r = cli_estimate(
            model_path=job["model"],
            system_name=job["system"],
            mode="agg",
            backend_name="vllm",
            isl=job["isl"],
            osl=job["osl"],
            batch_size=batch,
            tp_size=job["tp"],
        )
    return {
        "batch": batch,
        "ttft_ms": float(r.ttft),
        "tpot_ms": float(r.tpot),
        "seq_s": float(r.seq_per_second),
        "backend_version": str(r.backend_version),
    }


def at_rate(job: dict[str, Any]) -> dict[str, Any]:
    rate = float(job["rate"])
    lo = _estimate(job, 1)
    if lo["seq_s"] >= rate:
        return {
            "batch": 1.0,
            "ttft_ms": lo["ttft_ms"],
            "tpot_ms": lo["tpot_ms"],
            "note": "rate below batch 1",
        }
    hi_b = max(2, int(job.get("max_batch") or 512))
    while True:
        try:
            hi = _estimate(job, hi_b)
            break
        except RuntimeError as e:  # the KV cache of hi_b sequences does not fit: halve
            if "OOM" not in str(e) or hi_b <= 2:
                raise
            hi_b //= 2
    if hi["seq_s"] < rate:
        return {
            "batch": math.nan,
            "ttft_ms": math.nan,
            "tpot_ms": math.nan,
            "note": f"{hi['seq_s']:.2f} req/s at batch {hi_b}",
        }
    while hi["batch"] - lo["batch"] > 1:
        mid = _estimate(job, int((lo["batch"] + hi["batch"]) // 2))
        if mid["seq_s"] >= rate:
            hi = mid
        else:
            lo = mid
    w = (rate - lo["seq_s"]) / (hi["seq_s"] - lo["seq_s"]) if hi["seq_s"] > lo["seq_s"] else 1.0
    return {
        "batch": lo["batch"] + w * (hi["batch"] - lo["batch"]),
        "ttft_ms": lo["ttft_ms"] + w * (hi["ttft_ms"] - lo["ttft_ms"]),
        "tpot_ms": lo["tpot_ms"] + w * (hi["tpot_ms"] - lo["tpot_ms"]),
        "bracket": [lo, hi],
        "backend_version": hi["backend_version"],
    }


def recommend(job: dict[str, Any]) -> dict[str, Any]:
    from aiconfigurator.cli.api import cli_recommend

    with contextlib.redirect_stdout(io.StringIO()):
        result = cli_recommend(
            job["model"],
            job["system"],
            target_request_rate=float(job["rate"]),
            backend="vllm",
            isl=job["isl"],
            osl=job["osl"],
            ttft=float(job["ttft_ms"]),
            tpot=float(job["tpot_ms"]),
        )
    frame = result.best_configs.get("agg")
    rows = []
    if frame is not None:
        for _, row in frame.iterrows():
            rows.append(
                {
                    "tp": int(row["tp"]),
                    "replicas": int(row["replicas_needed"]),
                    "gpus": int(row["total_gpus_needed"]),
                    "concurrency": float(row["concurrency"]),
                    "rate_per_replica": float(row["request_rate"]),
                    "ttft_ms": float(row["ttft"]),
                    "tpot_ms": float(row["tpot"]),
                    "version": str(row["version"]),
                }
            )
    return {"rows": rows, "chosen": result.chosen_exp}


def main() -> int:
    _quiet()
    jobs = json.load(sys.stdin)
    answers = []
    for job in jobs:
        try:
            answers.append(recommend(job) if job["kind"] == "recommend" else at_rate(job))
        except Exception as e:  # an unsupported combination is an answer too
            answers.append({"error": f"{type(e).__name__}: {e}"})
        print(f"aic_driver: {len(answers)}/{len(jobs)} {job['kind']}", file=sys.stderr, flush=True)
    json.dump(answers, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
