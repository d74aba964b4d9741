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
# serve dependencies). Last, `gpuplace predict` for this GPU (its catalog name matched from the device) at
# the closed loop's traffic and at a concurrency of 8, into predict.md beside the closed loop's figures.
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
# gpuplace predict for the lent GPU, beside the closed loop it just measured: the vLLM serving model of
# this GPU (catalog name matched from the device) at the closed loop's traffic, and at a closed loop of 8.
# It predicts vLLM; the closed loop measured transformers serve on the same GPU, so predict.md shows both
# and scores neither against the other.
"$PY" - "$DEST" "${LOOP_RATE:-2}" "${LOOP_PROMPT:-512}" "${LOOP_OUTPUT:-64}" <<'EOF' 2>&1 | tee "$DEST/predict.txt" || failed=1
import json, subprocess, sys
from pathlib import Path

import torch

from gpuplace.catalog import load_gpu_catalog

dest, rate, prompt, output = sys.argv[1:]
props = torch.cuda.get_device_properties(0)
spec = load_gpu_catalog().match_device(props.name, props.total_memory / 2**30)
if spec is None:
    sys.exit(f"{props.name} is not in the GPU catalog: no prediction")
base = [sys.executable, "-m", "gpuplace", "predict", "--model", "llama-3.1-8b", "--gpu", spec.name,
        "--prompt-tokens", prompt, "--output-tokens", output, "--json"]
rows = {}
for name, load in (("rate", ["--rate", rate]), ("concurrency-8", ["--concurrency", "8"])):
    done = subprocess.run(base + load, capture_output=True, text=True, check=True)
    rows[name] = json.loads(done.stdout)
    Path(dest, f"predict-{name}.json").write_text(done.stdout)


def ms(r, key):
    return "-" if r.get(key) is None else f"{r[key] * 1e3:.1f}"


loop = Path(dest, "closed-loop-llama-3.1-8b", "closed-loop.md")
lines = [f"# gpuplace predict on {spec.name} ({props.name}), llama-3.1-8b, {prompt}/{output} tokens", "",
         "vLLM's serving model for this GPU (GPU-class defaults). The closed loop beside it measured "
         "`transformers serve` on the same GPU: a different engine, so the two are shown, not scored.", "",
         "| load | p50/p99 TTFT ms | p50/p99 TPOT ms | p50 ITL ms | req/s | output tok/s |", "|---|---|---|---|---|---|"]
for name, r in rows.items():
    lines.append(f"| {name} | {ms(r, 'ttft_p50_s')}/{ms(r, 'ttft_p99_s')} | {ms(r, 'tpot_p50_s')}/{ms(r, 'tpot_p99_s')} "
                 f"| {ms(r, 'itl_p50_s')} | {r['requests_per_s']:.2f} | {r['output_tokens_per_s']:.0f} |")
lines += ["", "## The closed loop measured beside it", "", loop.read_text() if loop.is_file() else "(not run)"]
Path(dest, "predict.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
exit "$failed"
