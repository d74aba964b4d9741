"""The driver that times vLLM 0.34's own engine-core CPU work per decode step (docs/benchmarks/vllm_cpu.md).

Real parts: vLLM's ``Scheduler``, KV-cache manager and msgpack codec, in vLLM's own venv. The only fake
is the model: no forward pass runs (each step samples one token per request), since the CPU work around
it is what is timed and a GPU is what is missing. No figure of this machine's pace is asserted: the
tests hold the driver to timing what the benchmark says it times, decode-only steps of the asked batch,
and to a cost that grows with the batch by at least a tenth of its proportion (the measured growth is
near-proportional: docs/benchmarks/vllm_cpu.md).
"""

from __future__ import annotations

import pytest

from gpuplace.types.serving import VLLM_VERSION
from tests.benchmarks import bench_vllm_cpu as bench
from tests.support import vllm_scheduler as vs

pytestmark = [pytest.mark.referee, pytest.mark.integration]

BATCHES = (1, 256)


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> dict:
    model_dir = vs.write_model_dir(tmp_path_factory.mktemp("vllm-model"))
    return bench.run_driver(bench.job(model_dir, BATCHES, rounds=1, steps=8))


def test_every_timed_step_decodes_the_whole_batch(result: dict) -> None:
    rows = {r["batch"]: r for r in result["rows"]}
    assert sorted(rows) == list(BATCHES)
    for batch, row in rows.items():
        assert row["steps"] == 8, row
        assert row["decodes"] == batch, f"batch {batch}: a timed step sampled {row['decodes']} tokens"


def test_the_scheduler_s_cost_grows_with_the_batch(result: dict) -> None:
    rows = {r["batch"]: r for r in result["rows"]}
    one, many = (rows[b]["schedule_s"] + rows[b]["update_s"] for b in BATCHES)
    assert one > 0
    assert many > 0.1 * (BATCHES[1] / BATCHES[0]) * one, (one, many)


def test_the_fit_reads_a_cost_per_step_and_per_sequence() -> None:
    rows = [
        {
            "round": 0,
            "batch": b,
            "schedule_s": 1e-4 + 2e-5 * b,
            "update_s": 0.0,
            "encode_s": 1e-6 * b,
            "decode_s": 0.0,
        }
        for b in (1, 32, 128, 1024)
    ]
    fit = bench.fit(rows, pace_s=[2e-3])
    assert fit["scheduler"]["per_step_s"] == pytest.approx(1e-4 + 2e-5)
    assert fit["scheduler"]["per_seq_per_pace"] == pytest.approx(2e-5 / 2e-3)
    assert fit["scheduler"]["per_seq_s"] == pytest.approx(2e-5)
    assert fit["handover"]["per_seq_s"] == pytest.approx(1e-6)


def test_the_driver_times_the_vllm_the_manifests_run(result: dict) -> None:
    assert result["vllm_version"] == VLLM_VERSION
