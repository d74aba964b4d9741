"""Time vLLM's own V1 engine-core CPU work per decode step, batch by batch, on this machine's CPU.

Run with the vLLM referee's python (``bash tests/referee/vllm_venv.sh`` prints it); imports only the
standard library, vllm and the scheduler driver beside it (never gpuplace). Reads one JSON object on
stdin and writes one on stdout:

* in: ``{"model_dir", "batches": [n, ...], "rounds": R, "steps": S, "warmup": W, "prompt_tokens": P,
  "block_size", "num_gpu_blocks", "max_model_len", "max_num_batched_tokens", "max_num_seqs"}``;
* out: ``{"vllm_version", "import_s", "pace_s": [per round], "rows": [{"round", "batch", "schedule_s",
  "update_s", "encode_s", "decode_s", "steps", "decodes"}]}`` (medians over the round's timed steps).

What is timed, per decode-only step of ``batch`` running requests (each built as the scheduler driver
builds one, with an output long enough that none finishes, after vLLM's ``freeze_gc_heap()`` as the
engine core calls it once built): ``Scheduler.schedule()``,
``Scheduler.update_from_output()`` with a ``ModelRunnerOutput`` sampling one token for each, and the
engine core's hand-over of the step's ``EngineCoreOutputs`` to the front end through vLLM's own
``MsgpackEncoder`` / ``MsgpackDecoder`` (what crosses the ZMQ socket between the two processes). Not
timed (they need the GPU or a real tokenizer): the model runner's input preparation, the sampler, the
front end's detokenising and the API server's streaming. The batches are interleaved within a round
(a shuffled order per round), so the machine's pace moving between rounds moves every batch alike;
each round also times a fixed pure-Python loop (``pace_s``) so a reader can scale the figures to
another CPU.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import vllm_scheduler_driver as driver

SAMPLED_TOKEN = driver.SAMPLED_TOKEN


def _pace() -> float:
    """Seconds of a fixed pure-Python loop (the fidelity benchmark's pace probe), best of five."""
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        s = 0
        for i in range(30000):
            s += i * i
        best = min(best, time.perf_counter() - t0)
    return best


def _engine(job: dict[str, Any]) -> dict[str, Any]:
    keys = ("max_num_batched_tokens", "max_num_seqs", "block_size", "num_gpu_blocks", "max_model_len")
    return {"engine": {k: job[k] for k in keys}, "async_scheduling": False}


def time_batch(job: dict[str, Any], batch: int) -> dict[str, Any]:
    """Median CPU seconds of each part of a decode step at ``batch`` running requests."""
    from vllm.utils.gc_utils import freeze_gc_heap
    from vllm.v1.engine import EngineCoreOutputs
    from vllm.v1.outputs import ModelRunnerOutput
    from vllm.v1.serial_utils import MsgpackDecoder, MsgpackEncoder

    sched = driver._scheduler(job["model_dir"], _engine(job))
    freeze_gc_heap()  # as EngineCore.__init__ does once it is built: the startup heap is left out of GC
    output_tokens = job["max_model_len"] - job["prompt_tokens"] - 1
    for i in range(batch):
        sched.add_request(driver._request(i, job["prompt_tokens"], output_tokens, job["block_size"], False))
    encoder, decoder = MsgpackEncoder(), MsgpackDecoder(EngineCoreOutputs)
    parts: dict[str, list[float]] = {"schedule_s": [], "update_s": [], "encode_s": [], "decode_s": []}
    decodes: list[int] = []
    step, timed = 0, 0
    while timed < job["steps"]:
        t0 = time.perf_counter()
        out = sched.schedule()
        t1 = time.perf_counter()
        ids = list(out.num_scheduled_tokens)
        computed = {rid: sched.requests[rid].num_computed_tokens for rid in ids}
        sampled = [[SAMPLED_TOKEN] if computed[r] >= sched.requests[r].num_tokens else [] for r in ids]
        runner_out = ModelRunnerOutput(req_ids=ids, sampled_token_ids=sampled)
        t2 = time.perf_counter()
        outputs = sched.update_from_output(out, runner_out)
        t3 = time.perf_counter()
        frames = [encoder.encode(o) for o in outputs.values()]
        t4 = time.perf_counter()
        for f in frames:
            decoder.decode(f)
        t5 = time.perf_counter()
        step += 1
        # a decode-only step: every running request scheduled for one token (the prompts' chunks are done)
        if out.total_num_scheduled_tokens == batch == len(ids) and step > job["warmup"]:
            timed += 1
            parts["schedule_s"].append(t1 - t0)
            parts["update_s"].append(t3 - t2)
            parts["encode_s"].append(t4 - t3)
            parts["decode_s"].append(t5 - t4)
            decodes.append(sum(len(s) for s in sampled))
        prefill_steps = 4 * batch * job["prompt_tokens"] // job["max_num_batched_tokens"]
        if step > job["steps"] + job["warmup"] + prefill_steps:
            raise RuntimeError(f"batch {batch}: {timed} decode-only steps in {step}: it never decodes alone")
    return {k: statistics.median(v) for k, v in parts.items()} | {
        "steps": timed,
        "decodes": statistics.median(decodes),
    }


def main() -> None:
    job = json.load(sys.stdin)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    t0 = time.perf_counter()
    import vllm

    driver._pin_cpu_platform()
    import_s = time.perf_counter() - t0
    rows, pace = [], []
    rng = random.Random(0)
    for r in range(job["rounds"]):
        order = list(job["batches"])
        rng.shuffle(order)
        pace.append(_pace())
        for batch in order:
            rows.append({"round": r, "batch": batch} | time_batch(job, batch))
            print(f"vllm_cpu_driver: round {r} batch {batch}", file=sys.stderr)
    json.dump(
        {"vllm_version": vllm.__version__, "import_s": import_s, "pace_s": pace, "rows": rows}, sys.stdout
    )


if __name__ == "__main__":
    main()
