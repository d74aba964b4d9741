"""The step-time model, the efficiency data file, engine defaults and the calibration rules."""

from __future__ import annotations

import csv
from dataclasses import replace
from pathlib import Path

import pytest

from gpuplace.catalog import load_gpu_catalog, model_arch_from_config, resolve_model
from gpuplace.catalog.efficiency import EFFICIENCY_COLUMNS, QUANTITIES, load_efficiency_table
from gpuplace.catalog.gpus import DATA_DIR
from gpuplace.errors import InvalidInput
from gpuplace.planner.engine import (
    kv_cache_blocks,
    transformers_engine_params,
    vllm_batch_defaults,
    vllm_engine_params,
)
from gpuplace.planner.engine_sim import simulate
from gpuplace.planner.hardware import ReplicaHardware
from gpuplace.planner.replica import ReplicaModel, TrafficShape
from gpuplace.planner.steptime import (
    activation_bytes_per_token,
    causal_pairs,
    choose_efficiencies,
    gemm_kernels,
    kv_bytes_per_token_per_gpu,
    measured_step_model,
    roofline_step_model,
)
from gpuplace.types import DeviceInfo
from gpuplace.types.engine import Efficiencies, EngineStepProfile
from gpuplace.types.workload import LengthDist
from gpuplace.workload import RequestSpec

CATALOG = load_gpu_catalog()
TABLE = load_efficiency_table()
LLAMA8B = model_arch_from_config("llama-3.1-8b", resolve_model("llama-3.1-8b").config)
LLAMA70B = model_arch_from_config("llama-3.1-70b", resolve_model("llama-3.1-70b").config)
H100 = CATALOG.get("H100-SXM5-80GB")
A100 = CATALOG.get("A100-SXM4-80GB")
UNIT = Efficiencies(mbu=1.0, mfu=1.0, attention_mfu=1.0)

# --- the efficiency data file -------------------------------------------------------------------


def test_efficiency_file_schema_every_value_sourced_and_in_range() -> None:
    path = DATA_DIR / "efficiency.csv"
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames or ()) == EFFICIENCY_COLUMNS
        rows = list(reader)
    assert rows
    for row in rows:
        assert row["quantity"] in QUANTITIES, row
        lo, hi = QUANTITIES[row["quantity"]]
        value = float(row["value"])
        assert lo <= value <= hi, row
        if hi == 1.0:  # a fraction of a peak: positive
            assert value > 0, row
        assert len(row["source"]) > 20, row  # a real citation, not a placeholder
    # every quantity has a default, so every GPU of the catalog gets a full set
    assert {r["quantity"] for r in rows if r["gpu_class"] == "default"} == set(QUANTITIES)
    for spec in CATALOG:
        eff = TABLE.for_gpu(spec, LLAMA8B)
        assert 0 < eff.mbu <= 1 and 0 < eff.mfu <= 1
        assert set(eff.sources) >= {"mbu", "mfu", "attention_mfu", "link_efficiency"}


def test_lookup_prefers_the_gpu_row_then_its_architecture_then_default() -> None:
    h100_mbu, cls = TABLE.lookup(H100, "mbu")
    assert cls == "H100-SXM5-80GB" and h100_mbu.value == pytest.approx(0.87)
    assert TABLE.lookup(CATALOG.get("H100-PCIE-80GB"), "mbu")[1] == "hopper"
    assert TABLE.lookup(CATALOG.get("V100-SXM2-16GB"), "mbu")[1] == "default"


def test_per_layer_overheads_scale_with_the_models_depth() -> None:
    e8, e70 = TABLE.for_gpu(H100, LLAMA8B), TABLE.for_gpu(H100, LLAMA70B)
    assert e70.request_overhead_s / e8.request_overhead_s == pytest.approx(80 / 32)
    assert e8.request_overhead_s == pytest.approx(32 * 0.0008)


def _write(path: Path, rows: list[tuple[str, str, str, str]]) -> Path:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(EFFICIENCY_COLUMNS)
        w.writerows(rows)
    return path


@pytest.mark.parametrize(
    ("row", "match"),
    [
        (("default", "mbu", "1.4", "a paper"), "outside"),
        (("default", "mbu", "x", "a paper"), "not a number"),
        (("default", "speed", "0.5", "a paper"), "unknown quantity"),
        (("default", "mbu", "0.5", ""), "source"),
    ],
)
def test_a_bad_efficiency_row_is_refused_with_its_line(
    tmp_path: Path, row: tuple[str, ...], match: str
) -> None:
    good = [
        ("default", q, "0.5" if hi == 1.0 else "0.0", "a paper, table 2") for q, (_, hi) in QUANTITIES.items()
    ]
    path = _write(tmp_path / "e.csv", [*good[1:], row])  # type: ignore[list-item]
    with pytest.raises(InvalidInput, match=match) as e:
        load_efficiency_table(path)
    assert "e.csv" in e.value.field


def test_a_file_without_defaults_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path / "e.csv", [("hopper", "mbu", "0.8", "a paper, table 2")])
    with pytest.raises(InvalidInput, match="default"):
        load_efficiency_table(path)


# --- the step-time model ------------------------------------------------------------------------


def test_decode_of_one_sequence_is_the_weight_read_at_unit_efficiency() -> None:
    model = roofline_step_model(LLAMA8B, ReplicaHardware(H100), UNIT, measured_gemms=False)
    weights = LLAMA8B.decode_weight_params * 2 / 3350e9
    kv = 1000 * LLAMA8B.kv_bytes_per_token(2) / 3350e9
    # per layer: 2 add-RMSNorms (8·4096), rotary on q and k (2·(4096 + 1024)), SiLU-and-mul (3·14336)
    elementwise = 32 * (8 * 4096 + 2 * (4096 + 1024) + 3 * 14336) * 2 / 3350e9

    assert activation_bytes_per_token(LLAMA8B, 1) == 32 * 86016 * 2
    assert model.weights_s == pytest.approx(weights)
    assert model.step_s(1, 1, 1, decode_context=1000) == pytest.approx(weights + kv + elementwise)


def test_every_gemm_kernel_adds_its_fixed_latency_to_the_weight_read() -> None:
    with_latency = replace(UNIT, gemm_latency_s=4e-6)
    model = roofline_step_model(LLAMA8B, ReplicaHardware(H100, tp=8, link="nvlink"), with_latency)

    assert gemm_kernels(LLAMA8B) == 4 * 32 + 1
    assert model.weights_s == pytest.approx(LLAMA8B.decode_weight_params * 2 / 8 / 3350e9 + 129 * 4e-6)


def test_prefill_is_compute_bound_and_counts_causal_attention() -> None:
    model = roofline_step_model(LLAMA8B, ReplicaHardware(H100), UNIT, measured_gemms=False)
    c = 4096
    head = LLAMA8B.vocab_size * LLAMA8B.hidden_size
    body = LLAMA8B.num_params - LLAMA8B.embedding_params - head
    gemm = (2 * body * c + 2 * head) / 989e12
    attention = 4 * 32 * 32 * 128 * causal_pairs(0, c) / 989e12

    elementwise = c * activation_bytes_per_token(LLAMA8B, 1) / 3350e9

    assert gemm > model.weights_s  # compute-bound at 4096 tokens
    assert model.prefill_s(c) == pytest.approx(gemm + attention + elementwise)
    assert causal_pairs(0, 3) == 6 and causal_pairs(2, 2) == 7


def test_tensor_parallel_splits_work_and_adds_all_reduces_by_link() -> None:
    eff = TABLE.for_gpu(H100, LLAMA8B)
    tp1 = roofline_step_model(LLAMA8B, ReplicaHardware(H100), eff)
    nvlink = roofline_step_model(LLAMA8B, ReplicaHardware(H100, tp=2, link="nvlink"), eff)
    numa = roofline_step_model(LLAMA8B, ReplicaHardware(H100, tp=2, link="numa"), eff)

    launches = gemm_kernels(LLAMA8B) * eff.gemm_latency_s  # the same kernels on each GPU
    assert nvlink.weights_s - launches == pytest.approx((tp1.weights_s - launches) / 2)
    assert nvlink.comm_s_per_step == pytest.approx(2 * 32 * 8e-6)  # two all-reduces per layer
    assert tp1.comm_s_per_step == 0
    assert numa.step_s(64, 64, 64) > nvlink.step_s(64, 64, 64)
    # 8 KV heads: per-GPU KV bytes halve up to TP 8, then stay (heads replicated)
    assert kv_bytes_per_token_per_gpu(LLAMA8B, 8) == LLAMA8B.kv_bytes_per_token(2) // 8
    assert kv_bytes_per_token_per_gpu(LLAMA8B, 16) == kv_bytes_per_token_per_gpu(LLAMA8B, 8)


def test_a_slower_gpu_or_a_mig_slice_takes_longer() -> None:
    eff = TABLE.for_gpu(A100, LLAMA8B)
    whole = roofline_step_model(LLAMA8B, ReplicaHardware(A100), eff)
    mig = roofline_step_model(LLAMA8B, ReplicaHardware(A100, bandwidth_share=4 / 8, compute_share=3 / 7), eff)
    h100 = roofline_step_model(LLAMA8B, ReplicaHardware(H100), TABLE.for_gpu(H100, LLAMA8B))

    for tokens in (1, 64, 2048):
        assert mig.step_s(tokens, 1, 1) > whole.step_s(tokens, 1, 1) > h100.step_s(tokens, 1, 1)


def test_measured_step_model_is_the_fitted_line() -> None:
    prof = EngineStepProfile("e", "cpu", "x86", "tiny", 0.004, 2e-5, 2e-4, 1e-7, 1e-9, 0.006)
    model = measured_step_model(prof, traffic_factor=1.0)

    assert model.step_s(8, 8, 8, 300, 0) == pytest.approx(prof.predict_s(8, 8, 300))
    assert model.request_overhead_s == 0.006
    assert model.decode_excess_s == ()  # no decode samples: the line alone
    assert model.wake == () and model.wake_s(1.0) == 0.0  # no wake runs: none
    woken = measured_step_model(replace(prof, wake=((0.1, 0.002),)))
    assert woken.wake_s(0.05) == pytest.approx(0.001)  # the measured wake reaches the simulator


def test_a_cpu_profile_prices_its_steps_and_arrivals_under_traffic_a_gpu_profile_as_measured() -> None:
    """CPU_TRAFFIC_FACTOR: the steps and the work per arriving request, not the per-request overhead
    or the wake (docs/serving-model.md)."""
    from gpuplace.planner.steptime import CPU_TRAFFIC_FACTOR

    prof = EngineStepProfile(
        "e", "cpu", "x86", "tiny", 0.004, 2e-5, 2e-4, 1e-7, 1e-9, 0.006, request_work_s=0.002
    )
    line = prof.predict_s(8, 8, 300)
    cpu = measured_step_model(prof)
    assert CPU_TRAFFIC_FACTOR > 1
    assert cpu.step_s(8, 8, 8, 300, 0) == pytest.approx(CPU_TRAFFIC_FACTOR * line)
    assert cpu.request_work_s == pytest.approx(CPU_TRAFFIC_FACTOR * 0.002)
    assert cpu.request_overhead_s == 0.006 and "CPU_TRAFFIC_FACTOR" in cpu.source
    gpu = measured_step_model(replace(prof, device_kind="cuda"))
    assert gpu.step_s(8, 8, 8, 300, 0) == pytest.approx(line) and gpu.request_work_s == 0.002
    with pytest.raises(InvalidInput, match="traffic_factor"):
        measured_step_model(prof, traffic_factor=0.0)


def test_measured_decode_steps_are_reproduced_where_the_line_misses_them() -> None:
    from gpuplace.types.engine import EngineStepSample

    prof = EngineStepProfile("e", "cpu", "x86", "tiny", 0.003, 0.0, 0.0005, 0.0)
    # measured: 1 decode 3.5 ms (on the line), 2 decodes 4.6 ms (0.6 above), 4 decodes 5.0 ms (0 above)
    samples = (
        EngineStepSample(1, 0, 0, 40, 0, 0.0035),
        EngineStepSample(2, 0, 0, 80, 0, 0.0046),
        EngineStepSample(4, 0, 0, 160, 0, 0.0050),
        EngineStepSample(0, 64, 1, 0, 2080, 0.009, first_token=True),  # a prefill: not a decode step
    )
    model = measured_step_model(replace(prof, samples=samples), traffic_factor=1.0)

    assert model.decode_excess_s == pytest.approx((0.0, 0.0006, 0.0003, 0.0))
    assert model.step_s(2, 2, 2, 80, decodes=2) == pytest.approx(0.0046)
    assert model.step_s(3, 3, 3, 120, decodes=3) == pytest.approx(0.0048)  # interpolated
    assert model.step_s(8, 8, 8, 320, decodes=8) == pytest.approx(0.007)  # beyond: the last excess
    assert model.decode_terms(2)[0] == pytest.approx(0.0046)


# --- which efficiencies: profile or defaults ------------------------------------------------------


def _profile(kind: str, gpu: str, mbu: float, mfu: float):  # type: ignore[no-untyped-def]
    from tests.unit.test_planner import synthetic_profile

    p = synthetic_profile()
    device = DeviceInfo(kind=kind, name="a device", catalog_gpu=gpu)
    results = tuple(replace(r, mbu=mbu, mfu=mfu) for r in p.results)
    return replace(p, device=device, results=results)


def test_a_profile_calibrates_only_the_same_gpu_model() -> None:
    same = _profile("cuda", "H100-SXM5-80GB", 0.62, 0.55)
    eff, notes = choose_efficiencies(LLAMA8B, ReplicaHardware(H100), TABLE, same)
    assert (eff.mbu, eff.mfu) == pytest.approx((0.62, 0.55))
    assert "profile" in eff.sources["mbu"]
    # the GEMMs' fixed latency is inside the profile's MBU, and says so; the rest are the class's
    defaults = TABLE.for_gpu(H100, LLAMA8B)
    assert defaults.gemm_latency_s > 0 and eff.gemm_latency_s == 0.0
    assert "MBU" in eff.sources["gemm_latency_s"] and "profile on" in eff.sources["gemm_latency_s"]
    assert (eff.step_overhead_s, eff.seq_overhead_s, eff.cpu_step_s, eff.link_efficiency) == (
        defaults.step_overhead_s, defaults.seq_overhead_s, defaults.cpu_step_s, defaults.link_efficiency,
    )  # fmt: skip

    other, notes = choose_efficiencies(LLAMA8B, ReplicaHardware(A100), TABLE, same)
    assert other == TABLE.for_gpu(A100, LLAMA8B)
    assert "does not calibrate" in notes[0]


def test_a_cpu_profile_never_calibrates_a_gpu() -> None:
    cpu = _profile("cpu", "", 1.43, 0.13)  # the figures that once priced every H100 step
    eff, notes = choose_efficiencies(LLAMA8B, ReplicaHardware(H100), TABLE, cpu)
    assert eff == TABLE.for_gpu(H100, LLAMA8B)
    assert "CPU" in notes[0] and "does not calibrate" in notes[0]


def test_calibration_refuses_an_mbu_above_one_instead_of_clamping() -> None:
    bad = _profile("cuda", "H100-SXM5-80GB", 1.43, 0.5)
    with pytest.raises(InvalidInput, match="above 1") as e:
        choose_efficiencies(LLAMA8B, ReplicaHardware(H100), TABLE, bad)
    assert e.value.field == "profile.mbu"
    with pytest.raises(InvalidInput, match="MFU"):
        choose_efficiencies(
            LLAMA8B, ReplicaHardware(H100), TABLE, _profile("cuda", "H100-SXM5-80GB", 0.7, 1.2)
        )


# --- engine defaults and KV capacity ------------------------------------------------------------


def test_vllm_batch_defaults_follow_the_device_memory_and_the_a100_exception() -> None:
    h100 = vllm_engine_params(LLAMA8B, H100)
    a100 = vllm_engine_params(LLAMA8B, A100)
    l4 = vllm_engine_params(LLAMA8B, CATALOG.get("L4-24GB"))

    assert (h100.max_num_batched_tokens, h100.max_num_seqs) == (8192, 1024)
    assert (a100.max_num_batched_tokens, a100.max_num_seqs) == (2048, 256)
    assert (l4.max_num_batched_tokens, l4.max_num_seqs) == (2048, 256)
    # vLLM 0.34's tier for 160 GiB and more (B200: 179 GiB), and what a MIG slice of it reports
    b200 = CATALOG.get("B200-SXM-180GB")
    assert vllm_batch_defaults(b200, b200.memory_gib)[:2] == (16384, 1024)
    assert vllm_batch_defaults(b200, 83.8)[:2] == (8192, 1024)
    assert h100.block_size == 64 and h100.gpu_memory_utilization == 1.0 and h100.enable_chunked_prefill
    assert all(h100.sources.get(f) for f in ("max_num_seqs", "block_size", "num_gpu_blocks", "max_model_len"))


def test_vllm_predictions_schedule_asynchronously_as_vllm_serve_does() -> None:
    """vllm serve 0.34 turns asynchronous scheduling on when it is not set (VllmConfig); a vLLM prediction
    simulates it, and the engine's arguments pass it, so the deployed engine schedules as predicted. The
    local target's engine (transformers) schedules in line."""
    h100 = vllm_engine_params(LLAMA8B, H100)
    assert h100.async_scheduling is True and "vLLM" in h100.sources["async_scheduling"]
    assert "--async-scheduling" in h100.to_vllm_args()
    tiny = model_arch_from_config("tiny", resolve_model("tiny").config)
    assert transformers_engine_params(tiny, memory_gib=10.0).async_scheduling is False


def test_asynchronous_scheduling_adds_about_a_step_to_a_loaded_ttft() -> None:
    """An arrival while a step runs is seen by the step after it: at half the replica's capacity the
    p50 TTFT grows by at most about two decode steps and TPOT barely moves (docs/serving-model.md)."""
    eff = TABLE.for_gpu(H100, LLAMA8B)
    model = roofline_step_model(LLAMA8B, ReplicaHardware(H100), eff)
    on = vllm_engine_params(LLAMA8B, H100)
    off = on.with_changes({"async_scheduling": False})
    traffic = TrafficShape(LengthDist("fixed", 1024), LengthDist("fixed", 128), requests=400)
    reqs = traffic.at_rate(0.5 * ReplicaModel(off, model, traffic).capacity_rps)
    a, s = simulate(reqs, on, model), simulate(reqs, off, model)
    assert 0 < a.ttft.p50 - s.ttft.p50 < 2.5 * s.tpot.p50  # a step is about a token's gap
    assert a.tpot.p50 == pytest.approx(s.tpot.p50, rel=0.05)


def test_kv_capacity_is_the_memory_left_after_weights_activations_reserve_and_margin() -> None:
    """vLLM 0.34's extensible KV cache (``measure_kv_cache_bytes``): min(requested, device − margin) − what
    the engine holds − the transient peak, the margin max(1 GiB, 0.75 × the peak)."""
    gib = 2**30
    weights = LLAMA8B.num_params * 2
    activations = 8192 * (2 * 14336 + 4 * 4096) * 2 + 1024 * 128256 * 4
    per_block = 64 * 2 * 32 * 8 * 128 * 2
    for utilization, ceiling in ((1.0, 79.6 * gib - max(gib, 0.75 * activations)), (0.5, 0.5 * 79.6 * gib)):
        budget = kv_cache_blocks(
            LLAMA8B,
            79.6,
            1,
            gpu_memory_utilization=utilization,
            block_size=64,
            max_num_batched_tokens=8192,
            max_num_seqs=1024,
        )
        kv = ceiling - weights - activations - 1.0 * gib
        assert budget.blocks == int(kv // per_block), utilization
    assert vllm_engine_params(LLAMA8B, H100).num_gpu_blocks == int(
        (79.6 * gib - gib - weights - activations - gib) // per_block
    )
    # about 500k tokens of KV cache on one H100 for Llama-3.1-8B (vLLM 0.33 logged about 440k at its 0.92)
    assert 480_000 < vllm_engine_params(LLAMA8B, H100).kv_capacity_tokens < 530_000


def test_max_model_len_is_lowered_to_what_the_cache_holds() -> None:
    tp2 = vllm_engine_params(LLAMA70B, H100, 2)
    assert 0 < tp2.kv_capacity_tokens < LLAMA70B.max_position_embeddings
    assert tp2.max_model_len <= tp2.kv_capacity_tokens
    assert "lowered" in tp2.sources["max_model_len"]
    assert vllm_engine_params(LLAMA8B, H100).max_model_len == LLAMA8B.max_position_embeddings


def test_weights_that_do_not_fit_are_refused() -> None:
    with pytest.raises(InvalidInput, match="num_gpu_blocks"):
        vllm_engine_params(LLAMA70B, H100, 1)


def test_transformers_defaults_on_a_cpu() -> None:
    tiny = model_arch_from_config("tiny", resolve_model("tiny").config)
    eng = transformers_engine_params(tiny, memory_gib=10.0)

    assert eng.block_size == 256 and eng.max_num_batched_tokens == 8192 and eng.max_num_seqs == 1024
    assert transformers_engine_params(tiny, 10.0, num_blocks=40).num_gpu_blocks == 40


def test_a_roofline_replica_serves_one_request_at_its_zero_load_latency() -> None:
    eff = TABLE.for_gpu(H100, LLAMA8B)
    model = roofline_step_model(LLAMA8B, ReplicaHardware(H100), eff)
    eng = vllm_engine_params(LLAMA8B, H100)

    result = simulate([RequestSpec(0, 0.0, 1024, 128)], eng, model, discard_head=0, discard_tail=0)

    assert result.ttft.p50 == pytest.approx(eff.request_overhead_s + model.prefill_s(1024))
    # decode steps of one sequence at context 1025..1151
    expected = sum(model.step_s(1, 1, 1, 1024 + g) for g in range(1, 128)) / 127
    assert result.tpot.p50 == pytest.approx(expected)


def test_decode_steps_until_is_the_fewest_steps_that_reach_the_target() -> None:
    from gpuplace.planner.steptime import decode_steps_until

    assert decode_steps_until(0.0, 3.5, 1.0, 0.0, 0.0, 1) == 4  # constant 1 s steps
    assert decode_steps_until(5.0, 5.0, 1.0, 0.0, 0.0, 1) == 1  # already there: one step still runs
    # steps of 1 + 0.1·(10 + 2j) s: 2, 2.2, 2.4 → 3 steps reach 6.6 s, not 2
    assert decode_steps_until(0.0, 6.6, 1.0, 0.1, 10.0, 2) == 3
    assert decode_steps_until(0.0, 6.61, 1.0, 0.1, 10.0, 2) == 4
