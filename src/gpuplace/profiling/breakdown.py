"""Where a decode step's time goes (``gpuplace profile --breakdown FILE``): what holds the profiler's best
mode back from the memory roofline.

After a sweep point of the static mode (CUDA graphs on a GPU) is timed, a few more decode steps run under
the torch profiler, whose CUPTI trace lists every kernel the graph replays with its GPU time (on a CPU, the
operators torch ran, with their self time). The kernels are sorted
by name into GEMMs (cuBLAS, CUTLASS, nvjet and Triton matmuls), attention (flash, memory-efficient or math
SDPA), and the rest (norms, rotary embedding, activations, the cache update, the argmax); per step:

* each group's kernel time and count; the GEMMs' bytes (every weight once) over their time is the
  bandwidth the matmuls reach;
* the gaps: the step's measured time (the timed run, not the profiled one, which the tracer slows) minus
  all its kernels' time: the GPU idle between kernels, from launches or a host that falls behind.

The figures are diagnostics, kept beside the profile (JSON and one Markdown paragraph per point), and never
enter a prediction. The trace's own overhead is not in the step time they are set against.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from gpuplace.units import ms

GEMM_RE = re.compile(
    r"gemm|gemv|cutlass|nvjet|xmma|matmul|cublas|splitk|triton_tem_fused_mm|_mm_|aten::(addmm|mm|bmm|linear)$",
    re.I,
)
ATTENTION_RE = re.compile(r"flash|fmha|attention|attn|sdpa", re.I)


def kernel_group(name: str) -> str:
    if ATTENTION_RE.search(name):
        return "attention"
    if GEMM_RE.search(name):
        return "gemm"
    return "other"


@dataclass(frozen=True, slots=True)
class StepBreakdown:
    """One decode step of one sweep point, in seconds per step (means over the traced steps)."""

    batch_size: int
    prompt_tokens: int
    dtype: str
    mode: str
    step_s: float  # the timed run's median step
    kernels_per_step: float
    gemm_s: float
    gemm_kernels: float
    attention_s: float
    attention_kernels: float
    other_s: float
    other_kernels: float
    gaps_s: float
    weight_bytes: float
    bandwidth_gbps: float  # the roofline's
    top_kernels: tuple[tuple[str, float, int], ...]  # (name, seconds per step, calls per step)

    @property
    def gemm_bandwidth_share(self) -> float:
        """The weights' bytes over the GEMMs' time, as a share of the roofline bandwidth."""
        return self.weight_bytes / self.gemm_s / (self.bandwidth_gbps * 1e9) if self.gemm_s else float("nan")

    def describe(self) -> str:
        return (
            f"batch {self.batch_size}, {self.mode}: step {ms(self.step_s, 2)} ms = GEMMs "
            f"{ms(self.gemm_s, 2)} ms ({self.gemm_kernels:.0f} kernels; the weights at "
            f"{self.gemm_bandwidth_share:.0%} of {self.bandwidth_gbps:.0f} GB/s) + attention "
            f"{ms(self.attention_s, 2)} ms ({self.attention_kernels:.0f}) + other kernels "
            f"{ms(self.other_s, 2)} ms ({self.other_kernels:.0f}) + gaps {ms(self.gaps_s, 2)} ms"
        )


def trace_steps(step: Callable[[], object], steps: int, device: torch.device) -> dict[str, tuple[float, int]]:
    """Run ``step`` ``steps`` times under the torch profiler; operation name → (seconds, calls), summed.

    On a GPU the operations are the kernels the CUDA trace lists, with their GPU time; on a CPU the
    operators torch ran, each with its self time (what it spent outside the operators it called), so
    that nested operators are not counted twice."""
    from torch.profiler import ProfilerActivity, profile

    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU, ProfilerActivity.CUDA] if cuda else [ProfilerActivity.CPU]
    if cuda:
        torch.cuda.synchronize(device)
    with profile(activities=activities) as prof:
        for _ in range(steps):
            step()
        if cuda:
            torch.cuda.synchronize(device)
    out: dict[str, tuple[float, int]] = {}
    for event in prof.events():
        on_gpu = "CUDA" in str(getattr(event, "device_type", ""))
        if on_gpu != cuda:
            continue
        if cuda:
            micros = getattr(event, "device_time", None) or getattr(event, "cuda_time", None) or 0.0
        else:
            micros = getattr(event, "self_cpu_time_total", 0.0) or 0.0
        prev = out.get(event.name, (0.0, 0))
        out[event.name] = (prev[0] + float(micros) / 1e6, prev[1] + 1)
    return out


def breakdown(
    kernels: dict[str, tuple[float, int]],
    steps: int,
    *,
    batch_size: int,
    prompt_tokens: int,
    dtype: str,
    mode: str,
    step_s: float,
    weight_bytes: float,
    bandwidth_gbps: float,
) -> StepBreakdown:
    """The per-step figures of a trace of ``steps`` decode steps (:func:`trace_steps`)."""
    sums = {"gemm": [0.0, 0], "attention": [0.0, 0], "other": [0.0, 0]}
    for name, (t, calls) in kernels.items():
        g = sums[kernel_group(name)]
        g[0] += t
        g[1] += calls
    total = sum(float(g[0]) for g in sums.values()) / steps
    top = sorted(kernels.items(), key=lambda kv: -kv[1][0])[:12]
    return StepBreakdown(
        batch_size=batch_size,
        prompt_tokens=prompt_tokens,
        dtype=dtype,
        mode=mode,
        step_s=step_s,
        kernels_per_step=sum(int(g[1]) for g in sums.values()) / steps,
        gemm_s=float(sums["gemm"][0]) / steps,
        gemm_kernels=int(sums["gemm"][1]) / steps,
        attention_s=float(sums["attention"][0]) / steps,
        attention_kernels=int(sums["attention"][1]) / steps,
        other_s=float(sums["other"][0]) / steps,
        other_kernels=int(sums["other"][1]) / steps,
        gaps_s=max(0.0, step_s - total),
        weight_bytes=weight_bytes,
        bandwidth_gbps=bandwidth_gbps,
        top_kernels=tuple((name[:120], t / steps, round(calls / steps)) for name, (t, calls) in top),
    )


def write_breakdowns(rows: list[StepBreakdown], path: str | Path) -> Path:
    """The breakdowns as JSON, and one Markdown line each beside it (``.md``)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps([asdict(r) | {"describe": r.describe()} for r in rows], indent=1) + "\n")
    lines = ["# Where a decode step's time goes", "", *(f"- {r.describe()}" for r in rows)]
    for r in rows:
        lines += ["", f"Top kernels, batch {r.batch_size} {r.mode} (µs per step, calls):", ""]
        lines += [f"- {t * 1e6:.1f} µs × {c}: `{name}`" for name, t, c in r.top_kernels]
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    return out
