"""vLLM's V1 scheduler as a referee for gpuplace's serving simulation: the streams, the run, the comparison.

The same request streams go through gpuplace's simulation (``simulate(..., trace=True)``) and through
vLLM 0.34's own ``Scheduler`` (``tests/referee/vllm_scheduler_driver.py``, run with the referee venv's
python, never imported here), both with the same step clock (``fixed_s + per_token_s × tokens``), and
their schedules are compared step by step: the requests scheduled, the prefill chunks (request,
tokens), the decodes and the preemptions. Used by ``tests/referee/test_vllm_scheduler.py`` and
``tests/benchmarks/bench_vllm_scheduler.py``.
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpuplace.planner.engine_sim import simulate
from gpuplace.planner.steptime import StepTimeModel
from gpuplace.types.engine import EngineParams
from gpuplace.workload import RequestSpec

REPO = Path(__file__).resolve().parents[2]
DRIVER = REPO / "tests" / "referee" / "vllm_scheduler_driver.py"
VENV_SCRIPT = REPO / "tests" / "referee" / "vllm_venv.sh"
MODEL_PRESET = "tiny"  # the scheduler reads only the model's config (max length, no tokenizer)


@dataclass(frozen=True)
class Stream:
    """One request stream on one engine: what both schedulers are given."""

    name: str
    what: str  # for the report
    engine: EngineParams
    requests: tuple[RequestSpec, ...]  # in arrival order, index = position
    fixed_s: float = 0.005
    per_token_s: float = 2e-5
    prefix_caching: bool = False  # vLLM's own prefix cache (gpuplace models none)
    concurrency: int | None = None  # closed loop: arrivals ignored, each completion starts the next
    async_scheduling: bool = False  # vLLM's AsyncScheduler behind a batch queue of two (GPU default)

    def job(self) -> dict[str, Any]:
        e = self.engine
        return {
            "name": self.name,
            "engine": {
                "max_num_batched_tokens": e.max_num_batched_tokens,
                "max_num_seqs": e.max_num_seqs,
                "block_size": e.block_size,
                "num_gpu_blocks": e.num_gpu_blocks,
                "max_model_len": e.max_model_len,
            },
            "step": {"fixed_s": self.fixed_s, "per_token_s": self.per_token_s},
            "prefix_caching": self.prefix_caching,
            "concurrency": self.concurrency,
            "async_scheduling": self.async_scheduling,
            "requests": [
                [0.0 if self.concurrency else r.arrival_s, r.prompt_tokens, r.output_tokens]
                for r in self.requests
            ],
        }


def _engine(budget: int, seqs: int, blocks: int, block_size: int = 16, max_len: int = 2048) -> EngineParams:
    return EngineParams(
        max_num_batched_tokens=budget,
        max_num_seqs=seqs,
        block_size=block_size,
        gpu_memory_utilization=0.9,
        max_model_len=max_len,
        enable_chunked_prefill=True,
        num_gpu_blocks=blocks,
    )


def _poisson(
    seed: int, n: int, rate: float, prompt: tuple[int, int], out: tuple[int, int]
) -> tuple[RequestSpec, ...]:
    rng = random.Random(seed)
    t, reqs = 0.0, []
    for i in range(n):
        t += rng.expovariate(rate)
        reqs.append(RequestSpec(i, round(t, 6), rng.randint(*prompt), rng.randint(*out)))
    return tuple(reqs)


def streams() -> list[Stream]:
    """The referee's streams: light load, a token-budget-bound burst, a KV cache that preempts, ..."""
    issue = tuple(RequestSpec(i, 0.0, 301, 5) for i in range(6))
    preempt = _poisson(3, 24, 400.0, (64, 256), (128, 384))
    burst = _poisson(2, 32, 500.0, (200, 1200), (16, 64))
    sustained = _poisson(5, 200, 60.0, (64, 512), (16, 128))
    closed = tuple(
        RequestSpec(r.index, math.nan, r.prompt_tokens, r.output_tokens)
        for r in _poisson(6, 80, 1.0, (64, 512), (16, 128))
    )
    like_for_like = [
        Stream("issue-21", "six 301-token prompts at once, budget 256, 64 blocks (the issue's hand run)",
               _engine(256, 16, 64, max_len=1024), issue),
        Stream("light", "Poisson 4/s, prompts 32-256, outputs 8-64: one running in 65% of steps, 5 at most",
               _engine(2048, 256, 4096), _poisson(1, 40, 4.0, (32, 256), (8, 64))),
        Stream("budget-burst", "32 requests in ~60 ms, prompts 200-1200, a 512-token budget: chunked prefill",
               _engine(512, 64, 8192), burst),
        Stream("kv-preempt", "24 requests in ~60 ms, outputs 128-384, a 256-block cache: decodes preempt",
               _engine(1024, 32, 256), preempt),
        Stream("seqs-bound", "48 short requests at once, max_num_seqs 8: admission waits for a free slot",
               _engine(2048, 8, 4096), _poisson(4, 48, 2000.0, (16, 96), (4, 48))),
        Stream("sustained", "Poisson 60 req/s for 200 requests, prompts 64-512, outputs 16-128, 512 blocks",
               _engine(1024, 64, 512), sustained),
        Stream("closed-loop", "12 users, each sending the next request when the last ends; 80 requests",
               _engine(512, 32, 300), closed, concurrency=12),
    ]  # fmt: skip
    prefix = Stream("kv-preempt+prefix-cache", "kv-preempt with vLLM's default prefix caching on",
                    _engine(1024, 32, 256), preempt, prefix_caching=True)  # fmt: skip
    asynchronous = [
        replace(s, name=f"{s.name}+async", what=f"{s.name}, vLLM's asynchronous scheduling (its GPU default)",
                async_scheduling=True)
        for s in like_for_like
        if s.concurrency is None and s.name != "issue-21"
    ]  # fmt: skip
    return [*like_for_like, prefix, *asynchronous]


def simulated_steps(stream: Stream, simulation: Any = simulate) -> list[dict[str, Any]]:
    """gpuplace's schedule of ``stream``, step by step, in the driver's form (``simulation``: another
    version of ``simulate``, for a benchmark's before and after); an async stream is simulated with
    asynchronous scheduling."""
    model = StepTimeModel(fixed_s=stream.fixed_s, per_token_s=stream.per_token_s)
    engine = replace(stream.engine, async_scheduling=stream.async_scheduling)
    result = simulation(
        stream.requests, engine, model, discard_head=0, discard_tail=0,
        abort_backlog=len(stream.requests), trace=True, concurrency=stream.concurrency,
    )  # fmt: skip
    return [
        {
            "start_s": s.start_s,
            "decodes": sorted(s.decodes),
            "prefills": sorted([i, k] for i, k in s.prefills),
            "preempted": sorted(s.preempted),
        }
        for s in result.trace
    ]


def vllm_python() -> Path:
    """The referee venv's python (created on first use by ``tests/referee/vllm_venv.sh``)."""
    out = subprocess.run(["bash", str(VENV_SCRIPT)], capture_output=True, text=True)
    if out.returncode != 0 or not out.stdout.strip():
        raise RuntimeError(
            f"{VENV_SCRIPT.relative_to(REPO)} could not create vLLM's venv (rc {out.returncode}); it needs "
            f"PyPI and about 10 GB of disk:\n{out.stderr[-3000:]}"
        )
    return Path(out.stdout.strip().splitlines()[-1])


def write_model_dir(path: Path) -> Path:
    """A model directory vLLM's ``ModelConfig`` accepts: the preset's ``config.json`` alone."""
    from gpuplace.catalog.models import hf_config, resolve_model

    hf_config(resolve_model(MODEL_PRESET)).save_pretrained(path)  # type: ignore[no-untyped-call]
    return path


def ask_vllm(chosen: list[Stream], model_dir: Path, python: Path | None = None) -> dict[str, Any]:
    """vLLM's schedules of ``chosen`` (``{"vllm_version", "streams": [...]}``, see the driver)."""
    job = {"model_dir": str(model_dir), "streams": [s.job() for s in chosen]}
    proc = subprocess.run(
        [str(python or vllm_python()), str(DRIVER)], input=json.dumps(job), capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise RuntimeError(f"vllm_scheduler_driver failed (rc {proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout)


@dataclass
class Agreement:
    """How one stream's two schedules compare, step by step over the steps both ran."""

    name: str
    steps_gpuplace: int
    steps_vllm: int
    compared: int = 0
    same_step: int = 0  # identical in every field below
    same_scheduled: int = 0  # the same requests scheduled
    same_prefills: int = 0  # the same (request, tokens) chunks
    same_decodes: int = 0
    same_preempted: int = 0
    totals: dict[str, dict[str, int]] = field(default_factory=dict)  # side → tokens, decodes, preemptions
    latency: dict[str, dict[str, float]] = field(default_factory=dict)  # side → p50/p99 TTFT, TPOT
    first_difference: dict[str, Any] | None = None  # step, and both sides' schedules there
    error: str | None = None

    @property
    def identical(self) -> bool:
        return self.error is None and self.steps_gpuplace == self.steps_vllm == self.same_step

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "steps_gpuplace": self.steps_gpuplace, "steps_vllm": self.steps_vllm,
            "compared": self.compared, "same_step": self.same_step, "same_scheduled": self.same_scheduled,
            "same_prefills": self.same_prefills, "same_decodes": self.same_decodes,
            "same_preempted": self.same_preempted, "totals": self.totals,
            "first_difference": self.first_difference, "error": self.error, "identical": self.identical,
            "latency": self.latency,
        }  # fmt: skip


def latencies(stream: Stream, steps: list[dict[str, Any]]) -> dict[str, float]:
    """p50/p99 TTFT and TPOT (seconds) that a schedule gives, read from its steps the same way for
    either side: a request's first token comes at the end of the step that completes its prompt, its
    last at the end of the last step it is in (open loop only: a closed loop's arrivals are not kept)."""
    if stream.concurrency:
        return {}
    prompt = {r.index: r.prompt_tokens for r in stream.requests}
    done: dict[int, int] = {}
    first: dict[int, float] = {}
    last: dict[int, float] = {}
    for s in steps:
        tokens = sum(k for _, k in s["prefills"]) + len(s["decodes"])
        end = s["start_s"] + stream.fixed_s + tokens * stream.per_token_s
        for i, k in s["prefills"]:
            done[i] = done.get(i, 0) + k
            if done[i] >= prompt[i] and i not in first:
                first[i] = end
        for i in s["decodes"] + [i for i, _ in s["prefills"]]:
            last[i] = end
    ttft = [first[r.index] - r.arrival_s for r in stream.requests if r.index in first]
    tpot = [
        (last[r.index] - first[r.index]) / (r.output_tokens - 1)
        for r in stream.requests
        if r.output_tokens > 1 and r.index in first
    ]
    out: dict[str, float] = {}
    for name, values in (("ttft", ttft), ("tpot", tpot)):
        values.sort()
        for q in (50, 99):
            out[f"{name}_p{q}_s"] = (
                values[min(len(values) - 1, int(q / 100 * len(values)))] if values else math.nan
            )
    return out


def _totals(steps: list[dict[str, Any]]) -> dict[str, int]:
    return {
        "prefill_tokens": sum(k for s in steps for _, k in s["prefills"]),
        "decodes": sum(len(s["decodes"]) for s in steps),
        "preemptions": sum(len(s["preempted"]) for s in steps),
    }


def compare(
    name: str, ours: list[dict[str, Any]], theirs: list[dict[str, Any]], error: str | None = None
) -> Agreement:
    """Step k of one against step k of the other, for every k both ran."""
    agreement = Agreement(name, len(ours), len(theirs), error=error)
    agreement.totals = {"gpuplace": _totals(ours), "vllm": _totals(theirs)}
    for k, (a, b) in enumerate(zip(ours, theirs, strict=False)):
        scheduled = sorted(a["decodes"] + [i for i, _ in a["prefills"]]) == sorted(
            b["decodes"] + [i for i, _ in b["prefills"]]
        )
        fields = {f: a[f] == b[f] for f in ("prefills", "decodes", "preempted")}
        agreement.compared += 1
        agreement.same_scheduled += scheduled
        agreement.same_prefills += fields["prefills"]
        agreement.same_decodes += fields["decodes"]
        agreement.same_preempted += fields["preempted"]
        if scheduled and all(fields.values()):
            agreement.same_step += 1
        elif agreement.first_difference is None:
            agreement.first_difference = {"step": k, "gpuplace": a, "vllm": b}
    if agreement.first_difference is None and len(ours) != len(theirs):
        k = agreement.compared
        agreement.first_difference = {
            "step": k,
            "gpuplace": ours[k] if k < len(ours) else None,
            "vllm": theirs[k] if k < len(theirs) else None,
        }
    return agreement


@dataclass(frozen=True)
class RefereeRun:
    """One run of the driver over some streams, compared with the simulation."""

    vllm_version: str
    import_s: float  # importing vllm and pinning its platform
    wall_s: float  # the driver process, start to end
    agreements: tuple[Agreement, ...]
    stream_wall_s: dict[str, float]
    vllm_steps: dict[str, list[dict[str, Any]]]  # what vLLM scheduled, per stream
    settings: dict[
        str, dict[str, str]
    ]  # "driven" and "serve_defaults": scheduler settings gpuplace never sets


def referee(chosen: list[Stream], model_dir: Path, python: Path | None = None) -> RefereeRun:
    """vLLM's schedules of ``chosen`` against gpuplace's, stream by stream."""
    t0 = time.perf_counter()
    answer = ask_vllm(chosen, model_dir, python)
    wall = time.perf_counter() - t0
    found = {s["name"]: s for s in answer["streams"]}
    agreements = []
    for stream in chosen:
        theirs = found[stream.name]
        ours = simulated_steps(stream)
        agreement = compare(stream.name, ours, theirs["steps"], theirs.get("error"))
        agreement.latency = {"gpuplace": latencies(stream, ours), "vllm": latencies(stream, theirs["steps"])}
        agreements.append(agreement)
    walls = {name: float(s.get("wall_s", math.nan)) for name, s in found.items()}
    steps = {name: s["steps"] for name, s in found.items()}
    import_s = float(answer.get("import_s", math.nan))
    return RefereeRun(
        answer["vllm_version"], import_s, wall, tuple(agreements), walls, steps, answer.get("settings", {})
    )
