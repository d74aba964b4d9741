"""The step-time model: how long one engine step takes, from what the step holds.

A continuous-batching engine runs steps; a step processes ``n`` decode sequences (one token each, each
attending to its cached context) and ``c`` prompt tokens of prefilling requests (chunks, each attending
causally to its own prompt so far). Its time is the per-operation roofline divided by achieved
efficiencies, plus fixed terms:

* **linear layers** (QKV, O, gate-up, down per layer, and the LM head): ``max(weight bytes ÷
  (bandwidth·MBU) + kernels × GEMM latency, FLOPs ÷ (peak·MFU))`` with FLOPs = 2 × non-embedding
  parameters per token (the head only for sampled tokens). Every linear layer of a transformer has the
  same arithmetic intensity for a given token count, so the max of the sums is the sum of the per-layer
  maxes; the per-kernel latency is what makes small (high-TP) weight reads cost more than their bytes;
* **decode attention**: the K and V of every context token read once ÷ (bandwidth·MBU);
* **prefill attention**: 4·heads·head_dim FLOPs per (query, key) pair per layer ÷ (peak·attention MFU);
* **elementwise operations** (the fused add-RMSNorms, rotary embedding, SiLU-and-mul): memory-bound on
  the activations they read and write, ``(8·hidden + 2·(q + k heads)·head_dim + 3·intermediate)`` bf16
  values per token per layer (heads and intermediate split over TP) ÷ (bandwidth·MBU);
* **tensor parallelism**: weights, heads and KV heads split over ``tp`` GPUs, plus two ring all-reduces
  per layer of the step's hidden states over the link the GPU set really has
  (:data:`gpuplace.planner.hardware.LINKS`: per-message latency, bandwidth × link efficiency);
* **fixed terms**: a per-step overhead (kernel floors, scheduling, sampling) and, measured on a real
  engine, per-token and per-sequence overheads (:class:`~gpuplace.types.engine.EngineStepProfile`);
  on a server that handles requests in the same process as its steps (``transformers serve``), also
  the engine time each arriving request costs the running ones (its HTTP, tokenising and admission
  under the same interpreter lock), charged to the next step when a request arrives while others run;
  and the measured decode steps beyond the linear terms (``decode_excess_s``). vLLM's API server runs
  in its own process, so there the request work is 0.

The efficiencies come from a profile of the same GPU model when one is given, else from the GPU-class
defaults of ``catalog/data/efficiency.csv`` (:func:`choose_efficiencies`); a CPU profile never
calibrates a GPU. Pure arithmetic: no torch, no I/O.
"""

from __future__ import annotations

import bisect
import math
import statistics
from dataclasses import dataclass, replace

import numpy as np

from gpuplace.catalog.attention_fits import decode_attention_fit
from gpuplace.catalog.efficiency import EfficiencyTable
from gpuplace.catalog.gemm_curves import gemm_curves_for
from gpuplace.errors import InvalidInput
from gpuplace.planner.hardware import LINKS, SERVING_DTYPE_BYTES, SHARED_OVERHEAD, ReplicaHardware, link_gbps
from gpuplace.types import LatencyProfile, ModelArch
from gpuplace.types.engine import Efficiencies, EngineStepProfile
from gpuplace.types.operators import kv_heads_per_gpu
from gpuplace.types.precision import BF16, Precision


@dataclass(frozen=True, slots=True)
class StepTimeModel:
    """Coefficients of one shape's step time; :meth:`step_s` adds them up for a step's contents."""

    fixed_s: float = 0.0  # per step, whatever it holds
    cpu_step_s: float = 0.0  # of fixed_s, the engine's CPU work (multi-step scheduling pays it once a run)
    weights_s: float = 0.0  # reading the weights once (the memory floor of the linear layers)
    gemm_s_per_token: float = 0.0  # linear-layer compute per token processed
    head_s_per_sample: float = 0.0  # LM-head compute per token sampled
    per_token_s: float = 0.0  # per token outside the linear layers: activation traffic, or measured overhead
    per_seq_s: float = 0.0  # measured engine overhead per request in the step
    kv_s_per_token: float = 0.0  # reading one cached token's K and V (decode attention)
    attn_s_per_pair: float = 0.0  # one (query, key) pair of prefill attention
    comm_s_per_step: float = 0.0  # all-reduce latencies of one step (0 without TP)
    comm_s_per_token: float = 0.0  # all-reduce transfer per token processed
    request_overhead_s: float = 0.0  # added once to each request's TTFT
    request_work_s: float = 0.0  # engine time per request served beyond its tokens (one-process server)
    # measured decode-only steps of n = 1, 2, ... sequences beyond the linear terms (index n − 1; the
    # last holds for larger n): a real engine's decode step is not linear in n (measured_step_model)
    decode_excess_s: tuple[float, ...] = ()
    # measured: what a request that finds the engine idle adds to its first step, by how long the engine
    # had been idle ((idle_s, extra_s) points, interpolated, the last held beyond; 0 at no idle time)
    wake: tuple[tuple[float, float], ...] = ()
    # measured kernels (planner.kernels): the linear layers' seconds by tokens in the step and the LM head's
    # by tokens sampled, interpolated log-log; when set they replace weights_s, gemm_s_per_token and
    # head_s_per_sample
    gemm_curve: tuple[tuple[float, float], ...] = ()
    head_curve: tuple[tuple[float, float], ...] = ()
    source: str = ""
    linear_source: str = ""  # where gemm_curve came from when it is bundled measured GEMMs ("" otherwise)
    attention_source: str = ""  # where kv_s_per_token came from when it is a bundled attention fit

    def step_s(
        self,
        tokens: float,
        seqs: float,
        samples: float,
        decode_context: float = 0.0,
        prefill_pairs: float = 0.0,
        decodes: int = 0,
    ) -> float:
        """Seconds for a step of ``tokens`` tokens from ``seqs`` requests, ``samples`` of them sampled,
        whose ``decodes`` decode sequences attend to ``decode_context`` cached tokens and whose prefills
        to ``prefill_pairs`` (query, key) pairs. ``decodes`` only matters with a measured
        ``decode_excess_s``."""
        if tokens <= 0:
            return 0.0
        if self.gemm_curve:
            gemm = interp_loglog(self.gemm_curve, tokens) + (
                interp_loglog(self.head_curve, samples) if samples else 0.0
            )
        else:
            gemm = max(self.weights_s, tokens * self.gemm_s_per_token + samples * self.head_s_per_sample)
        excess = self.decode_excess_s
        return (
            (excess[min(decodes, len(excess)) - 1] if excess and decodes > 0 else 0.0)
            + self.fixed_s
            + gemm
            + tokens * (self.per_token_s + self.comm_s_per_token)
            + seqs * self.per_seq_s
            + decode_context * self.kv_s_per_token
            + prefill_pairs * self.attn_s_per_pair
            + self.comm_s_per_step
        )

    def wake_s(self, idle_s: float) -> float:
        """What an arrival at an engine idle for ``idle_s`` seconds waits before its first step starts
        (0 without a measured :attr:`wake`)."""
        points = self.wake  # sorted by idle time; called at every idle arrival, so no arrays built
        if not points or idle_s <= 0:
            return 0.0
        if idle_s >= points[-1][0]:
            return points[-1][1]
        k = bisect.bisect_left(points, (idle_s,))  # the first point at or beyond idle_s
        (x0, y0), (x1, y1) = points[k - 1] if k else (0.0, 0.0), points[k]
        return y0 + (y1 - y0) * (idle_s - x0) / (x1 - x0)

    def decode_terms(self, n: int) -> tuple[float, float]:
        """``(a, b)`` with a decode-only step of ``n`` sequences taking ``a + b·context`` seconds."""
        return self.step_s(n, n, n, decodes=n), self.kv_s_per_token

    def prefill_s(self, prompt_tokens: int) -> float:
        """One request's whole prompt in one step, alone (the zero-load TTFT without its overhead)."""
        return self.step_s(prompt_tokens, 1, 1, 0.0, causal_pairs(0, prompt_tokens))


def interp_loglog(points: tuple[tuple[float, float], ...], x: float) -> float:
    """``y(x)`` through ``points`` (sorted by x, positive): log-log linear between points, the first y
    below the first x (a kernel never gets faster with fewer rows), proportional beyond the last x."""
    if not points:
        return 0.0
    if x <= points[0][0]:
        return points[0][1]
    if x >= points[-1][0]:
        return points[-1][1] * x / points[-1][0]
    k = bisect.bisect_left(points, (x,))
    (x0, y0), (x1, y1) = points[k - 1], points[k]
    return float(y0 * (y1 / y0) ** (math.log(x / x0) / math.log(x1 / x0)))


def causal_pairs(offset: float, chunk: float) -> float:
    """(query, key) pairs of a causal chunk of ``chunk`` tokens after ``offset`` cached ones."""
    return chunk * offset + chunk * (chunk + 1) / 2


def kv_bytes_per_token_per_gpu(arch: ModelArch, tp: int, dtype_bytes: int = SERVING_DTYPE_BYTES) -> int:
    """K and V bytes one token adds on each GPU: KV heads split over TP, replicated when TP > heads."""
    heads = kv_heads_per_gpu(arch, tp)
    return 2 * arch.num_layers * heads * arch.head_dim * dtype_bytes


def linear_params(arch: ModelArch) -> int:
    """Parameters of the linear layers (QKV, O, gate-up, down of every layer): what FP8 W8A8 quantises.

    The embedding and the LM head stay bf16 under vLLM's FP8 methods (the head is ``ParallelLMHead``, not
    a quantised linear layer); the norms are negligible and counted here."""
    head = 0 if arch.tie_word_embeddings else arch.vocab_size * arch.hidden_size
    return arch.num_params - arch.embedding_params - head


def weight_bytes(arch: ModelArch, precision: Precision = BF16) -> float:
    """Bytes of all the weights the engine holds: linear layers at ``precision.weight_bytes``, the
    embedding and an untied LM head in bf16."""
    body = linear_params(arch)
    return float(body * precision.weight_bytes + (arch.num_params - body) * SERVING_DTYPE_BYTES)


def decode_weight_bytes(arch: ModelArch, precision: Precision = BF16) -> float:
    """Bytes one decode step reads: the linear layers and the LM head (the input embedding is a gather)."""
    body = linear_params(arch)
    return float(body * precision.weight_bytes + (arch.decode_weight_params - body) * SERVING_DTYPE_BYTES)


def gemm_kernels(arch: ModelArch) -> int:
    """GEMM kernels one step launches: QKV, O, gate-up and down per layer, and the LM head."""
    return 4 * arch.num_layers + 1


def activation_bytes_per_token(arch: ModelArch, tp: int, dtype_bytes: int = SERVING_DTYPE_BYTES) -> float:
    """Bytes the elementwise operations of all layers read and write per token, on one GPU.

    Per layer: two fused add-RMSNorms (read input and residual, write both: 4·hidden each), the rotary
    embedding (read and write q and k), SiLU-and-mul (read gate and up, write one: 3·intermediate).
    """
    q = arch.num_attention_heads * arch.head_dim / tp
    k = kv_heads_per_gpu(arch, tp) * arch.head_dim
    per_layer = 8 * arch.hidden_size + 2 * (q + k) + 3 * arch.intermediate_size / tp
    return float(arch.num_layers * per_layer * dtype_bytes)


def roofline_step_model(
    arch: ModelArch,
    shape: ReplicaHardware,
    eff: Efficiencies,
    precision: Precision = BF16,
    *,
    measured_gemms: bool = True,
) -> StepTimeModel:
    """The step-time coefficients of ``arch`` on ``shape`` at efficiencies ``eff``, serving in
    ``precision`` (bf16 by default): the class roofline, with the linear layers from the bundled
    measured GEMMs where they cover this shape (:func:`with_bundled_kernels`; ``measured_gemms=False``
    keeps the roofline's).

    FP8 weights (W8A8) halve the bytes of the linear layers and run their FLOPs at the GPU's FP8 tensor
    peak, at the same MFU as bf16 in the roofline (the measured FP8 GEMMs replace it where the curves
    cover the shape); a profile of this very GPU (a calibrated MBU or MFU) keeps the roofline it
    calibrated; the LM head, attention, activations and
    all-reduces stay bf16. An FP8 KV cache halves the bytes decode attention reads. A GPU without FP8
    tensor cores is refused (:meth:`Precision.unsupported_on`).
    """
    spec = shape.spec
    tp = shape.tp
    peak_tflops = spec.peak_tflops("bfloat16") or spec.peak_tflops("float16")
    if not peak_tflops or not spec.hbm_bandwidth_gbps:
        raise InvalidInput(
            "gpu",
            spec.name,
            "has no tensor-core peak or memory bandwidth in the catalog",
            "Fill bf16_tflops/fp16_tflops and hbm_bandwidth_gbps in gpus.csv",
        )
    refusal = precision.unsupported_on(spec)
    if refusal:
        raise InvalidInput(
            "dtype" if precision.fp8_weights else "kv_cache_dtype",
            precision.weights if precision.fp8_weights else precision.kv_cache,
            refusal,
            "Serve it in bf16 (--dtype bf16 --kv-cache-dtype auto) or choose an Ada, Hopper or Blackwell GPU",
        )
    bw = spec.hbm_bandwidth_gbps * 1e9 * shape.bandwidth_share * eff.mbu
    flops = peak_tflops * 1e12 * shape.compute_share
    linear_flops = (spec.fp8_tflops * 1e12 * shape.compute_share) if precision.fp8_weights else flops
    head = arch.vocab_size * arch.hidden_size
    body = linear_params(arch)
    b = SERVING_DTYPE_BYTES
    comm_step = comm_token = 0.0
    if tp > 1:
        tier = LINKS[shape.link]
        link = link_gbps(spec, shape.link) * 1e9 * eff.link_efficiency
        ring = 2 * (tp - 1) / tp
        comm_step = 2 * arch.num_layers * tier.latency_s
        comm_token = 2 * arch.num_layers * ring * arch.hidden_size * b / link
    slow = SHARED_OVERHEAD if shape.shared else 1.0
    attn_flops_per_pair = 4 * arch.num_layers * arch.num_attention_heads * arch.head_dim / tp
    model = StepTimeModel(
        per_token_s=activation_bytes_per_token(arch, tp) / bw * slow,
        fixed_s=eff.step_overhead_s * slow,
        cpu_step_s=eff.cpu_step_s * slow,
        per_seq_s=eff.seq_overhead_s * slow,
        weights_s=(decode_weight_bytes(arch, precision) / tp / bw + gemm_kernels(arch) * eff.gemm_latency_s)
        * slow,
        gemm_s_per_token=2 * body / tp / (linear_flops * eff.mfu) * slow,
        head_s_per_sample=2 * head / tp / (flops * eff.mfu) * slow,
        kv_s_per_token=kv_bytes_per_token_per_gpu(arch, tp, precision.kv_bytes) / bw * slow,
        attn_s_per_pair=attn_flops_per_pair / (flops * eff.attention_mfu) * slow,
        comm_s_per_step=comm_step * slow,
        comm_s_per_token=comm_token * slow,
        request_overhead_s=eff.request_overhead_s,
        source=f"roofline of {spec.name} × TP{tp} ({shape.link})"
        + ("" if precision == BF16 else f", {precision.label}"),
    )
    return (
        with_bundled_kernels(model, arch, shape, precision)
        if measured_gemms and not calibrated(eff)
        else model
    )


# 3 µs of the 5 kernels in step_overhead_s_per_layer (AIConfigurator 0.12.0 mem_empirical_constant_latency)
CLASS_ATTENTION_KERNEL_S = 3e-6
PROFILE_SOURCE = "profile on "  # how choose_efficiencies names an efficiency a same-GPU profile measured


def calibrated(eff: Efficiencies) -> bool:
    """Whether a profile of this very GPU measured the MBU or MFU: the user's own measurement then prices
    the linear layers, not the bundled curves."""
    return any(str(eff.sources.get(k, "")).startswith(PROFILE_SOURCE) for k in ("mbu", "mfu"))


def with_bundled_kernels(
    model: StepTimeModel, arch: ModelArch, shape: ReplicaHardware, precision: Precision
) -> StepTimeModel:
    """``model`` with the bundled kernels measured on this whole GPU, or on its kernel sibling
    (:func:`~gpuplace.catalog.gemm_curves.kernel_sibling`): linear layers from ``gemm_curves.csv`` (these
    shapes, TP degree and weights), decode attention from ``attention_fits.csv`` (these heads and KV dtype;
    its kernel replaces the class overhead's share). A MIG slice or a time-sliced share keeps the roofline."""
    if shape.shared or shape.bandwidth_share != 1.0 or shape.compute_share != 1.0:
        return model
    curves = gemm_curves_for(shape.spec, arch, shape.tp, "fp8" if precision.fp8_weights else "bfloat16")
    attention = decode_attention_fit(shape.spec, arch, shape.tp, precision.kv_bytes)
    if curves is not None:
        model = replace(
            model,
            gemm_curve=tuple((t, s * arch.num_layers) for t, s in curves.layer),
            head_curve=curves.head,
            source=f"{model.source}, linear layers measured ({curves.source})",
            linear_source=curves.source,
        )
    if attention is not None:
        kv = kv_bytes_per_token_per_gpu(arch, shape.tp, precision.kv_bytes)
        model = replace(
            model,
            kv_s_per_token=kv / (shape.spec.hbm_bandwidth_gbps * 1e9 * attention.fraction),
            per_seq_s=model.per_seq_s + arch.num_layers * attention.per_seq_s,
            fixed_s=max(
                0.0, model.fixed_s + arch.num_layers * (attention.kernel_s - CLASS_ATTENTION_KERNEL_S)
            ),
            source=f"{model.source}, decode attention measured ({attention.source})",
            attention_source=f"{attention.gpu}: {attention.source}",
        )
    return model


def bundled_kernels_notes(model: StepTimeModel, gpu: str) -> tuple[str, ...]:
    """The notes a prediction carries when its linear layers or decode attention are bundled kernels."""
    return tuple(
        f"{gpu}: {what} from measured kernels ({source}; {file})"
        for what, source, file in (
            ("linear layers", model.linear_source, "gemm_curves.csv"),
            ("decode attention", model.attention_source, "attention_fits.csv"),
        )
        if source
    )


# Traffic factor of a CPU engine's measured steps: under Poisson arrivals the engine ran slower than its
# calibration (bursts of identical requests, lone prefills) says, while a probe process beside it saw
# the machine's pace hold. The median over 10 s windows of measured / predicted TPOT was 1.09–1.33 in 9
# of the 10 cells that did not collapse, 0.98 in the tenth (docs/benchmarks/fidelity.md, 2026-12-01).
# A factor k on the step time and the work per arriving request, scored against three recorded fidelity
# runs (48 figures each; goal ±15% at p50, ±25% at p99): k = 1 → 15, 11, 13 within goal; 1.1 → 23, 20,
# 22; 1.2 → 29, 19, 25; 1.25 → 26, 23, 23. Chosen on two runs, each third run held out scored 26, 19
# and 23 (against 15, 11 and 13 without); 1.2 is the best over the three. A fourth run, measured after
# it was shipped: 24 of 48 with it, 17 without (docs/benchmarks/traffic_factor.md). The cause is not
# known; a GPU engine was never measured, so the factor applies to CPU profiles only.
CPU_TRAFFIC_FACTOR = 1.2


def measured_step_model(
    profile: EngineStepProfile, request_overhead_s: float = 0.0, traffic_factor: float | None = None
) -> StepTimeModel:
    """The step-time model of the engine and device a step profile measured.

    On a CPU the engine's own overheads dominate and the roofline says little, so the fitted linear
    model is used, plus what the measured decode-only steps show beyond it (``decode_excess_s``: on
    this machine's ``transformers serve`` the step of 2 decodes was 27% above the 1-decode step, and of
    4 only 10% more again, a shape no linear term holds); it is valid only for the device and model it
    was measured with. The steps and the work per arriving request are multiplied by
    ``traffic_factor`` (default: :data:`CPU_TRAFFIC_FACTOR` for a CPU profile, 1 otherwise): what the
    engine's steps cost under a stream of requests beyond what the calibration's bursts measured. Pass
    1.0 for the steps as measured.
    """
    k = (
        traffic_factor
        if traffic_factor is not None
        else (CPU_TRAFFIC_FACTOR if profile.device_kind == "cpu" else 1.0)
    )
    if not (math.isfinite(k) and k > 0):
        raise InvalidInput(
            "traffic_factor", k, "must be a positive number", "1.0 takes the steps as measured"
        )
    factor = f", steps × {k:g} for traffic (CPU_TRAFFIC_FACTOR)" if k != 1.0 else ""
    return StepTimeModel(
        decode_excess_s=tuple(x * k for x in decode_excess(profile)),
        fixed_s=profile.fixed_s * k,
        per_token_s=profile.per_token_s * k,
        per_seq_s=profile.per_seq_s * k,
        kv_s_per_token=profile.per_context_token_s * k,
        attn_s_per_pair=profile.per_pair_s * k,
        request_overhead_s=request_overhead_s if request_overhead_s else profile.request_overhead_s,
        request_work_s=profile.request_work_s * k,
        wake=profile.wake,
        source=f"measured: {profile.engine} on {profile.device_name} ({profile.model}){factor}",
    )


def decode_excess(profile: EngineStepProfile) -> tuple[float, ...]:
    """Per decode count n = 1 … the largest measured, the median of the measured decode-only steps of
    n sequences minus the profile's linear model of them, interpolated between measured counts
    (index n − 1). Empty without decode-only samples."""
    by_n: dict[int, list[float]] = {}
    decodes = [
        s for s in profile.samples if s.prefill_tokens == 0 and not s.first_token and s.decode_seqs > 0
    ]
    # staggered decodes (streams at different phases, as under arrivals) stand for every n from the
    # smallest staggered one up (the largest held beyond); sent-together ones below it (a lone stream is
    # never staggered)
    late = min((s.decode_seqs for s in decodes if s.staggered), default=math.inf)
    for s in decodes:
        if s.staggered or s.decode_seqs < late:
            residual = s.step_s - profile.predict_s(s.decode_seqs, s.decode_seqs, s.context_tokens)
            by_n.setdefault(s.decode_seqs, []).append(residual)
    if not by_n:
        return ()
    ns = sorted(by_n)
    known = [statistics.median(by_n[n]) for n in ns]
    return tuple(float(v) for v in np.interp(np.arange(1, ns[-1] + 1), ns, known))


def measured_fraction(values: list[float], name: str, device: str) -> float:
    """The median of measured MBUs or MFUs (NaN when there are none), refusing one above 1.

    No hardware moves more bytes or FLOPs than its peak: a median above 1 means the bandwidth or peak
    it was divided by was measured low (a probe disturbed by load) or the steps were timed wrong. It
    is an error to re-measure, never a value to clamp.
    """
    finite = [v for v in values if math.isfinite(v) and v > 0]
    value = statistics.median(finite) if finite else math.nan
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


def choose_efficiencies(
    arch: ModelArch,
    shape: ReplicaHardware,
    table: EfficiencyTable,
    profile: LatencyProfile | None = None,
) -> tuple[Efficiencies, tuple[str, ...]]:
    """The efficiencies to price ``shape`` with, and notes saying where they came from.

    A profile calibrates MBU and MFU only when it ran on the same GPU model (a CUDA device whose
    catalog name is ``shape.spec.name``); the other quantities, and everything for any other GPU, come
    from the GPU-class defaults. A CPU profile never calibrates a GPU. A measured MBU or MFU above 1 is
    refused (:class:`InvalidInput`), never clamped.
    """
    defaults = table.for_gpu(shape.spec, arch)
    if profile is None:
        return defaults, (f"{shape.spec.name}: GPU-class default efficiencies ({table.source})",)
    device = profile.device
    if device.kind != "cuda" or device.catalog_gpu != shape.spec.name:
        ran_on = device.name if device.kind == "cuda" else f"the CPU ({device.name})"
        return defaults, (
            f"{shape.spec.name}: the profile ran on {ran_on}, so it does not calibrate this GPU; "
            "GPU-class default efficiencies",
        )
    ok = profile.ok_results
    mbu = measured_fraction([r.mbu for r in ok], "mbu", device.name)
    mfu = measured_fraction([r.mfu for r in ok], "mfu", device.name)
    sources = dict(defaults.sources)
    notes = []
    if math.isfinite(mbu):
        sources["mbu"] = f"{PROFILE_SOURCE}{device.name}: median MBU of {len(ok)} points"
    else:
        mbu = defaults.mbu
        notes.append(f"{shape.spec.name}: the profile has no MBU; class default {mbu:g}")
    if math.isfinite(mfu):
        sources["mfu"] = f"{PROFILE_SOURCE}{device.name}: median MFU of {len(ok)} points"
    else:
        mfu = defaults.mfu
        notes.append(f"{shape.spec.name}: the profile has no MFU; class default {mfu:g}")
    # the profile's MBU is the weights' bytes over its whole decode step, the GEMM kernels' fixed latency
    # included: adding the class's latency per kernel on top would count it twice
    sources["gemm_latency_s"] = f"0: in the {PROFILE_SOURCE}{device.name}'s MBU (its decode steps include it)"
    eff = replace(defaults, mbu=mbu, mfu=mfu, gemm_latency_s=0.0, sources=sources)
    return eff, (f"{shape.spec.name}: MBU {mbu:.2f} and MFU {mfu:.2f} from the profile", *notes)


def decode_steps_until(now: float, target: float, a: float, b: float, ctx: float, n: int) -> int:
    """Fewest decode steps (each ``a + b·(ctx + n·j)``: ``n`` sequences whose context grows by one token a
    step) after which the clock has reached ``target``; the engine simulation jumps over such spans."""
    gap = target - now
    if gap <= 0:
        return 1
    # k·a + b·(k·ctx + n·k(k−1)/2) ≥ gap, a quadratic in k
    qa = b * n / 2
    qb = a + b * ctx - qa
    if qa <= 0:
        k = math.ceil(gap / qb) if qb > 0 else 1
    else:
        k = math.ceil((-qb + math.sqrt(qb * qb + 4 * qa * gap)) / (2 * qa))
    k = max(k, 1)

    def elapsed(j: int) -> float:
        return j * a + b * (j * ctx + n * j * (j - 1) / 2)

    while k > 1 and elapsed(k - 1) >= gap:
        k -= 1
    while elapsed(k) < gap:
        k += 1
    return k
