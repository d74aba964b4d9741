"""The serving engine's step time against the tokens in a step, measured on a live engine.

The serving model needs a step-time model of the engine as it runs on this device. On a GPU the
roofline gives most of it; on a CPU the engine's own per-step work (scheduling, building the batch,
sampling, streaming the outputs, the Python around it) dominates: ``transformers serve
--continuous-batching`` with the ``tiny`` preset takes tens of milliseconds per step where the model
needs a fraction of one. So it is measured, through the same HTTP server the load test drives:

* **decode steps**: ``n`` requests sent together with the same lengths; while all ``n`` are decoding
  every step adds one token to each, so each stream's token rate in that window is the step time of
  ``n`` decodes at their context (n = 1, 2, 4, ...); some ``n`` again with long prompts, so that the
  cost per context token is measured, not confounded with ``n`` (on this machine's ``transformers
  serve`` it is about 1.5 µs per cached token per step with ``tiny``: 16 decodes of 128-token prompts
  step 20–30% slower than of 16-token ones);
* **prefill**: one request alone with a ``c``-token prompt; its TTFT is the prefill step of ``c``
  tokens plus the request's own overhead, and its next tokens are decode steps at context ``c``;
* **interference**: one stream decoding while short requests arrive every few of its steps. A server
  that handles requests in its step loop's process (``transformers serve``: HTTP, tokenising and
  admission run under the interpreter lock the step loop needs) makes the running requests wait for
  each arriving one, which neither bursts nor lone requests show. ``request_work_s`` is what an
  arrival adds to the stream's gap over its quiet gaps in the same run (so a drift of the machine's
  pace between runs does not enter it); the gaps are kept in the profile
  (:class:`~gpuplace.types.engine.InterferenceRun`);
* **wake**: lone requests of the shortest prefill prompt sent after the engine had been idle 10, 30,
  100 or 300 ms. The lone prefills above are sent right after another request; one that finds the
  engine idle for a while waits longer for its first token (threads blocked on an event and a CPU
  that went idle wake: here about 3 ms after 100 ms of idle). ``wake`` is, per idle level, the median
  TTFT minus the median TTFT without idle time (:class:`~gpuplace.types.engine.WakeRun`,
  :func:`wake_curve`).

A linear model is fitted to the medians, with non-negative coefficients and relative residuals:
``step = fixed + per_token·tokens + per_seq·seqs + per_context·context + per_pair·pairs`` and TTFT =
step + ``request_overhead`` (:class:`~gpuplace.types.engine.EngineStepProfile`). Decode steps have
tokens = seqs, so the prefill samples separate the per-token from the per-sequence cost.

:func:`write_engine_steps` and :func:`read_engine_steps` are the one writer and reader of the measured
profile's file (``gpuplace profile --engine-steps --out steps.json``, the ``profile_latency``
component's ``engine_steps`` output), which ``gpuplace plan --inventory local`` plans with.

Needs the serving extra (aiohttp) only when measuring; importing this module needs numpy alone.
"""

from __future__ import annotations

import itertools
import math
import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gpuplace.errors import InvalidInput
from gpuplace.profiling.jsonfile import read_tagged_json, write_tagged_json
from gpuplace.types.engine import EngineStepProfile, EngineStepSample, InterferenceRun, WakeRun
from gpuplace.units import to_ms

COEFFICIENTS: tuple[str, ...] = (
    "fixed_s",
    "per_token_s",
    "per_seq_s",
    "per_context_token_s",
    "per_pair_s",
    "request_overhead_s",
)
_MIN_WINDOW_TOKENS = 4
_Series = dict[int, tuple[list[float], list[float]]]  # per batch size or prompt length: two lists measured


@dataclass(frozen=True, slots=True)
class EngineStepConfig:
    """What to measure: decode batch sizes, prefill prompt lengths, repeats."""

    decode_batches: tuple[int, ...] = (1, 2, 4, 8, 16)
    decode_prompt_tokens: int = 16
    decode_output_tokens: int = 48
    # the same decodes at a long context, so that the context term is not confounded with n
    context_batches: tuple[int, ...] = (8, 16)
    context_prompt_tokens: int = 384
    # long contexts at many sequences, where a linear fit of the shorter ones broke on an H200 (16 decodes
    # at 6,528 cached tokens took 59 ms against the fit's 17: ../shared/data/gpu-h200-2026-12-04)
    # (kept below the engine's 8,192 tokens a step, so the burst's prompts fit the steps it is sent in)
    long_batches: tuple[int, ...] = (4, 10)
    long_prompt_tokens: int = 768
    # staggered decodes: n streams, each sent ``staggered_every_steps`` decode steps after the last, so
    # that they decode at different phases, as under a stream of arrivals (measured apart from the fit;
    # on an H200 a lone stream's 10 ms gaps became 50-80 ms while others arrived and ran)
    staggered_batches: tuple[int, ...] = (4, 8)
    staggered_prompt_tokens: int = 512
    staggered_every_steps: float = 6.0
    # a request unanswered this long fails (its sample is left out with a note) rather than hang the run
    request_timeout_s: float = 120.0
    prefill_tokens: tuple[int, ...] = (16, 64, 256, 512)
    prefill_output_tokens: int = 6
    repeats: int = 5
    # interference: the stream's length, and short requests sent every few of its (1-decode) steps
    interference_output_tokens: int = 112
    injected: int = 12
    injected_every_steps: float = 8.0
    injected_prompt_tokens: int = 16
    injected_output_tokens: int = 2
    # wake: lone requests of the shortest prefill prompt sent after the engine was idle this long
    # (each level ``wake_requests`` times, the levels interleaved; 0 requests: no wake runs)
    wake_idle_s: tuple[float, ...] = (0.01, 0.03, 0.1, 0.3)
    wake_requests: int = 3

    def __post_init__(self) -> None:
        optional = ("context_batches", "long_batches", "staggered_batches")
        for name in ("decode_batches", "prefill_tokens", *optional):
            values = getattr(self, name)
            bad = any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values)
            if bad or (not values and name not in optional):
                raise InvalidInput(name, values, "must be positive integers", "e.g. (1, 2, 4, 8)")
        if self.decode_output_tokens < 2 * _MIN_WINDOW_TOKENS:
            raise InvalidInput(
                "decode_output_tokens", self.decode_output_tokens, f"must be ≥ {2 * _MIN_WINDOW_TOKENS}", ""
            )
        if self.prefill_output_tokens < 2:
            raise InvalidInput("prefill_output_tokens", self.prefill_output_tokens, "must be ≥ 2", "")
        if self.injected < 0 or not self.injected_every_steps > 0:
            raise InvalidInput(
                "injected/injected_every_steps",
                (self.injected, self.injected_every_steps),
                "need a count ≥ 0 and a positive spacing",
                "e.g. 12 requests every 8 steps (0 requests: no interference runs)",
            )
        idle = self.wake_idle_s
        bad_idle = any(isinstance(v, bool) or not (isinstance(v, float | int) and v > 0) for v in idle)
        if self.wake_requests < 0 or bad_idle:
            raise InvalidInput(
                "wake_idle_s/wake_requests",
                (self.wake_idle_s, self.wake_requests),
                "need positive idle times and a count ≥ 0",
                "e.g. idle times (0.01, 0.03, 0.1, 0.3) s, 3 requests each (0 requests: no wake runs)",
            )
        if self.repeats < 1:
            raise InvalidInput("repeats", self.repeats, "must be at least 1", "")
        if not self.staggered_every_steps > 0:
            raise InvalidInput(
                "staggered_every_steps", self.staggered_every_steps, "must be positive", "e.g. 6"
            )


def fit_step_profile(samples: Sequence[EngineStepSample]) -> tuple[dict[str, float], float]:
    """Non-negative least squares of the linear step model on relative residuals.

    Returns the coefficients by name and the RMS relative error of the fit. A coefficient the data
    would make negative is held at 0 and the rest refitted (an active-set NNLS, enough for six terms).
    """
    samples = [s for s in samples if not s.staggered]  # priced apart, as measured excess
    rows = [
        (
            1.0,
            float(s.decode_seqs + s.prefill_tokens),
            float(s.decode_seqs + s.prefill_seqs),
            float(s.context_tokens),
            float(s.prefill_pairs),
            1.0 if s.first_token else 0.0,
        )
        for s in samples
    ]
    y = np.array([s.step_s for s in samples], dtype=float)
    if len(rows) < len(COEFFICIENTS) or not np.all(np.isfinite(y)) or np.any(y <= 0):
        raise InvalidInput(
            "samples",
            len(rows),
            f"need at least {len(COEFFICIENTS)} finite positive step times to fit",
            "Measure more decode batch sizes and prefill lengths",
        )
    x = np.array(rows) / y[:, None]  # relative residuals: every sample counts alike
    target = np.ones_like(y)
    active = list(range(len(COEFFICIENTS)))
    coef = np.zeros(len(COEFFICIENTS))
    while active:
        sol, *_ = np.linalg.lstsq(x[:, active], target, rcond=None)
        if np.all(sol >= 0):
            coef[:] = 0
            coef[active] = sol
            break
        del active[int(np.argmin(sol))]
    pred = np.array(rows) @ coef
    rms = float(np.sqrt(np.mean(((pred - y) / y) ** 2)))
    return dict(zip(COEFFICIENTS, (float(c) for c in coef), strict=True)), rms


def _window_step_times(records: Sequence[Any]) -> list[tuple[float, float]]:
    """Per stream, (seconds per token, mean tokens generated) while every stream was decoding."""
    ok = [r for r in records if r.success and len(r.chunk_times_s) >= 2]
    if len(ok) < len(records):
        return []
    absolute = [[r.start_s + t for t in r.chunk_times_s] for r in ok]
    lo = max(t[0] for t in absolute)  # the last stream's first token
    hi = min(t[-1] for t in absolute)  # the first stream's last token
    out = []
    for times in absolute:
        inside = [i for i, t in enumerate(times) if lo <= t <= hi]
        if len(inside) < _MIN_WINDOW_TOKENS:
            continue
        i0, i1 = inside[0], inside[-1]
        out.append(((times[i1] - times[i0]) / (i1 - i0), (i0 + i1) / 2 + 1))
    return out


def measure_engine_steps(
    endpoint: str,
    served_model: str,
    tokenizer: Any,
    *,
    config: EngineStepConfig = EngineStepConfig(),
    engine: str,
    device_kind: str,
    device_name: str,
    model: str,
) -> EngineStepProfile:
    """Measure the engine behind ``endpoint`` (an OpenAI-compatible streaming server) and fit it."""
    from gpuplace.loadtest.client import EndpointState
    from gpuplace.loadtest.prompts import PromptBuilder

    builder = PromptBuilder(tokenizer, api="completions", seed=17)
    state = EndpointState(endpoint, served_model)
    notes: list[str] = []
    _warm_up(state, builder, config)
    # Each sample's repeats are spread over the whole measurement (the repeat loop is the outer one):
    # on a shared machine the engine's pace drifts over tens of seconds, and a median over repeats
    # taken back to back would describe one moment of it, not the pace the engine serves at.
    p, o = config.decode_prompt_tokens, config.decode_output_tokens
    decode: _Series = {n: ([], []) for n in config.decode_batches}
    long: _Series = {n: ([], []) for n in config.context_batches}
    p_long = config.context_prompt_tokens
    longer: _Series = {n: ([], []) for n in config.long_batches}
    p_longer = config.long_prompt_tokens
    staggered: _Series = {n: ([], []) for n in config.staggered_batches}
    prefill: _Series = {c: ([], []) for c in config.prefill_tokens}
    interference: list[InterferenceRun] = []
    wake_runs: list[WakeRun] = []
    for _ in range(config.repeats):
        for prompt, batches in ((p, decode), (p_long, long), (p_longer, longer)):
            for n, (times, generated) in batches.items():
                for step, made in _window_step_times(_burst(state, builder, config, n, prompt, o)):
                    times.append(step)
                    generated.append(made)
        single = decode[min(decode)][0] if decode else []
        for n, (times, generated) in staggered.items():
            if single:
                windows = _window_step_times(_staggered(state, builder, config, n, statistics.median(single)))
                times.extend(step for step, _ in windows)
                generated.extend(made for _, made in windows)
        if config.injected and single:
            measured = _interference(state, builder, config, statistics.median(single))
            if measured is None:
                notes.append("interference: a request failed; run not counted")
            else:
                interference.append(measured)
        wake_runs += _lone_prefills(state, builder, config, single, prefill, notes)
    works = [w for w in (r.work_s for r in interference) if math.isfinite(w)]
    work = max(0.0, statistics.median(works)) if works else 0.0
    if interference:
        notes.append(
            f"request_work_s {to_ms(work):.2f} ms: median over {len(works)} interference runs "
            f"({', '.join(f'{to_ms(w):.2f}' for w in works)} ms)"
        )
    runs = ((p, decode, False), (p_long, long, False), (p_longer, longer, False))
    samples = _step_samples(
        config, (*runs, (config.staggered_prompt_tokens, staggered, True)), prefill, notes
    )
    coef, rms = fit_step_profile(samples)
    return EngineStepProfile(
        engine=engine,
        device_kind=device_kind,
        device_name=device_name,
        model=model,
        samples=tuple(samples),
        rms_relative_error=rms,
        interference=tuple(interference),
        request_work_s=work,
        wake=wake_curve(wake_runs, len(config.wake_idle_s)),
        wake_runs=tuple(wake_runs),
        notes=(*state.notes, *notes),
        **coef,
    )


def _burst(state: Any, builder: Any, config: EngineStepConfig, n: int, prompt: int, output: int) -> list[Any]:
    """The records of ``n`` requests of ``prompt`` tokens, each to generate ``output``, sent together."""
    from gpuplace.loadtest.runner import RunOptions, run_load
    from gpuplace.workload import RequestSpec

    specs = [RequestSpec(i, math.nan, prompt, output) for i in range(n)]
    prompts = [builder.build(prompt) for _ in specs]
    options = RunOptions(concurrency=n, show_progress=False, request_timeout_s=config.request_timeout_s)
    return list(run_load(state, specs, prompts, options).records)


def _warm_up(state: Any, builder: Any, config: EngineStepConfig) -> None:
    """Send, untimed, a burst of every decode shape the measurement sends and its longest prefill."""
    # the engine builds its cache and compiles its paths on the first requests (one batch of each decode
    # size, and a prefill, so no shape is first seen while timed)
    _burst(state, builder, config, 1, 8, 4)
    for n in config.decode_batches:
        _burst(state, builder, config, n, 8, 4)
    for n in config.context_batches:
        _burst(state, builder, config, n, config.context_prompt_tokens, 4)
    for n in config.long_batches:
        _burst(state, builder, config, n, config.long_prompt_tokens, 4)
    _burst(state, builder, config, 1, max(config.prefill_tokens), 2)


def _lone_prefills(
    state: Any, builder: Any, config: EngineStepConfig, steps: list[float], prefill: _Series, notes: list[str]
) -> list[WakeRun]:
    """Lone requests of each prefill length, measured into ``prefill``; the wake runs, after the shortest."""
    wake_prompt = min(config.prefill_tokens)  # the wake runs' prompt: the shortest lone prefill
    wake_runs: list[WakeRun] = []
    for c in config.prefill_tokens:
        (record,) = _burst(state, builder, config, 1, c, config.prefill_output_tokens)
        if not record.success:
            notes.append(f"prefill c={c}: {record.error_kind}: {record.error}")
            continue
        prefill[c][0].append(record.ttft_s)
        prefill[c][1].extend(record.itl_s)
        if c == wake_prompt and config.wake_requests and steps:
            # the lone request just sent came right after the run's warm-up request: no idle time
            e2e = record.ttft_s + statistics.median(steps)  # ``steps``: the 1-decode step times so far
            wake_runs.append(_wake(state, builder, config, c, record.ttft_s, e2e))
    return wake_runs


def _step_samples(
    config: EngineStepConfig, decodes: Sequence[tuple[int, _Series, bool]], prefill: _Series, notes: list[str]
) -> list[EngineStepSample]:
    """The fit's samples: the medians of each decode batch at its prompt length and of each prefill."""
    samples: list[EngineStepSample] = []
    for prompt, batches, late in decodes:
        for n, (times, generated) in batches.items():
            if not times:
                notes.append(f"decode n={n} at {prompt} tokens: no window where all {n} streams decoded")
                continue
            context = n * (prompt + statistics.median(generated))
            step = statistics.median(times)
            samples.append(EngineStepSample(n, 0, 0, round(context), 0, step, staggered=late))
    for c, (ttfts, gaps) in prefill.items():
        if ttfts:
            pairs = c * (c + 1) // 2
            samples.append(EngineStepSample(0, c, 1, 0, pairs, statistics.median(ttfts), first_token=True))
        if gaps:
            context = c + (config.prefill_output_tokens + 1) // 2
            samples.append(EngineStepSample(1, 0, 0, context, 0, statistics.median(gaps)))
    return samples


def _interference(
    state: Any, builder: Any, config: EngineStepConfig, step_s: float
) -> InterferenceRun | None:
    """One stream (the decode prompt length) while ``config.injected`` short requests are sent every
    ``injected_every_steps`` of its 1-decode steps (``step_s``, just measured); None when a request
    failed."""
    from gpuplace.loadtest.runner import RunOptions, run_load
    from gpuplace.workload import RequestSpec

    every = config.injected_every_steps * step_s
    specs = [RequestSpec(0, 0.0, config.decode_prompt_tokens, config.interference_output_tokens)]
    specs += [
        RequestSpec(k + 1, (k + 1) * every, config.injected_prompt_tokens, config.injected_output_tokens)
        for k in range(config.injected)
    ]
    prompts = [builder.build(s.prompt_tokens) for s in specs]
    records = run_load(
        state, specs, prompts, RunOptions(show_progress=False, request_timeout_s=config.request_timeout_s)
    ).records
    if not all(r.success for r in records):
        return None
    return interference_gaps(records)


def _staggered(state: Any, builder: Any, config: EngineStepConfig, n: int, step_s: float) -> list[Any]:
    """``n`` streams of the staggered prompt, each sent ``staggered_every_steps`` 1-decode steps
    (``step_s``) after the last, long enough that all ``n`` decode together for at least 24 steps after
    the last one's first token; [] when a request failed."""
    from gpuplace.loadtest.runner import RunOptions, run_load
    from gpuplace.workload import RequestSpec

    every = config.staggered_every_steps * step_s
    output = math.ceil((n - 1) * config.staggered_every_steps) + 24 + 2 * _MIN_WINDOW_TOKENS
    specs = [RequestSpec(k, k * every, config.staggered_prompt_tokens, output) for k in range(n)]
    records = run_load(
        state,
        specs,
        [builder.build(s.prompt_tokens) for s in specs],
        RunOptions(show_progress=False, request_timeout_s=config.request_timeout_s),
    ).records
    return list(records) if all(r.success for r in records) else []


def _wake(
    state: Any, builder: Any, config: EngineStepConfig, prompt: int, hot_ttft_s: float, e2e_s: float
) -> WakeRun:
    """Lone ``prompt``-token requests, each sent ``wake_idle_s`` after the previous one should have
    finished (``e2e_s`` with a margin: a request sent while another is in flight is not counted), the
    idle levels interleaved; the first request only ends the run's warm-up."""
    from gpuplace.loadtest.runner import RunOptions, run_load
    from gpuplace.workload import RequestSpec

    levels = [idle for _ in range(config.wake_requests) for idle in config.wake_idle_s]
    specs, at = [RequestSpec(0, 0.0, prompt, 2)], 0.0
    for k, idle in enumerate(levels):
        at += 1.5 * e2e_s + 0.002 + idle
        specs.append(RequestSpec(k + 1, at, prompt, 2))
    records = run_load(
        state,
        specs,
        [builder.build(prompt) for _ in specs],
        RunOptions(show_progress=False, request_timeout_s=config.request_timeout_s),
    )
    idle_s, ttft_s = wake_points(records.records)
    return WakeRun(hot_ttft_s, idle_s, ttft_s)


def wake_points(records: Sequence[Any]) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per request sent while nothing was in flight, (how long nothing had been in flight, its TTFT), in
    the order sent; the first request (nothing before it to measure from) and failed ones are left out,
    as is a request sent before the one ahead of it had its last token."""
    done = sorted((r for r in records if r.success and r.chunk_times_s), key=lambda r: r.start_s)
    idle: list[float] = []
    ttft: list[float] = []
    last = -math.inf  # when everything sent so far had its last token
    for r in done:
        if math.isfinite(last) and r.start_s >= last:
            idle.append(r.start_s - last)
            ttft.append(r.ttft_s)
        last = max(last, r.start_s + r.chunk_times_s[-1])
    return tuple(idle), tuple(ttft)


def wake_curve(runs: Sequence[WakeRun], levels: int) -> tuple[tuple[float, float], ...]:
    """The (idle, extra TTFT) points the serving model interpolates: the requests of all runs sorted by
    idle time and cut into ``levels`` groups of equal size (the idle levels they were sent at); per
    group the median idle time and its median TTFT − the median TTFT without idle time (of all runs:
    one lone request per run is too few to subtract alone). Longer idle never wakes faster (a running
    maximum), and a wake is never negative; () without measurements."""
    pairs = sorted((i, t) for run in runs for i, t in zip(run.idle_s, run.ttft_s, strict=True))
    if not pairs or levels < 1:
        return ()
    hot = statistics.median(run.hot_ttft_s for run in runs)
    curve: list[tuple[float, float]] = []
    top = 0.0
    for group in np.array_split(np.array(pairs), min(levels, len(pairs))):
        top = max(top, float(np.median(group[:, 1])) - hot)
        curve.append((float(np.median(group[:, 0])), top))
    return tuple(curve)


def interference_gaps(records: Sequence[Any]) -> InterferenceRun:
    """Split the stream's (the record with index 0) inter-token gaps: those in which another request
    was sent while nothing else was in flight, and those with nothing else in flight at all.

    A request is in flight from when it was sent to its last token; a gap [a, b] holds an arrival when
    one was sent in (a, b] and its first token came after b (so the gap holds none of its steps). Other
    gaps that overlap another request are neither (they hold steps of two requests, which the step model
    already prices).
    """
    stream = next(r for r in records if r.index == 0)
    others = [
        (r.start_s, r.start_s + r.chunk_times_s[0], r.start_s + r.chunk_times_s[-1])
        for r in records
        if r.index != 0 and r.chunk_times_s
    ]
    times = [stream.start_s + t for t in stream.chunk_times_s]
    arrival: list[float] = []
    quiet: list[float] = []
    for a, b in itertools.pairwise(times):
        overlapping = [(s, f) for s, f, e in others if s <= b and e > a]
        if not overlapping:
            quiet.append(b - a)
        elif len(overlapping) == 1 and a < overlapping[0][0] and overlapping[0][1] > b:
            arrival.append(b - a)  # sent in this gap, its first token still to come
    return InterferenceRun(tuple(arrival), tuple(quiet))


ENGINE_STEPS_FORMAT = "gpuplace-engine-steps/1"


def write_engine_steps(profile: EngineStepProfile, path: str | os.PathLike[str]) -> Path:
    """Write a measured engine-step profile as JSON (atomically: a reader never sees half a file)."""
    return write_tagged_json(profile.to_json_dict(), ENGINE_STEPS_FORMAT, path)


def read_engine_steps(path: str | os.PathLike[str]) -> EngineStepProfile:
    """The profile :func:`write_engine_steps` wrote; a clear error for anything else."""
    return read_tagged_json(
        path,
        ENGINE_STEPS_FORMAT,
        EngineStepProfile.from_json_dict,
        field="engine_steps",
        what="measured engine steps",
        fix="Measure the local engine first: gpuplace profile --model MODEL --engine-steps --out steps.json",
    )
