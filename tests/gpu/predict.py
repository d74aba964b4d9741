"""tests/gpu/run.sh's last step: ``gpuplace predict`` for this GPU (its catalog name matched from the device,
or PREDICT_GPU), with and without the operator table the run measured, at the closed loop's traffic and at
a closed loop of 8 users, into predict.md.

It predicts vLLM; the closed loop measured ``transformers serve`` on the same GPU, so predict.md shows the
loop's figures beside it and scores neither against the other. Without a catalog GPU (DEVICE=cpu) it
predicts PREDICT_GPU (default H200-SXM-141GB) on the class defaults and records that the CPU's table is
refused for it (a CPU never calibrates a GPU): ``python3 tests/gpu/predict.py DEST MODEL DEVICE``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def catalog_gpu(device: str) -> str:
    if os.environ.get("PREDICT_GPU"):
        return os.environ["PREDICT_GPU"]
    if device == "cpu":
        return "H200-SXM-141GB"
    import torch

    from gpuplace.catalog import load_gpu_catalog

    props = torch.cuda.get_device_properties(0)
    spec = load_gpu_catalog().match_device(props.name, props.total_memory / 2**30)
    if spec is None:
        sys.exit(f"{props.name} is not in the GPU catalog: no prediction")
    return spec.name


def ms(r: dict, key: str) -> str:
    return "-" if r.get(key) is None else f"{r[key] * 1e3:.2f}"


def main() -> int:
    dest, model, device = sys.argv[1:4]
    gpu = catalog_gpu(device)
    table = Path(dest, "operators.json")
    rate, prompt, output = (
        os.environ.get(k, d) for k, d in (("LOOP_RATES", "2"), ("LOOP_PROMPT", "512"), ("LOOP_OUTPUT", "64"))
    )
    rate = rate.split()[0]
    base = [
        sys.executable,
        "-m",
        "gpuplace",
        "predict",
        "--model",
        model,
        "--gpu",
        gpu,
        "--prompt-tokens",
        prompt,
        "--output-tokens",
        output,
        "--requests",
        "500",
        "--json",
    ]
    rows, refused = [], ""
    for load_name, load in (
        ("rate " + rate, ["--rate", rate]),
        ("concurrency 8", ["--concurrency", "8"]),
        ("concurrency 64", ["--concurrency", "64"]),
    ):
        for source, extra in (("class defaults", []), ("operators", ["--operators", str(table)])):
            if extra and not table.is_file():
                continue
            done = subprocess.run(base + load + extra, capture_output=True, text=True)
            if done.returncode:
                refused = refused or done.stderr.strip().splitlines()[-1]
                continue
            r = json.loads(done.stdout)
            Path(dest, f"predict-{load_name.replace(' ', '-')}-{source.split()[0]}.json").write_text(
                done.stdout
            )
            rows.append((load_name, source, r))
    lines = [
        f"# gpuplace predict: {model} on {gpu}, {prompt}/{output} tokens",
        "",
        "vLLM's serving model for this GPU, on the GPU-class defaults and on the kernels this run measured "
        "(operators.json). The closed loop measured `transformers serve`: a different engine, shown, not "
        "scored.",
        "",
        "| load | step model | p50/p99 TTFT ms | p50/p99 TPOT ms | req/s | output tok/s |",
        "|---|---|---|---|---|---|",
    ]
    for load_name, source, r in rows:
        lines.append(
            f"| {load_name} | {source} | {ms(r, 'ttft_p50_s')}/{ms(r, 'ttft_p99_s')} | "
            f"{ms(r, 'tpot_p50_s')}/{ms(r, 'tpot_p99_s')} | {r['requests_per_s']:.2f} | "
            f"{r['output_tokens_per_s']:.0f} |"
        )
    if refused:
        lines += ["", f"With the operator table: {refused}"]
    print("\n".join(lines))
    Path(dest, "predict.md").write_text("\n".join(lines) + "\n")
    # the class defaults must have predicted every load; on a GPU the measured table must have too
    want = 3 if device == "cpu" else 6
    return 0 if len(rows) == want else 1


if __name__ == "__main__":
    sys.exit(main())
