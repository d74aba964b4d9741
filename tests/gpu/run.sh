#!/usr/bin/env bash
# The GPU check (issue: foundation and profiler). On a CUDA machine, from the repository root:
#   bash tests/gpu/run.sh            (results under docs/benchmarks/gpu/, or under $OUT when set)
# It profiles llama-3.1-8b in bf16 (batch 1 and 8, prompt 1024, output 128) in eager and CUDA-graph
# (static cache + torch.compile mode="reduce-overhead") modes and writes the table and MBU, then runs
# the gpu-marked tests. It needs only torch, transformers, pandas, pyarrow (and nvidia-ml-py for
# topology): no kfp, no mlflow, no install — it runs from the source tree. Then it runs the closed loop
# (tests/gpu/closed_loop.sh) for llama-3.1-8b with random weights on `transformers serve
# --continuous-batching` on CUDA: predicted against measured p50/p99 TTFT and TPOT on this GPU, into
# closed-loop-llama-3.1-8b/ (closed-loop.md; it also needs the serving extra: aiohttp and transformers'
# serve dependencies).
set -euo pipefail
cd "$(dirname "$0")/../.."
DEST=${OUT:-docs/benchmarks/gpu}
mkdir -p "$DEST"
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
{ nvidia-smi; nvidia-smi topo -m; } > "$DEST/nvidia-smi.txt" 2>&1 || true
"$PY" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__, "cuda", torch.version.cuda)' | tee "$DEST/versions.txt"
"$PY" -m gpuplace profile --model llama-3.1-8b --device cuda --dtypes bfloat16 \
  --batch-sizes 1,8 --prompt-tokens 1024 --output-tokens 128 --mode both --repeats 5 \
  --out "$DEST/llama-3.1-8b.parquet" --device-json "$DEST/device.json" --markdown "$DEST/llama-3.1-8b.md" \
  2>&1 | tee "$DEST/profile.txt"
# A failing GPU test must not keep the closed loop from running (the device time is scarce), but the
# script still exits non-zero at the end when either failed.
failed=0
"$PY" -m pytest -q -m gpu tests/gpu -p no:cacheprovider 2>&1 | tee "$DEST/pytest-gpu.txt" || failed=1
bash tests/gpu/closed_loop.sh llama-3.1-8b cuda "$DEST" 2>&1 | tee "$DEST/closed-loop.txt" || failed=1
exit "$failed"
