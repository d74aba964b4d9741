"""Latency prediction for a shape the profile did not run on: roofline scaling plus a queueing model.

*Calibration* (from a GPU profile; a CPU profile never calibrates a GPU): the achieved fraction of the
memory-bandwidth roofline in decode (median MBU over the sweep), of peak FLOP/s in prefill (median MFU;
0.4 when the profile has none), and the tails (p99/p50 of prefill and of per-request TPOT). A median
MBU or MFU above 1 is a measurement error and is refused, not clamped. *Service times* on the target: a
decode step reads the weights and the KV cache of the batch, split over ``tp`` GPUs, at the target's
HBM bandwidth × its share (MIG: memory slices / 8, shared: the share) ÷ the calibrated MBU; prefill is
the larger of its compute and weight-read floors ÷ MFU and MBU. Tensor parallelism adds two ring
all-reduces per layer over the interconnect the GPU set actually has (:data:`LINKS`). Time-sliced
sharing multiplies service times by :data:`SHARED_OVERHEAD`. *Queueing* (per replica, Poisson arrivals
at rate/replicas): prefill is an M/D/1 queue (Pollaczek–Khinchine mean wait, exponential tail), decode
steps are stretched by the time prefills occupy the GPU, and the batch is the mean number in flight
(Little's law), solved in closed form because a step's cost is linear in the batch. Pure functions.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from gpuplace.errors import InvalidInput
from gpuplace.profiling import roofline
from gpuplace.types import GpuSpec, LatencyProfile, ModelArch
from gpuplace.types.plan import Prediction, Slo
from gpuplace.types.workload import Traffic

SERVING_DTYPE_BYTES = 2  # vLLM serves in bf16/fp16
DEFAULT_MBU = 0.5
DEFAULT_MFU = 0.4
SHARED_OVERHEAD = 1.15  # time-slicing context switches and cache thrash (docs/placement.md)
RUNTIME_OVERHEAD_GIB = 1.0  # CUDA context, activations, NCCL buffers per GPU
GPU_MEMORY_UTILIZATION = 0.9  # vLLM's default share of device memory it may use
PCIE_GBPS_PER_LANE = {3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}


@dataclass(frozen=True, slots=True)
class Link:
    """An interconnect tier: per-message latency and the bandwidth factor applied to the GPU's link."""

    latency_s: float
    bandwidth_factor: float
    uses_nvlink: bool


# Ordered best first; the planner prefers earlier tiers.
LINKS: dict[str, Link] = {
    "single": Link(0.0, 1.0, False),
    "nvlink": Link(8e-6, 1.0, True),
    "pcie-switch": Link(15e-6, 1.0, False),
    "numa": Link(20e-6, 0.8, False),  # through the root complex of one socket
    "cross-numa": Link(30e-6, 0.5, False),  # over the inter-socket link
}
TIERS: tuple[str, ...] = tuple(LINKS)


@dataclass(frozen=True, slots=True)
class Calibration:
    """What the profile says about achieved efficiency, carried over to other devices."""

    arch: ModelArch
    mbu: float
    mfu: float
    prefill_tail: float
    tpot_tail: float
    notes: tuple[str, ...] = ()


def _median_finite(values: list[float]) -> float:
    finite = [v for v in values if math.isfinite(v) and v > 0]
    return statistics.median(finite) if finite else math.nan


def measured_fraction(values: list[float], name: str, device: str) -> float:
    """The median of measured MBUs or MFUs (NaN when there are none), refusing one above 1.

    No hardware moves more bytes or FLOPs than its peak: a median above 1 means the bandwidth or peak
    it was divided by was measured low (a probe disturbed by load) or the steps were timed wrong. It
    is an error to re-measure, never a value to clamp.
    """
    value = _median_finite(values)
    if value > 1:
        raise InvalidInput(
            f"profile.{name}",
            round(value, 3),
            f"the median {name.upper()} measured on {device} is above 1, which no hardware achieves: "
            "the bandwidth or peak it divides by was measured low (a probe disturbed by load) or the "
            "steps were timed wrong",
            "Re-run the profile on an idle machine; gpuplace never clamps such a value",
        )
    return value


def calibrate(profile: LatencyProfile) -> Calibration:
    """What the profile says about achieved efficiency, for predicting on GPUs.

    Only a GPU profile calibrates: a CPU's efficiencies and tails say nothing about a GPU, so a CPU
    profile gives the defaults (with a note). A measured MBU or MFU above 1 is refused.
    """
    if profile.device.kind != "cuda":
        return Calibration(
            arch=profile.model,
            mbu=DEFAULT_MBU,
            mfu=DEFAULT_MFU,
            prefill_tail=1.0,
            tpot_tail=1.0,
            notes=(
                f"profiled on {profile.device.kind} ({profile.device.name}): a CPU profile does not "
                f"calibrate GPUs; assumed MBU {DEFAULT_MBU}, MFU {DEFAULT_MFU} and no tail spread",
            ),
        )
    ok = profile.ok_results
    notes: list[str] = []
    mbu = measured_fraction([r.mbu for r in ok], "mbu", profile.device.name)
    if not math.isfinite(mbu):
        mbu = DEFAULT_MBU
        notes.append(f"profile has no MBU; assumed {DEFAULT_MBU}")
    mfu = measured_fraction([r.mfu for r in ok], "mfu", profile.device.name)
    if not math.isfinite(mfu):
        mfu = DEFAULT_MFU
        notes.append(f"profile has no MFU; assumed {DEFAULT_MFU}")
    prefill_tail = _median_finite([r.prefill.p99 / r.prefill.p50 for r in ok if r.prefill.p50 > 0])
    tpot_tail = _median_finite([r.tpot.p99 / r.tpot.p50 for r in ok if r.tpot.p50 > 0])
    return Calibration(
        arch=profile.model,
        mbu=mbu,
        mfu=mfu,
        prefill_tail=max(prefill_tail, 1.0) if math.isfinite(prefill_tail) else 1.0,
        tpot_tail=max(tpot_tail, 1.0) if math.isfinite(tpot_tail) else 1.0,
        notes=tuple(notes),
    )


@dataclass(frozen=True, slots=True)
class Shape:
    """What one replica runs on: a GPU model, its share of one GPU, a TP degree and the link between."""

    spec: GpuSpec
    tp: int = 1
    bandwidth_share: float = 1.0
    compute_share: float = 1.0
    memory_gib: float = 0.0  # usable device memory per GPU before the utilisation cap
    link: str = "single"
    shared: bool = False


def link_gbps(spec: GpuSpec, link: str) -> float:
    """Per-direction bandwidth of the GPU's link to its TP peers on this tier."""
    tier = LINKS[link]
    if tier.uses_nvlink and spec.nvlink_gbps > 0:
        return spec.nvlink_gbps / 2
    return PCIE_GBPS_PER_LANE.get(spec.pcie_gen, 1.969) * spec.pcie_lanes * tier.bandwidth_factor


def _allreduce_s(shape: Shape, message_bytes: float, layers: int) -> float:
    if shape.tp <= 1:
        return 0.0
    tier = LINKS[shape.link]
    ring = 2 * (shape.tp - 1) / shape.tp * message_bytes / (link_gbps(shape.spec, shape.link) * 1e9)
    return 2 * layers * (tier.latency_s + ring)


def decode_step_cost(cal: Calibration, shape: Shape, context_tokens: float) -> tuple[float, float]:
    """``(a, b)`` with one decode step taking ``a + b·batch`` seconds on the shape."""
    arch = cal.arch
    bw = shape.spec.hbm_bandwidth_gbps * 1e9 * shape.bandwidth_share * cal.mbu
    weights = arch.decode_weight_params * SERVING_DTYPE_BYTES / shape.tp
    kv_per_seq = context_tokens * arch.kv_bytes_per_token(SERVING_DTYPE_BYTES) / shape.tp
    factor = SHARED_OVERHEAD if shape.shared else 1.0
    a = (weights / bw + _allreduce_s(shape, 0.0, arch.num_layers)) * factor
    per_seq_comm = _allreduce_s(
        shape, arch.hidden_size * SERVING_DTYPE_BYTES, arch.num_layers
    ) - _allreduce_s(shape, 0.0, arch.num_layers)
    b = (kv_per_seq / bw + per_seq_comm) * factor
    return a, b


def prefill_s(cal: Calibration, shape: Shape, prompt_tokens: int) -> float:
    arch = cal.arch
    peak = shape.spec.peak_tflops("bfloat16") or shape.spec.peak_tflops("float16")
    flops = roofline.prefill_flops(arch, 1, prompt_tokens)
    compute = flops / shape.tp / (peak * 1e12 * shape.compute_share * cal.mfu)
    weights = arch.decode_weight_params * SERVING_DTYPE_BYTES / shape.tp
    memory = weights / (shape.spec.hbm_bandwidth_gbps * 1e9 * shape.bandwidth_share * cal.mbu)
    comm = _allreduce_s(shape, prompt_tokens * arch.hidden_size * SERVING_DTYPE_BYTES, arch.num_layers)
    return (max(compute, memory) + comm) * (SHARED_OVERHEAD if shape.shared else 1.0)


def _wait_quantile(mean_wait: float, rho: float, q: float) -> float:
    """Quantile of an exponential-tailed wait: P(W > t) = ρ·exp(−ρ t / W̄)."""
    if rho <= 0 or rho <= 1 - q:
        return 0.0
    return mean_wait / rho * math.log(rho / (1 - q))


def memory_per_gpu_gib(arch: ModelArch, tp: int, batch: int, tokens: int) -> float:
    weights = arch.num_params * SERVING_DTYPE_BYTES
    kv = batch * tokens * arch.kv_bytes_per_token(SERVING_DTYPE_BYTES)
    return (weights + kv) / tp / 2**30 + RUNTIME_OVERHEAD_GIB


def predict(cal: Calibration, shape: Shape, slo: Slo, traffic: Traffic, replicas: int) -> Prediction:
    """Predicted p50/p99 TTFT and TPOT of one replica serving ``slo.rate_rps / replicas`` of ``traffic``
    (its mean prompt and output lengths)."""
    lam = (slo.rate_rps or 0.0) / replicas
    prompt = max(1, round(traffic.prompt_tokens.mean))
    out = max(1, round(traffic.output_tokens.mean))
    context = prompt + out / 2
    s = prefill_s(cal, shape, prompt)
    a, b = decode_step_cost(cal, shape, context)
    rho = lam * s
    # Saturated: latency unbounded; memory reported for a single sequence (a lower bound).
    floor_gib = memory_per_gpu_gib(cal.arch, shape.tp, 1, prompt + out)
    unstable = Prediction(math.inf, math.inf, math.inf, math.inf, math.inf, 1, floor_gib, stable=False)
    if rho >= 1:
        return unstable
    stretch = 1 / (1 - rho)  # decode steps wait while prefills hold the GPU
    mean_wait = rho * s / (2 * (1 - rho))
    w50 = _wait_quantile(mean_wait, rho, 0.5)
    steps = 0.5 + (out - 1) * stretch  # half a step before the first token, then out-1 stretched steps
    denominator = 1 - lam * b * steps
    if denominator <= 0:
        return unstable
    n = lam * (s + w50 + a * steps) / denominator
    step = a + b * n
    tpot50 = step * stretch
    ttft50 = s + w50 + step / 2
    max_batch = max(1, math.ceil(n + 2.33 * math.sqrt(n)))
    return Prediction(
        ttft_p50_s=ttft50,
        ttft_p99_s=s * cal.prefill_tail + _wait_quantile(mean_wait, rho, 0.99) + step * cal.tpot_tail,
        tpot_p50_s=tpot50,
        tpot_p99_s=tpot50 * cal.tpot_tail,
        concurrency=n,
        max_batch=max_batch,
        memory_per_gpu_gib=memory_per_gpu_gib(cal.arch, shape.tp, max_batch, prompt + out),
    )
