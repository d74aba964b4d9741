#!/usr/bin/env bash
# The closed loop on this machine's device (issue 11): measure the local engine (`transformers serve
# --continuous-batching`) step time, plan one replica of it with `--inventory local`, deploy it with the
# plan's engine parameters, load-test the plan's traffic, and write predicted against measured p50/p99
# TTFT and TPOT with the error, (measured − predicted) / predicted.
#
#   bash tests/gpu/closed_loop.sh MODEL DEVICE DEST
#
# tests/gpu/run.sh calls it with llama-3.1-8b (random weights) on cuda, DEST = docs/benchmarks/gpu (or
# $OUT). It runs from the source tree with `python3 -m gpuplace` (PYTHONPATH=src): no kfp, no mlflow.
# Traffic: LOOP_RATE req/s (default 2) Poisson, LOOP_PROMPT/LOOP_OUTPUT tokens (default 512/64),
# LOOP_REQUESTS requests (default 100). The SLO is loose on purpose: the point is the prediction error.
set -euo pipefail
MODEL=${1:?model} DEVICE=${2:?device} DEST=${3:?destination folder}
RATE=${LOOP_RATE:-2} PROMPT=${LOOP_PROMPT:-512} OUTPUT=${LOOP_OUTPUT:-64} REQUESTS=${LOOP_REQUESTS:-100}
PY=${PYTHON:-python3}
OUTDIR="$DEST/closed-loop-$MODEL"
rm -rf "$OUTDIR" && mkdir -p "$OUTDIR"
gp() { "$PY" -m gpuplace "$@"; }

gp profile --model "$MODEL" --device "$DEVICE" --engine-steps --out "$OUTDIR/steps.json" 2>&1 | tee "$OUTDIR/steps.txt"
gp plan --model "$MODEL" --inventory local --engine-steps "$OUTDIR/steps.json" \
  --slo-tpot-ms 1000 --slo-ttft-ms 60000 --rate "$RATE" --prompt-tokens "$PROMPT" --output-tokens "$OUTPUT" \
  --out "$OUTDIR/plan" 2>&1 | tee "$OUTDIR/plan.txt"
gp deploy "$OUTDIR/plan" --target local --timeout 1200 --out "$OUTDIR/deployment" 2>&1 | tee "$OUTDIR/deploy.txt"
trap 'gp teardown "$OUTDIR/plan" --target local || true' EXIT
gp loadtest --deployment "$OUTDIR/deployment/deployment.json" --plan "$OUTDIR/plan" \
  --max-requests "$REQUESTS" --out "$OUTDIR/loadtest" --quiet 2>&1 | tee "$OUTDIR/loadtest.txt"

"$PY" - "$OUTDIR" "$MODEL" "$RATE" "$PROMPT" "$OUTPUT" "$REQUESTS" <<'EOF' | tee "$OUTDIR/closed-loop.md"
import json, sys
from pathlib import Path

out, model, rate, prompt, output, requests = sys.argv[1:]
report = json.loads(Path(out, "loadtest", "report.json").read_text())
steps = json.loads(Path(out, "steps.json").read_text())
rows = report.get("predicted_vs_measured") or {}
print(f"# Closed loop: {model} on {steps['device_name']} ({steps['engine']})\n")
print(f"Poisson {rate} req/s, {prompt}/{output} tokens, {requests} requests: {report['completed']} completed, "
      f"{report['failed']} failed. Step model: fixed {steps['fixed_s'] * 1e3:.2f} ms, fit RMS error "
      f"{steps['rms_relative_error']:.0%}. Error = (measured - predicted) / predicted.\n")
print("| metric | predicted ms | measured ms | error |\n|---|---:|---:|---:|")
for key in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s"):
    r = rows.get(key)
    if r is None:
        print(f"| {key} | - | - | not compared |")
        continue
    print(f"| {key} | {r['predicted_s'] * 1e3:.2f} | {r['measured_s'] * 1e3:.2f} | {r['error']:+.0%} |")
if not rows:
    print("\nNo prediction was compared: see loadtest.txt (the plan's device and the served one differ?)")
EOF
