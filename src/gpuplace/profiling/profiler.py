"""The latency profiler: prefill and per-token decode latency of a model over a sweep.

Method (docs/profiling.md): for every sweep point (batch, prompt tokens, output tokens, dtype,
mode) run ``warmup`` untimed generations, then ``repeats`` timed ones. A generation is one prefill
forward over random prompt tokens that ends with choosing the first token (that interval is the
zero-load TTFT), then exactly ``output_tokens - 1`` decode steps, each a forward of one token per
sequence against the KV cache and the greedy choice of the next token. The loop never stops at EOS,
so the output length is forced (random weights emit EOS early). Time is read with the device clock
(:mod:`gpuplace.profiling.timing`); the torch profiler must be off. A point that runs out of memory,
or that would not fit the memory left, is recorded as failed and the sweep goes on.

Modes: ``eager`` (dynamic KV cache, as ``transformers`` runs by default) and ``static`` (static KV
cache and ``torch.compile`` of the decode step; ``mode="reduce-overhead"``, i.e. CUDA graphs, on a GPU).
"""

from __future__ import annotations

import datetime as dt
import math
import resource
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from itertools import product
from typing import Any

import torch

import gpuplace
from gpuplace.catalog import GpuCatalog, load_gpu_catalog
from gpuplace.catalog.models import ModelSource, model_arch_from_config, resolve_model
from gpuplace.errors import InvalidInput
from gpuplace.profiling import roofline
from gpuplace.profiling.breakdown import StepBreakdown, breakdown, trace_steps, write_breakdowns
from gpuplace.profiling.device import (
    check_dtype_runs,
    default_dtype,
    discover_device,
    dtype_name,
    resolve_device,
    torch_dtype,
)
from gpuplace.profiling.fractions import check_fractions, describe_point
from gpuplace.profiling.hardware import (
    measure_matmul_tflops,
    read_bandwidth,
)
from gpuplace.profiling.model import build_model, cache_kwarg, new_dynamic_cache, new_static_cache, num_params
from gpuplace.profiling.timing import Clock, clock_for, synchronize
from gpuplace.progress import Progress
from gpuplace.types import DeviceInfo, Distribution, LatencyProfile, ModelArch, PointResult, SweepPoint

MODES: tuple[str, ...] = ("eager", "static")


@dataclass(frozen=True, slots=True)
class ProfileConfig:
    """What to profile. Sequences are swept as a cartesian product."""

    model: str = "tiny"
    device: str = "auto"
    batch_sizes: tuple[int, ...] = (1, 4)  # the profile step's default (tests/unit/test_step_params.py)
    prompt_tokens: tuple[int, ...] = (128,)
    output_tokens: tuple[int, ...] = (32,)
    dtypes: tuple[str, ...] = ("auto",)
    modes: tuple[str, ...] = ("eager",)
    repeats: int = 5
    warmup: int = 2
    seed: int = 0
    random_weights: bool = True
    memory_limit_gib: float | None = None  # cap below the device's free memory; points above it fail
    breakdown_out: str | None = None  # trace the static points' decode steps into this JSON file
    # static mode: inductor options beside CUDA graphs, e.g. (("coordinate_descent_tuning", True),)
    compile_options: tuple[tuple[str, Any], ...] = ()
    gpu_catalog: str | None = None
    extra_notes: tuple[str, ...] = field(default=())

    def validated(self) -> ProfileConfig:
        for name in ("batch_sizes", "prompt_tokens", "output_tokens"):
            values = getattr(self, name)
            if not values:
                raise InvalidInput(name, values, "is empty", "Give at least one value")
            for v in values:
                if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                    raise InvalidInput(name, v, "must be a positive integer", "")
        modes: list[str] = []
        for m in self.modes:
            if m == "both":
                modes.extend(MODES)
            elif m in MODES:
                modes.append(m)
            else:
                raise InvalidInput("modes", m, "unknown mode", "Use eager, static or both")
        if self.repeats < 1:
            raise InvalidInput("repeats", self.repeats, "must be at least 1", "")
        if self.warmup < 0:
            raise InvalidInput("warmup", self.warmup, "must not be negative", "")
        if "static" in modes and self.warmup < 3:
            # torch.compile traces on the first calls and cudagraph trees record on the following
            # ones: fewer warm-ups would time compilation.
            raise InvalidInput(
                "warmup", self.warmup, "static mode needs at least 3 warm-up generations", "Use 3"
            )
        if self.memory_limit_gib is not None and self.memory_limit_gib <= 0:
            raise InvalidInput("memory_limit_gib", self.memory_limit_gib, "must be positive", "")
        return replace(self, modes=tuple(dict.fromkeys(modes)))


def sweep_points(config: ProfileConfig, dtypes: Iterable[str]) -> list[SweepPoint]:
    """All points, grouped so that a model is built once per dtype and compiled once per batch."""
    return [
        SweepPoint(batch_size=b, prompt_tokens=p, output_tokens=o, dtype=d, mode=m)
        for d, m, b, p, o in product(
            dtypes, config.modes, config.batch_sizes, config.prompt_tokens, config.output_tokens
        )
    ]


class PointTooLarge(Exception):
    """A sweep point that would not fit the memory left; recorded as a failed point."""


def _free_memory_gib(device: torch.device) -> float:
    if device.type == "cuda":
        free, _total = torch.cuda.mem_get_info(device)
        return free / 2**30
    import psutil

    return psutil.virtual_memory().available / 2**30


def estimate_point_gib(arch: ModelArch, point: SweepPoint) -> float:
    """Memory a point needs beyond the weights: the KV cache at full length plus a margin for
    activations (two hidden-state-sized buffers per prompt token, the last-position logits)."""
    b = roofline.dtype_bytes(point.dtype)
    tokens = point.batch_size * (point.prompt_tokens + point.output_tokens)
    kv = tokens * arch.kv_bytes_per_token(b)
    act = point.batch_size * point.prompt_tokens * (arch.hidden_size + arch.intermediate_size) * b * 2
    logits = point.batch_size * arch.vocab_size * 4
    return (kv + act + logits) / 2**30


class _Runner:
    """Runs the generations of one (model, dtype, mode, batch) group."""

    def __init__(
        self,
        model: Any,
        device: torch.device,
        mode: str,
        clock: Clock,
        compile_options: tuple[tuple[str, Any], ...] = (),
    ) -> None:
        self.model = model
        self.device = device
        self.mode = mode
        self.clock = clock
        self.key = cache_kwarg(model)
        self._static_cache: Any = None
        self._static_shape: tuple[int, int] | None = None
        self.graphs = mode == "static" and device.type == "cuda"
        self._compiled: Any = None
        if mode == "static":
            # fullgraph: a graph break would split the step into several CUDA graphs with eager Python
            # between them (tests/unit/test_profiler.py compiles the decode step this way on the CPU)
            # mode="reduce-overhead" is inductor's triton.cudagraphs option; given as options, others join it
            options = {"triton.cudagraphs": self.graphs, **dict(compile_options)}
            self._compiled = torch.compile(self._eager_decode, options=options, dynamic=False, fullgraph=True)

    def _eager_decode(self, token: torch.Tensor, cache: Any, position: torch.Tensor | None) -> torch.Tensor:
        extra = {} if position is None else {"cache_position": position}
        out = self.model(input_ids=token, use_cache=True, **extra, **{self.key: cache})
        next_token: torch.Tensor = out.logits[:, -1].argmax(-1, keepdim=True)
        return next_token

    def _decode(self, token: torch.Tensor, cache: Any, position: torch.Tensor) -> torch.Tensor:
        """One decode step. Eager: the model with its dynamic cache. Static: the compiled step with the
        cache position given (a static cache would otherwise count its filled slots every step).

        Under CUDA graphs each replay writes its output into the same memory, and the step's output token
        is the next step's input: without marking each replay as a new step and copying the token out,
        the second replay reads a tensor the first one's successor overwrote, which torch refuses
        ("accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run", seen on
        an H200, ../shared/data/gpu-h200-2026-12-04). The copy is one 8-byte-per-sequence kernel."""
        step = self._compiled or self._eager_decode
        at = position if self.mode == "static" else None
        if self.graphs:
            torch.compiler.cudagraph_mark_step_begin()  # type: ignore[no-untyped-call]
            replayed: torch.Tensor = step(token, cache, at).clone()
            return replayed
        out: torch.Tensor = step(token, cache, at)
        return out

    def _prefill(self, ids: torch.Tensor, cache: Any) -> torch.Tensor:
        extra = (
            {} if self.mode == "eager" else {"cache_position": torch.arange(ids.shape[1], device=ids.device)}
        )
        out = self.model(input_ids=ids, use_cache=True, logits_to_keep=1, **extra, **{self.key: cache})
        first_token: torch.Tensor = out.logits[:, -1].argmax(-1, keepdim=True)
        return first_token

    def _cache(self, batch: int, max_len: int) -> Any:
        if self.mode == "eager":
            return new_dynamic_cache(self.model)
        if self._static_shape != (batch, max_len):
            self._static_cache = new_static_cache(self.model, batch, max_len)
            self._static_shape = (batch, max_len)
        else:
            self._static_cache.reset()
        return self._static_cache

    def generate(self, ids: torch.Tensor, output_tokens: int) -> list[float]:
        """One timed generation; returns [prefill_s, step_1_s, ..., step_{n-1}_s]."""
        batch, prompt = ids.shape
        cache = self._cache(batch, prompt + output_tokens)
        self.clock.prepare(output_tokens + 1)
        # positions are made before the timed region: a server's engine has them in its batch already
        positions = [torch.tensor([prompt + i], device=self.device) for i in range(output_tokens - 1)]
        synchronize(self.device)
        self.clock.mark()
        token = self._prefill(ids, cache)
        self.clock.mark()
        for position in positions:
            token = self._decode(token, cache, position)
            self.clock.mark()
        return self.clock.intervals()


def _bandwidth(
    device: torch.device, info: DeviceInfo, catalog: GpuCatalog
) -> tuple[float, str, Callable[[str], float]]:
    """Memory bandwidth for the roofline and peak TFLOP/s per dtype, with where they came from."""
    if device.type == "cuda" and info.catalog_gpu:
        spec = catalog.get(info.catalog_gpu)
        bw_share = compute_share = 1.0
        source = f"catalog:{spec.name}"
        if info.mig_device:
            profile = next((p for p in spec.mig_profiles if info.mig_device.endswith(p.name)), None)
            if profile is not None and spec.memory_slices and spec.compute_slices:
                bw_share = profile.memory_slices / spec.memory_slices
                compute_share = profile.compute_slices / spec.compute_slices
                source += f":{profile.name}"
        return spec.hbm_bandwidth_gbps * bw_share, source, lambda d: spec.peak_tflops(d) * compute_share
    measured_tflops: dict[str, float] = {}

    def peak(d: str) -> float:
        if d not in measured_tflops:
            measured_tflops[d] = measure_matmul_tflops(device, torch_dtype(d))
        return measured_tflops[d]

    bandwidth, source = read_bandwidth(device)
    return bandwidth, source, peak


def _peak_memory_gib(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**30
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def _device_memory_used_gib(info: DeviceInfo) -> float:
    if info.kind != "cuda" or not info.pci_bus_id:
        return math.nan
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            handle = pynvml.nvmlDeviceGetHandleByPciBusId(info.pci_bus_id)
            return float(pynvml.nvmlDeviceGetMemoryInfo(handle).used) / 2**30
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # NVML is optional: the torch allocator figure is always there
        return math.nan


def _is_oom(e: BaseException) -> bool:
    return isinstance(e, torch.OutOfMemoryError) or "out of memory" in str(e).lower()


def measure_point(
    runner: _Runner,
    arch: ModelArch,
    point: SweepPoint,
    *,
    repeats: int,
    warmup: int,
    seed: int,
    memory_limit_gib: float | None,
    bandwidth_gbps: float,
    peak_tflops: float,
    info: DeviceInfo,
) -> PointResult:
    device = runner.device
    need = estimate_point_gib(arch, point)
    free = _free_memory_gib(device)
    limit = free if memory_limit_gib is None else min(free, memory_limit_gib)
    try:
        if need > limit:
            raise PointTooLarge(f"needs about {need:.2f} GiB beyond the weights, {limit:.2f} GiB available")
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        gen = torch.Generator().manual_seed(seed)
        # token ids from the upper half of the vocabulary keep clear of special ids
        ids = torch.randint(
            arch.vocab_size // 2, arch.vocab_size, (point.batch_size, point.prompt_tokens), generator=gen
        )
        ids = ids.to(device)
        prefill, steps, tpot, e2e = [], [], [], []
        with torch.inference_mode():
            for r in range(warmup + repeats):
                intervals = runner.generate(ids, point.output_tokens)
                if r < warmup:
                    continue
                prefill.append(intervals[0])
                steps.extend(intervals[1:])
                if len(intervals) > 1:
                    tpot.append(sum(intervals[1:]) / (len(intervals) - 1))
                e2e.append(sum(intervals))
    except (PointTooLarge, torch.OutOfMemoryError, RuntimeError) as e:
        if not isinstance(e, PointTooLarge) and not _is_oom(e):
            raise
        if device.type == "cuda":
            torch.cuda.empty_cache()
        kind = "out of memory" if not isinstance(e, PointTooLarge) else "skipped, would not fit"
        return PointResult(point=point, ok=False, error=f"{kind}: {str(e).splitlines()[0][:300]}")
    step = Distribution.of(steps)
    bytes_step = roofline.decode_bytes_per_step(
        arch,
        point.batch_size,
        roofline.mean_decode_context(point.prompt_tokens, point.output_tokens),
        point.dtype,
    )
    floor = roofline.memory_floor_s(bytes_step, bandwidth_gbps)
    pre = Distribution.of(prefill)
    flops = roofline.prefill_flops(arch, point.batch_size, point.prompt_tokens)
    return PointResult(
        point=point,
        ok=True,
        repeats=repeats,
        prefill=pre,
        decode_step=step,
        tpot=Distribution.of(tpot),
        e2e=Distribution.of(e2e),
        peak_memory_gib=_peak_memory_gib(device),
        device_memory_used_gib=_device_memory_used_gib(info),
        decode_bytes_per_step=bytes_step,
        decode_floor_s=floor,
        mbu=roofline.utilisation(floor, step.mean),
        prefill_flops=flops,
        mfu=roofline.utilisation(roofline.compute_floor_s(flops, peak_tflops), pre.median),
        decode_tokens_per_s=point.batch_size / step.mean if step.count else math.nan,
    )


def _breakdown(
    runner: _Runner, arch: ModelArch, point: SweepPoint, result: PointResult, bandwidth_gbps: float
) -> StepBreakdown:
    """Trace 8 decode steps of ``point`` with the runner that timed it (its graphs already captured)."""
    batch, prompt = point.batch_size, point.prompt_tokens
    steps = min(8, point.output_tokens - 1)
    ids = torch.randint(arch.vocab_size // 2, arch.vocab_size, (batch, prompt), device=runner.device)
    # the static cache was made under inference mode: resetting it outside raised on the H200
    with torch.inference_mode():
        cache = runner._cache(batch, prompt + point.output_tokens)
        token = runner._prefill(ids, cache)
        at = iter([torch.tensor([prompt + i], device=runner.device) for i in range(steps)])
        state = {"token": token}

        def step() -> None:
            state["token"] = runner._decode(state["token"], cache, next(at))

        kernels = trace_steps(step, steps, runner.device)
    return breakdown(
        kernels,
        steps,
        batch_size=batch,
        prompt_tokens=prompt,
        dtype=point.dtype,
        mode=point.mode,
        step_s=result.decode_step.median,
        weight_bytes=float(arch.decode_weight_params * roofline.dtype_bytes(point.dtype)),
        bandwidth_gbps=bandwidth_gbps,
    )


def _check_profiler_off() -> None:
    if torch.autograd.profiler._is_profiler_enabled:
        raise RuntimeError(
            "the torch profiler is on: its instrumentation would be timed; run gpuplace profile without it"
        )


def _sweep_dtypes(config: ProfileConfig, source: ModelSource, device: torch.device) -> list[str]:
    """The dtypes to sweep, "auto" resolved; refuses one ``device`` cannot run or lengths past the model's."""
    dtypes = [default_dtype(device) if d == "auto" else dtype_name(d) for d in config.dtypes]
    dtypes = list(dict.fromkeys(dtypes))
    for d in dtypes:
        check_dtype_runs(device, torch_dtype(d), d)
    max_len = max(config.prompt_tokens) + max(config.output_tokens)
    max_pos = int(source.config.get("max_position_embeddings") or 0)
    if max_pos and max_len > max_pos:
        raise InvalidInput(
            "prompt_tokens+output_tokens",
            max_len,
            f"exceeds the model's max_position_embeddings={max_pos}",
            "",
        )
    return dtypes


def run_profile(
    config: ProfileConfig,
    *,
    catalog: GpuCatalog | None = None,
    show_progress: bool = True,
    on_point: Callable[[PointResult], None] | None = None,
) -> LatencyProfile:
    """Profile ``config.model`` over the sweep on ``config.device``."""
    started_at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    config = config.validated()
    _check_profiler_off()
    source: ModelSource = resolve_model(config.model)
    device = resolve_device(config.device)
    dtypes = _sweep_dtypes(config, source, device)
    catalog = catalog or load_gpu_catalog(config.gpu_catalog)
    info = discover_device(device, catalog)
    if config.extra_notes:
        info = replace(info, notes=info.notes + config.extra_notes)
    bandwidth, bw_source, peak_fn = _bandwidth(device, info, catalog)
    points = sweep_points(config, dtypes)
    torch.manual_seed(config.seed)
    results: list[PointResult] = []
    arch: ModelArch | None = None
    peaks: dict[str, float] = {}
    breakdowns: list[StepBreakdown] = []
    with Progress(len(points), f"profile {config.model} on {device}", enabled=show_progress) as progress:
        for d in dtypes:
            model = build_model(source, torch_dtype(d), device, random_weights=config.random_weights)
            arch = model_arch_from_config(source.name, source.config, num_params=num_params(model))
            peaks[d] = peak_fn(d)
            for mode in config.modes:
                clock = clock_for(device)
                runner = _Runner(model, device, mode, clock, config.compile_options)
                for point in (p for p in points if p.dtype == d and p.mode == mode):
                    result = measure_point(
                        runner,
                        arch,
                        point,
                        repeats=config.repeats,
                        warmup=config.warmup,
                        seed=config.seed,
                        memory_limit_gib=config.memory_limit_gib,
                        bandwidth_gbps=bandwidth,
                        peak_tflops=peaks[d],
                        info=info,
                    )
                    results.append(result)
                    if config.breakdown_out and mode == "static" and result.ok:
                        try:  # a diagnostic: its failure must not cost the sweep
                            breakdowns.append(_breakdown(runner, arch, point, result, bandwidth))
                        except RuntimeError as e:
                            info = replace(info, notes=(*info.notes, f"breakdown of {point}: {e}"))
                    if on_point is not None:
                        on_point(result)
                    progress.advance(describe_point(result))
            del model
            if device.type == "cuda":
                torch.cuda.empty_cache()
    assert arch is not None
    if config.breakdown_out:
        write_breakdowns(breakdowns, config.breakdown_out)

    def remeasure() -> tuple[float, dict[str, float]]:
        again_bw, _, again_peak = _bandwidth(device, info, catalog)
        return again_bw, {d: again_peak(d) for d in peaks}

    results, bandwidth, peaks = check_fractions(
        results, bandwidth_gbps=bandwidth, bandwidth_source=bw_source, peaks=peaks, remeasure=remeasure
    )
    return LatencyProfile(
        model=arch,
        device=info,
        results=tuple(results),
        memory_bandwidth_gbps=bandwidth,
        bandwidth_source=bw_source,
        peak_tflops=peaks,
        gpuplace_version=gpuplace.__version__,
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        started_at=started_at,
    )
