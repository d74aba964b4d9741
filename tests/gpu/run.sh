#!/usr/bin/env bash
# The GPU check (issues 1 and 35), from the repository root on a machine with a GPU:
#   bash tests/gpu/run.sh                       results in docs/benchmarks/gpu/<date>/ (or $DEST, or $OUT)
# It runs from the source tree (PYTHONPATH=src) and needs only torch, transformers, pandas, pyarrow, numpy,
# pyyaml, psutil, tqdm and nvidia-ml-py, plus aiohttp and transformers' serving extra (fastapi, uvicorn,
# pydantic, openai) for the closed loop, and pytest: no kfp, mlflow, kubernetes or cryptography, and no
# install. docs/profiling.md lists what each step runs and how long it took on an H200.
#
# Every step runs whatever the earlier ones did (GPU time is scarce: a failure must not cost the later
# measurements); each writes its log into the results folder as it goes, steps.tsv records each step's
# exit status and seconds, and the script exits non-zero when any step failed.
#
# Settable (environment): DEVICE (cuda; cpu runs the same steps on the CPU, which is how make test checks
# this script: tests/integration/test_gpu_check_bare.py), MODEL (the profiled model, llama-3.1-8b),
# LOOP_MODEL (the closed loop's, llama-100m: an 8B model directory would be written on the CPU in fp32,
# too slow for a short GPU lease), PROFILE_BATCHES (1,8), PROFILE_PROMPT (1024), PROFILE_OUTPUT (64),
# PROFILE_REPEATS (3), OPERATOR_MAX_TOKENS (16384), TUNED (1: also profile batch 1 with inductor's
# coordinate-descent tuning; 0 on a CPU), LOOP_RATES ("2 4" req/s), LOOP_PROMPT (512), LOOP_OUTPUT (64),
# LOOP_REQUESTS (80 per rate), STEPS_REPEATS (3: the engine-step measurements' repeats), PREDICT_GPU
# (the catalog GPU predicted for; default: this GPU's), PYTHON (python3).
set -uo pipefail
cd "$(dirname "$0")/../.."
DEVICE=${DEVICE:-cuda}
MODEL=${MODEL:-llama-3.1-8b}
LOOP_MODEL=${LOOP_MODEL:-llama-100m}
PROFILE_BATCHES=${PROFILE_BATCHES:-1,8} PROFILE_PROMPT=${PROFILE_PROMPT:-1024} PROFILE_OUTPUT=${PROFILE_OUTPUT:-64}
PROFILE_REPEATS=${PROFILE_REPEATS:-3} OPERATOR_MAX_TOKENS=${OPERATOR_MAX_TOKENS:-16384}
TUNED=${TUNED:-$([ "$DEVICE" = cpu ] && echo 0 || echo 1)}
export LOOP_RATES=${LOOP_RATES:-2 4} LOOP_PROMPT=${LOOP_PROMPT:-512} LOOP_OUTPUT=${LOOP_OUTPUT:-64}
export LOOP_REQUESTS=${LOOP_REQUESTS:-80} STEPS_REPEATS=${STEPS_REPEATS:-3}
DEST=${DEST:-${OUT:-docs/benchmarks/gpu/$(date -u +%Y-%m-%d)}}
PY=${PYTHON:-python3}
export PYTHON="$PY" PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
mkdir -p "$DEST"
printf 'step\tstatus\tseconds\n' > "$DEST/steps.tsv"
failed=0
gp() { "$PY" -m gpuplace "$@"; }
# step NAME COMMAND...: run it, its output into DEST/NAME.log (and here), its status and time into steps.tsv
step() {
  local name=$1 start status ms
  shift
  echo "== $name: $*"
  start=$(date +%s%N)
  "$@" 2>&1 | tee "$DEST/$name.log"
  status=${PIPESTATUS[0]}
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  printf '%s\t%s\t%d.%d\n' "$name" "$status" $((ms / 1000)) $((ms % 1000 / 100)) >> "$DEST/steps.tsv"
  if [ "$status" -ne 0 ]; then
    failed=1
    echo "== $name FAILED (exit $status); the later steps still run"
  fi
  return 0
}
environment() {
  { nvidia-smi && nvidia-smi topo -m; } 2>&1 || echo "no nvidia-smi (DEVICE=$DEVICE)"
  "$PY" -c 'import sys, torch, transformers; print("python", sys.version.split()[0], "torch", torch.__version__, "transformers", transformers.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())'
  for forbidden in kfp mlflow kubernetes cryptography; do
    "$PY" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('$forbidden') is not None)" \
      || echo "note: $forbidden is installed here; the GPU path never imports it"
  done
}
operators() {
  gp profile --operators --model "$MODEL" --device "$DEVICE" --operator-max-tokens "$OPERATOR_MAX_TOKENS" \
    --out "$DEST/operators.json" --markdown "$DEST/operators.md"
}
profile() {
  gp profile --model "$MODEL" --device "$DEVICE" --dtypes auto --batch-sizes "$PROFILE_BATCHES" \
    --prompt-tokens "$PROFILE_PROMPT" --output-tokens "$PROFILE_OUTPUT" --mode both --repeats "$PROFILE_REPEATS" \
    --breakdown "$DEST/breakdown.json" --out "$DEST/profile.parquet" --device-json "$DEST/device.json" \
    --markdown "$DEST/profile.md"
}
profile_tuned() {
  gp profile --model "$MODEL" --device "$DEVICE" --dtypes auto --batch-sizes 1 --prompt-tokens "$PROFILE_PROMPT" \
    --output-tokens "$PROFILE_OUTPUT" --mode static --repeats "$PROFILE_REPEATS" \
    --compile-options coordinate_descent_tuning=true --breakdown "$DEST/breakdown-tuned.json" \
    --out "$DEST/profile-tuned.parquet" --markdown "$DEST/profile-tuned.md"
}
gpu_tests() { GPUPLACE_TEST_DEVICE="$DEVICE" "$PY" -m pytest -q -m gpu tests/gpu -p no:cacheprovider; }
closed_loop() { bash tests/gpu/closed_loop.sh "$LOOP_MODEL" "$DEVICE" "$DEST"; }
predict() { "$PY" tests/gpu/predict.py "$DEST" "$MODEL" "$DEVICE"; }

step environment environment
step operators operators
step profile profile
step gpu-tests gpu_tests
step closed-loop closed_loop
step predict predict
# last: a second compile of the model (minutes); a lease that runs out cuts this, not the rest
[ "$TUNED" = 1 ] && step profile-tuned profile_tuned
echo "== steps (status, seconds):"
column -t "$DEST/steps.tsv" 2>/dev/null || cat "$DEST/steps.tsv"
echo "results in $DEST"
exit "$failed"
