"""The published-measurements benchmark (tests/benchmarks/bench_published.py, issue 21) is reproducible: the
figures committed in docs/benchmarks/published.json come out of today's code for a sample of its rows, the
committed published.md is what its own renderer makes of that json, and the committed error band is the one
the benchmark derives from those results. A change to the serving model that moves a prediction, without
`make bench` rewriting the figures, fails here. Reads ../shared/data (the shared data set beside the
repository, as every benchmark does)."""

from __future__ import annotations

import csv
import importlib
import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "tests" / "benchmarks"


@pytest.fixture(scope="module")
def bench() -> Any:
    sys.path.insert(0, str(BENCH))
    try:
        module = importlib.import_module("bench_published")
    finally:
        sys.path.remove(str(BENCH))
    if not module.MEASUREMENTS.is_file():
        pytest.fail(
            f"no {module.MEASUREMENTS}: the shared data set sits beside the repository", pytrace=False
        )
    return module


@pytest.fixture(scope="module")
def committed() -> dict[str, Any]:
    return json.loads((REPO / "docs" / "benchmarks" / "published.json").read_text())


def test_the_committed_predictions_come_out_of_todays_code(bench: Any, committed: dict[str, Any]) -> None:
    rows = bench.read_rows(bench.MEASUREMENTS)
    assert len(rows) == committed["rows"]
    predicted = [r for r in committed["results"] if r["predicted"] is not None]
    # a few rows of each kind of load: rate, concurrency, burst/offline, as far as the file has them
    sample: dict[str, dict[str, Any]] = {}
    for r in predicted:
        sample.setdefault(r["load"].split()[0], r)
    lines = {r["line"] for r in sample.values()}
    assert len(lines) >= 2, sample
    again, skipped, _ = bench.evaluate([row for row in rows if row.index + 2 in lines])
    assert not skipped
    fresh = {(r["line"], r["metric"]): r for r in again}
    for r in sample.values():
        now = fresh[(r["line"], r["metric"])]
        assert math.isclose(now["predicted"], r["predicted"], rel_tol=1e-6), (r["line"], r["metric"], now, r)


def test_the_committed_report_is_rendered_from_its_json(bench: Any, committed: dict[str, Any]) -> None:
    assert (REPO / "docs" / "benchmarks" / "published.md").read_text() == bench.markdown(committed)


def test_the_committed_band_is_the_one_the_results_give(
    bench: Any, committed: dict[str, Any], tmp_path: Path
) -> None:
    bench.write_band(bench.band_points(committed["results"]), tmp_path / "band.csv")
    with (tmp_path / "band.csv").open() as f:
        derived = list(csv.reader(f))
    with (REPO / "src" / "gpuplace" / "catalog" / "data" / "prediction_band.csv").open() as f:
        shipped = list(csv.reader(f))
    assert derived == shipped


def test_the_committed_coverage_is_the_one_the_results_give(bench: Any, committed: dict[str, Any]) -> None:
    """The held-out coverage published.md reports is the leave-one-publisher-out count of today's band fit
    over the committed figures, not a number written by hand."""
    again = bench.coverage_report(bench.band_points(committed["results"]))
    assert {k: again[k] for k in ("inside", "judged", "no_band")} == {
        k: committed["coverage"][k] for k in ("inside", "judged", "no_band")
    }


def test_rows_of_a_vllm_with_async_scheduling_by_default_simulate_it(bench: Any) -> None:
    """vLLM's ~0.19.1 rows ran with asynchronous scheduling on (its default since early 2026); 0.10.0
    (MLPerf v5.1) and the 2024 installs did not, nor do the rows without a version or of another engine.
    gpuplace's vLLM predictions schedule asynchronously by default, so each row says which it ran."""
    rows = [r for r in bench.read_rows(bench.MEASUREMENTS) if not r.reason]
    assert all(dict(r.engine_changes).get("async_scheduling") in (True, False) for r in rows)
    vllm = [r for r in rows if r.engine == "vLLM"]
    by_async = {r.raw["engine_version"]: dict(r.engine_changes)["async_scheduling"] for r in vllm}
    assert by_async["~0.19.1 (see notes)"] is True
    assert by_async["0.10.0"] is False and by_async["0.6.0"] is False
    assert not any(v for k, v in by_async.items() if "2024" in k or "not recorded" in k)
    assert not any(dict(r.engine_changes)["async_scheduling"] for r in rows if r.engine != "vLLM")


def test_rows_whose_submitter_states_its_engine_flags_are_predicted_with_them(bench: Any) -> None:
    """MLPerf v5.1's vLLM runs of Llama-3.1-8B on one H100 (lines 2 and 3) were run with flags their
    submitter's README states: the server run with a 1,024-token step budget and at most 512 sequences,
    the offline run with an FP8 KV cache, a 4,096-token budget and 1,024 sequences. Predicted on today's
    defaults instead, line 2's headroom came out +6.5% (an 8,192-token budget priced another engine);
    with the stated flags it is -4%. Every other row keeps the defaults of its release."""
    rows = {r.index + 2: r for r in bench.read_rows(bench.MEASUREMENTS) if not r.reason}
    server, offline = dict(rows[2].engine_changes), dict(rows[3].engine_changes)
    assert (server["max_num_batched_tokens"], server["max_num_seqs"], server["block_size"]) == (1024, 512, 16)
    assert rows[2].kv_cache_dtype == "auto" and rows[3].kv_cache_dtype == "fp8"
    assert (offline["max_num_batched_tokens"], offline["max_num_seqs"]) == (4096, 1024)
    assert any("not simulated: --long-prefill-token-threshold 256" in n for n in rows[2].notes)
    stated = {line for line, r in rows.items() if "max_num_batched_tokens" in dict(r.engine_changes)}
    assert stated == {2, 3}
