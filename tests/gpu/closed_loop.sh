#!/usr/bin/env bash
# The closed loop on this machine's device (issue 11; issue 35 on a GPU): measure the local engine's
# (`transformers serve --continuous-batching`) step time, plan one replica of it with `--inventory local`
# at each rate, deploy it once with the plan's engine parameters, load-test each plan's traffic against
# it, and write predicted against measured p50/p99 TTFT and TPOT per rate with the error,
# (measured − predicted) / predicted. The prediction comes from the step profile alone (measured before
# any load test, in other runs: bursts, lone prefills, staggered streams), never from the loop it is
# checked against.
#
#   bash tests/gpu/closed_loop.sh MODEL DEVICE DEST
#
# tests/gpu/run.sh calls it with LOOP_MODEL (default llama-100m) on DEVICE. It runs from the source tree
# with `python3 -m gpuplace` (PYTHONPATH=src): no kfp, no mlflow. Traffic: LOOP_RATES req/s (default
# "2 4", space-separated; LOOP_RATE alone sets one) Poisson, LOOP_PROMPT/LOOP_OUTPUT tokens (default
# 512/64), LOOP_REQUESTS requests per rate (default 100); STEPS_REPEATS repeats of each engine-step
# measurement (default 5). The SLO is loose on purpose: the point is the
# prediction error. Each rate's plan, load test and report land under DEST/closed-loop-MODEL/.
set -euo pipefail
MODEL=${1:?model} DEVICE=${2:?device} DEST=${3:?destination folder}
RATES=${LOOP_RATES:-${LOOP_RATE:-2 4}} PROMPT=${LOOP_PROMPT:-512} OUTPUT=${LOOP_OUTPUT:-64}
REQUESTS=${LOOP_REQUESTS:-100}
PY=${PYTHON:-python3}
OUTDIR="$DEST/closed-loop-$MODEL"
rm -rf "$OUTDIR" && mkdir -p "$OUTDIR"
gp() { "$PY" -m gpuplace "$@"; }

gp profile --model "$MODEL" --device "$DEVICE" --engine-steps --engine-steps-repeats "${STEPS_REPEATS:-5}" \
  --out "$OUTDIR/steps.json" 2>&1 | tee "$OUTDIR/steps.txt"
first=""
for rate in $RATES; do
  gp plan --model "$MODEL" --inventory local --engine-steps "$OUTDIR/steps.json" \
    --slo-tpot-ms 1000 --slo-ttft-ms 60000 --rate "$rate" --prompt-tokens "$PROMPT" --output-tokens "$OUTPUT" \
    --out "$OUTDIR/plan-$rate" 2>&1 | tee "$OUTDIR/plan-$rate.txt"
  first=${first:-$rate}
done
gp deploy "$OUTDIR/plan-$first" --target local --timeout 1200 --out "$OUTDIR/deployment" 2>&1 | tee "$OUTDIR/deploy.txt"
trap 'gp teardown "$OUTDIR/plan-$first" --target local || true' EXIT
for rate in $RATES; do
  gp loadtest --deployment "$OUTDIR/deployment/deployment.json" --plan "$OUTDIR/plan-$rate" \
    --max-requests "$REQUESTS" --out "$OUTDIR/loadtest-$rate" --quiet 2>&1 | tee "$OUTDIR/loadtest-$rate.txt"
done

"$PY" - "$OUTDIR" "$MODEL" "$PROMPT" "$OUTPUT" "$REQUESTS" $RATES <<'EOF' | tee "$OUTDIR/closed-loop.md"
import json, sys
from pathlib import Path

out, model, prompt, output, requests, *rates = sys.argv[1:]
steps = json.loads(Path(out, "steps.json").read_text())
print(f"# Closed loop: {model} on {steps['device_name']} ({steps['engine']})\n")
print(f"Poisson arrivals, {prompt}/{output} tokens, {requests} requests per rate. Step model: fixed "
      f"{steps['fixed_s'] * 1e3:.2f} ms, fit RMS error {steps['rms_relative_error']:.0%}, measured before the "
      "load tests. Error = (measured - predicted) / predicted.\n")
print("| rate req/s | completed | metric | predicted ms | measured ms | error |\n|---:|---:|---|---:|---:|---:|")
for rate in rates:
    report = json.loads(Path(out, f"loadtest-{rate}", "report.json").read_text())
    rows = report.get("predicted_vs_measured") or {}
    for key in ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s"):
        r = rows.get(key)
        if r is None:
            print(f"| {rate} | {report['completed']} | {key} | - | - | not compared |")
            continue
        print(f"| {rate} | {report['completed']} | {key} | {r['predicted_s'] * 1e3:.2f} | "
              f"{r['measured_s'] * 1e3:.2f} | {r['error']:+.0%} |")
EOF
