"""Drive vLLM's own V1 ``Scheduler`` step by step over request streams, with a fake model output.

Run with the vLLM referee's python (``bash tests/referee/vllm_venv.sh`` prints it); imports only the
standard library and vllm (never gpuplace, which is not installed there). Reads one JSON object on
stdin and writes one on stdout:

* in: ``{"model_dir": path, "streams": [{"name", "engine": {max_num_batched_tokens, max_num_seqs,
  block_size, num_gpu_blocks, max_model_len}, "step": {fixed_s, per_token_s}, "prefix_caching": bool,
  "requests": [[arrival_s, prompt_tokens, output_tokens], ...]}]}`` (requests in arrival order);
* out: ``{"vllm_version", "streams": [{"name", "steps": [{"start_s", "decodes": [ids],
  "prefills": [[id, tokens], ...], "preempted": [ids]}], "error"}]}``.

How it is driven: vLLM's platform is pinned to ``CpuPlatform`` (device discovery fails without a GPU; its
config check is told Triton's CPU backend is there, which only its kernels need);
the scheduler is built from a ``VllmConfig`` over ``model_dir`` (``skip_tokenizer_init``: prompts are
token ids) and a ``KVCacheConfig`` of ``num_gpu_blocks`` blocks with one ``FullAttentionSpec`` group,
as vLLM's own scheduler tests build it; the synchronous ``Scheduler`` (not ``AsyncScheduler``) because
each step's output is handed back before the next is scheduled. A step is ``schedule()``, then
``update_from_output`` with a ``ModelRunnerOutput`` that samples one token for every request whose
scheduled tokens reach the end of what it had to compute. The clock: a step takes ``fixed_s +
per_token_s × scheduled tokens``; requests whose arrival is at or before the clock are added before
each ``schedule()``; an idle scheduler jumps to the next arrival (as gpuplace's simulation does, so
with equal schedules both clocks are equal). A request is a decode in a step when it had computed all
it had to (its prompt, or prompt + output on a recompute) before the step; otherwise the step's tokens
are a prefill chunk. Prompts are distinct random token ids, so no two requests share a prefix.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
import traceback
from collections import deque
from typing import Any

SAMPLED_TOKEN = 7  # what the fake model samples; ignore_eos keeps every request to its max_tokens
# Scheduler settings that change a schedule and that gpuplace never sets: the driven scheduler's values
# are reported beside ``vllm serve``'s (EngineArgs) defaults, so a test sees they are the same.
SETTINGS = {  # SchedulerConfig field: EngineArgs field
    "policy": "scheduling_policy",
    "long_prefill_token_threshold": "long_prefill_token_threshold",
    "max_num_scheduled_tokens": "max_num_scheduled_tokens",
    "max_num_active_seqs": "max_num_active_seqs",
    "scheduler_reserve_full_isl": "scheduler_reserve_full_isl",
    "watermark": "watermark",
    "prefill_schedule_interval": "prefill_schedule_interval",
}


def _pin_cpu_platform() -> None:
    import vllm.platforms
    from vllm.platforms.cpu import CpuPlatform

    vllm.platforms.current_platform = CpuPlatform()
    # vLLM 0.34's CpuPlatform.check_and_update_config refuses an x86 CPU without Triton's CPU backend, which
    # its CPU kernels need; the referee runs no kernel (only the scheduler), so it is told Triton is there
    import vllm.triton_utils

    vllm.triton_utils.HAS_TRITON = True


def _scheduler(model_dir: str, stream: dict[str, Any]) -> Any:
    import torch
    from vllm.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
    from vllm.v1.core.sched.async_scheduler import AsyncScheduler
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
    from vllm.v1.structured_output import StructuredOutputManager

    eng = stream["engine"]
    model_config = ModelConfig(
        model=model_dir,
        tokenizer=model_dir,
        skip_tokenizer_init=True,
        dtype="float16",
        seed=0,
        max_model_len=eng["max_model_len"],
    )
    scheduler_config = SchedulerConfig(
        max_num_seqs=eng["max_num_seqs"],
        max_num_batched_tokens=eng["max_num_batched_tokens"],
        max_model_len=eng["max_model_len"],
        enable_chunked_prefill=True,
        async_scheduling=bool(stream.get("async_scheduling", False)),
        is_encoder_decoder=False,
    )
    cache_config = CacheConfig(
        block_size=eng["block_size"],
        gpu_memory_utilization=0.9,
        cache_dtype="auto",
        enable_prefix_caching=bool(stream.get("prefix_caching", False)),
    )
    cache_config.num_gpu_blocks = eng["num_gpu_blocks"]
    vllm_config = VllmConfig(
        model_config=model_config, scheduler_config=scheduler_config, cache_config=cache_config
    )
    spec = FullAttentionSpec(block_size=eng["block_size"], num_kv_heads=1, head_size=1, dtype=torch.float32)
    kv_cache_config = KVCacheConfig(
        num_blocks=eng["num_gpu_blocks"],
        kv_cache_tensors=[],
        kv_cache_groups=[KVCacheGroupSpec(["layer.0"], spec)],
    )
    cls = AsyncScheduler if stream.get("async_scheduling") else Scheduler
    return cls(
        vllm_config=vllm_config,
        kv_cache_config=kv_cache_config,
        structured_output_manager=StructuredOutputManager(vllm_config),
        block_size=eng["block_size"],
        log_stats=False,
    )


def _request(index: int, prompt_tokens: int, output_tokens: int, block_size: int, caching: bool) -> Any:
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import sha256
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
    from vllm.v1.request import Request

    rng = random.Random(index)
    hasher = None
    if caching:
        init_none_hash(sha256)
        hasher = get_request_block_hasher(block_size, sha256)
    return Request(
        request_id=str(index),
        prompt_token_ids=[rng.randrange(3, 30000) for _ in range(prompt_tokens)],
        sampling_params=SamplingParams(max_tokens=output_tokens, ignore_eos=True),
        pooling_params=None,
        arrival_time=float(index),
        block_hasher=hasher,
    )


def _record(
    sched: Any, out: Any, before: dict[str, int], target: dict[str, int]
) -> tuple[dict[str, Any], set[str]]:
    """One scheduled step in the comparison's form, and the requests the fake model samples for."""
    cached = out.scheduled_cached_reqs
    # vLLM 0.34 re-sends a resumed request in full among the new ones (0.33 listed it in resumed_req_ids)
    resumed = getattr(cached, "resumed_req_ids", set())
    for rid in [r.req_id for r in out.scheduled_new_reqs] + [r for r in cached.req_ids if r in resumed]:
        target[rid] = sched.requests[rid].num_tokens  # admitted: its prompt (+ output, when resumed)
    decodes, prefills, sampled = [], [], set()
    for rid, tokens in out.num_scheduled_tokens.items():
        if before[rid] >= target[rid]:
            decodes.append(int(rid))
        else:
            prefills.append([int(rid), tokens])
        request = sched.requests[rid]  # schedule() advanced its computed tokens (prefix hits too)
        if request.num_computed_tokens >= request.num_tokens:
            sampled.add(rid)
    step = {
        "decodes": sorted(decodes),
        "prefills": sorted(prefills),
        "preempted": sorted(int(r) for r in out.preempted_req_ids or ()),
    }
    return step, sampled


def drive(model_dir: str, stream: dict[str, Any]) -> list[dict[str, Any]]:
    """The scheduler's steps over one stream (see the module docstring).

    ``concurrency`` (closed loop): that many requests start at 0 and each one that finishes starts the
    next, arrival times ignored. ``async_scheduling``: vLLM's ``AsyncScheduler`` behind the engine
    core's batch queue of two (``EngineCore.step_with_batch_queue``): step k+1 is scheduled while step
    k runs, before its output is known; a step starts when the one before it ends.
    """
    from vllm.v1.outputs import ModelRunnerOutput

    sched = _scheduler(model_dir, stream)
    fixed_s, per_token_s = stream["step"]["fixed_s"], stream["step"]["per_token_s"]
    bs = stream["engine"]["block_size"]
    caching = bool(stream.get("prefix_caching", False))
    depth = 2 if stream.get("async_scheduling") else 1
    concurrency = stream.get("concurrency")
    reqs = stream["requests"]
    n = len(reqs)
    target: dict[str, int] = {}  # tokens a request must compute before it decodes (set when admitted)
    steps: list[dict[str, Any]] = []
    queue: deque[tuple[Any, set[str], float]] = deque()  # scheduled, not yet returned: (output, sampled, end)
    now, busy_until, nxt, empty = 0.0, 0.0, 0, 0
    while True:
        released = min(n, concurrency + nxt - len(sched.requests)) if concurrency else n
        while nxt < released and (concurrency or reqs[nxt][0] <= now):
            _, prompt, out_tokens = reqs[nxt]
            sched.add_request(_request(nxt, prompt, out_tokens, bs, caching))
            nxt += 1
        if sched.has_unfinished_requests() and len(queue) < depth:
            before = {rid: r.num_computed_tokens for rid, r in sched.requests.items()}
            out = sched.schedule()
            tokens = out.total_num_scheduled_tokens
            if tokens > 0:
                step, sampled = _record(sched, out, before, target)
                start = max(now, busy_until)
                busy_until = start + fixed_s + tokens * per_token_s
                steps.append({"start_s": start} | step)
                queue.appendleft((out, sampled, busy_until))
                if len(queue) < depth:
                    continue  # the engine core fills its batch queue before it waits for an output
            elif not queue:
                empty += 1
                if empty > 1000:
                    raise RuntimeError("the scheduler schedules nothing with requests unfinished")
                queue.appendleft((out, set(), now))
        if queue:
            out, sampled, end = queue.pop()
            req_ids = list(out.num_scheduled_tokens)
            runner_out = ModelRunnerOutput(  # vLLM 0.34 indexes the output by req_ids' order
                req_ids=req_ids,
                sampled_token_ids=[[SAMPLED_TOKEN] if rid in sampled else [] for rid in req_ids],
            )
            sched.update_from_output(out, runner_out)
            now = max(now, end)
            if len(steps) > 200_000:
                raise RuntimeError("more than 200000 steps: the stream does not drain")
            continue
        if nxt >= n or concurrency:
            break
        now = max(now, reqs[nxt][0])  # idle until the next arrival
    return steps


def settings(model_dir: str, stream: dict[str, Any]) -> dict[str, Any]:
    """The driven scheduler's settings (:data:`SETTINGS`) and ``vllm serve``'s defaults of the same."""
    from vllm.engine.arg_utils import EngineArgs

    config = _scheduler(model_dir, stream).scheduler_config
    return {
        "driven": {f: str(getattr(config, f, None)) for f in SETTINGS},
        "serve_defaults": {f: str(getattr(EngineArgs, a, None)) for f, a in SETTINGS.items()},
    }


def main() -> None:
    job = json.load(sys.stdin)
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    t0 = time.perf_counter()
    import vllm

    _pin_cpu_platform()
    import_s = time.perf_counter() - t0
    answers = []
    for stream in job["streams"]:
        t1 = time.perf_counter()
        try:
            answers.append({"name": stream["name"], "steps": drive(job["model_dir"], stream), "error": None})
        except Exception as e:  # reported, so the other streams still answer
            answers.append({"name": stream["name"], "steps": [], "error": f"{e!r}\n{traceback.format_exc()}"})
        answers[-1]["wall_s"] = time.perf_counter() - t1
        print(f"vllm_scheduler_driver: {stream['name']}: {len(answers[-1]['steps'])} steps", file=sys.stderr)
    found = settings(job["model_dir"], job["streams"][0])
    json.dump(
        {"vllm_version": vllm.__version__, "import_s": import_s, "settings": found, "streams": answers},
        sys.stdout,
    )


if __name__ == "__main__":
    main()
