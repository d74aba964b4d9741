"""Unit tests of the domain value types: Distribution, ModelArch arithmetic and DeviceInfo JSON."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

import numpy as np
import pytest

from gpuplace.types import PERCENTILES, DeviceInfo, Distribution, ModelArch, NvLinkPeer, percentile

# --- percentile / Distribution ------------------------------------------------------------------


def test_distribution_of_four_values_matches_hand_computation() -> None:
    d = Distribution.of([4, 1, 3, 2])  # unsorted on purpose

    assert d.count == 4
    assert d.mean == 2.5
    assert d.median == 2.5
    assert d.p50 == 2.5
    assert d.min == 1.0
    assert d.max == 4.0
    # numpy 'linear': rank = (n-1) q/100 = 2.97 → 3 + 0.97 × (4 - 3)
    assert d.p99 == pytest.approx(3.97)
    assert d.p95 == pytest.approx(3.85)
    assert d.p90 == pytest.approx(3.7)
    # population std: sqrt((2.25 + 0.25 + 0.25 + 2.25) / 4), not the sample std sqrt(5/3)
    assert d.std == pytest.approx(math.sqrt(1.25))


def test_distribution_agrees_with_numpy_on_an_irregular_sample() -> None:
    samples = [0.013, 0.2, 0.0071, 0.05, 0.05, 1.5, 0.031, 0.09, 0.0112, 0.4, 0.08]
    d = Distribution.of(samples)

    assert d.mean == pytest.approx(np.mean(samples))
    assert d.std == pytest.approx(np.std(samples))
    assert d.median == pytest.approx(np.median(samples))
    for q in PERCENTILES:
        assert getattr(d, f"p{q}") == pytest.approx(np.percentile(samples, q)), q


def test_distribution_of_a_single_value() -> None:
    d = Distribution.of([0.125])

    assert d.count == 1
    assert d.std == 0.0
    for stat in ("mean", "median", "min", "max", "p50", "p90", "p95", "p99"):
        assert getattr(d, stat) == 0.125, stat


def test_distribution_of_nothing_is_count_zero_and_nan() -> None:
    d = Distribution.of(iter(()))

    assert d.count == 0
    for stat in ("mean", "median", "std", "min", "max", "p50", "p90", "p95", "p99"):
        assert math.isnan(getattr(d, stat)), stat


def test_distribution_accepts_a_generator_and_ints() -> None:
    d = Distribution.of(x for x in (1, 3))

    assert d.count == 2
    assert d.mean == 2.0
    assert isinstance(d.mean, float)
    assert isinstance(d.min, float)


def test_flat_columns_and_from_flat_round_trip() -> None:
    d = Distribution.of([0.01, 0.02, 0.04])
    row = d.flat("tpot")

    assert set(row) == {f"tpot_{f.name}" for f in dataclasses.fields(Distribution)}
    assert row["tpot_count"] == 3.0
    assert isinstance(row["tpot_count"], float)  # uniform dtype for a table column
    assert row["tpot_p50"] == 0.02

    back = Distribution.from_flat(row, "tpot")
    assert back == d
    assert isinstance(back.count, int)


def test_from_flat_reads_only_its_prefix_from_a_wider_row() -> None:
    a = Distribution.of([1.0, 2.0])
    b = Distribution.of([10.0, 20.0, 30.0])
    row = {**a.flat("prefill"), **b.flat("decode_step"), "batch_size": 8}

    assert Distribution.from_flat(row, "prefill") == a
    assert Distribution.from_flat(row, "decode_step") == b


def test_from_flat_survives_json_and_keeps_nan_of_an_empty_distribution() -> None:
    empty = Distribution.of(())
    # pandas/parquet hand counts back as floats; JSON hands NaN back as a new float object
    row = json.loads(json.dumps(empty.flat("e2e")))
    back = Distribution.from_flat(row, "e2e")

    assert back.count == 0
    assert all(math.isnan(v) for k, v in dataclasses.asdict(back).items() if k != "count")


def test_from_flat_names_the_missing_column() -> None:
    row = Distribution.of([1.0]).flat("ttft")
    del row["ttft_p99"]

    with pytest.raises(KeyError, match="ttft_p99"):
        Distribution.from_flat(row, "ttft")


@pytest.mark.parametrize("q", [-1, 100.5, 1000, math.nan])
def test_percentile_outside_0_100_is_an_error(q: float) -> None:
    with pytest.raises(ValueError, match="outside"):
        percentile([1.0, 2.0], q)


def test_percentile_bounds_and_empty() -> None:
    assert percentile([1.0, 2.0, 5.0], 0) == 1.0
    assert percentile([1.0, 2.0, 5.0], 100) == 5.0
    assert percentile([1.0, 2.0, 5.0], 75) == 3.5
    assert math.isnan(percentile([], 50))


# --- ModelArch ----------------------------------------------------------------------------------


def _arch(**overrides: Any) -> ModelArch:
    base = ModelArch(
        name="toy",
        model_type="llama",
        num_layers=3,
        hidden_size=64,
        num_attention_heads=8,
        num_kv_heads=2,
        head_dim=8,
        intermediate_size=128,
        vocab_size=100,
        max_position_embeddings=512,
        tie_word_embeddings=False,
        num_params=50_000,
    )
    return dataclasses.replace(base, **overrides)


def test_kv_bytes_per_token_counts_k_and_v_of_every_layer() -> None:
    arch = _arch()
    # 2 (K, V) × 3 layers × 2 kv heads × 8 head_dim × bytes
    assert arch.kv_bytes_per_token(2) == 2 * 3 * 2 * 8 * 2 == 192
    assert arch.kv_bytes_per_token(4) == 384


def test_kv_bytes_per_token_uses_kv_heads_not_query_heads() -> None:
    gqa = _arch(num_kv_heads=2)
    mha = _arch(num_kv_heads=8)

    assert mha.kv_bytes_per_token(2) == 4 * gqa.kv_bytes_per_token(2)


def test_decode_weight_params_untied_skips_the_input_embedding() -> None:
    arch = _arch(tie_word_embeddings=False)

    assert arch.embedding_params == 100 * 64
    assert arch.decode_weight_params == 50_000 - 6_400


def test_decode_weight_params_tied_reads_the_shared_matrix_once() -> None:
    arch = _arch(tie_word_embeddings=True)

    assert arch.decode_weight_params == 50_000


# --- DeviceInfo ---------------------------------------------------------------------------------


def _gpu_info() -> DeviceInfo:
    return DeviceInfo(
        kind="cuda",
        name="NVIDIA H100 80GB HBM3",
        index=1,
        memory_gib=79.19,
        compute_capability="9.0",
        catalog_gpu="H100-SXM5-80GB",
        mig_mode=False,
        pcie_gen=5,
        pcie_width=16,
        pcie_gen_max=5,
        pcie_width_max=16,
        pci_bus_id="00000000:19:00.0",
        numa_node=0,
        nvlink_peers=(
            NvLinkPeer(link=0, remote_pci_bus_id="00000000:3B:00.0"),
            NvLinkPeer(link=1, remote_pci_bus_id="00000000:4C:00.0"),
        ),
        driver_version="560.35.03",
        cuda_version="12.6",
        torch_version="2.5.1",
        transformers_version="5.0.0",
        topology_source="nvml",
        notes=("first note", "second note"),
    )


def test_device_info_json_round_trip_with_nvlink_peers() -> None:
    info = _gpu_info()
    data = info.to_json_dict()

    assert data["nvlink_peers"] == [
        {"link": 0, "remote_pci_bus_id": "00000000:3B:00.0"},
        {"link": 1, "remote_pci_bus_id": "00000000:4C:00.0"},
    ]
    assert data["notes"] == ["first note", "second note"]

    back = DeviceInfo.from_json_dict(json.loads(json.dumps(data)))
    assert back == info
    assert isinstance(back.nvlink_peers, tuple)
    assert all(isinstance(p, NvLinkPeer) for p in back.nvlink_peers)
    assert isinstance(back.notes, tuple)


def test_device_info_nan_memory_becomes_null_and_back() -> None:
    info = DeviceInfo(kind="cpu", name="Some CPU", memory_gib=float("nan"), cpu_logical_cores=8)
    data = info.to_json_dict()

    assert data["memory_gib"] is None
    text = json.dumps(data, allow_nan=False)  # strict JSON: no NaN token
    back = DeviceInfo.from_json_dict(json.loads(text))

    assert math.isnan(back.memory_gib)
    assert back.kind == "cpu"
    assert back.name == "Some CPU"
    assert back.cpu_logical_cores == 8
    assert back.nvlink_peers == ()
    assert back.notes == ()


def test_device_info_from_json_ignores_unknown_keys_and_fills_defaults() -> None:
    back = DeviceInfo.from_json_dict(
        {
            "kind": "cuda",
            "name": "NVIDIA L4",
            "memory_gib": 22.0,
            "from_a_newer_version": 1,
            "nvlink_peers": None,
        }
    )

    assert back.name == "NVIDIA L4"
    assert back.memory_gib == 22.0
    assert back.nvlink_peers == ()
    assert back.numa_node is None
    assert back.topology_source == ""
