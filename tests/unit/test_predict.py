"""``gpuplace predict`` and :func:`gpuplace.planner.predict.predict`: one shape, one traffic, its headroom,
its error band, the closed loop and ITL in the serving simulation, and every refusal of bad input.

The predictions are the roofline serving model of a catalog GPU (no GPU is needed to compute them);
simulations use 300-600 requests to keep the suite fast.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from gpuplace.catalog import load_gpu_catalog, model_arch_from_config, resolve_model
from gpuplace.catalog.band import PredictionBand, load_prediction_band
from gpuplace.catalog.efficiency import load_efficiency_table
from gpuplace.cli import main
from gpuplace.cli.predict import predict_text
from gpuplace.errors import InvalidInput, UnknownName
from gpuplace.planner.engine_sim import simulate
from gpuplace.planner.predict import Load, headroom, meets, predict, replica_model, shape_spec
from gpuplace.planner.replica import TrafficShape
from gpuplace.steps.predict import parse_arrival
from gpuplace.types.plan import Slo
from gpuplace.workload import LengthDist

CATALOG = load_gpu_catalog()
EFF = load_efficiency_table()
H100 = CATALOG.get("H100-SXM5-80GB")
ARCH = model_arch_from_config("llama-3.1-8b", resolve_model("llama-3.1-8b").config)
KEYS = (
    "ttft_p50_s",
    "ttft_p99_s",
    "tpot_p50_s",
    "tpot_p99_s",
    "itl_p50_s",
    "e2e_p50_s",
    "requests_per_s",
    "output_tokens_per_s",
    "stable",
)
BASE = ["predict", "--model", "llama-3.1-8b", "--gpu", "H100-SXM5-80GB", "--tp", "1"]
FIXED = ["--prompt-tokens", "1024", "--output-tokens", "128", "--requests", "400"]


def traffic(prompt: int = 1024, output: int = 128, n: int = 400) -> TrafficShape:
    return TrafficShape(LengthDist("fixed", prompt), LengthDist("fixed", output), requests=n)


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


def test_issue_command_prints_the_keys(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(capsys, *BASE, "--concurrency", "8", *FIXED, "--json")
    for key in KEYS:
        assert key in out, key
    assert out["stable"] is True
    assert out["load_kind"] == "concurrency"
    # 8 users, each waiting for its own request: throughput is 8 / E2E (Little's law, closed loop)
    assert out["requests_per_s"] == pytest.approx(8 / out["e2e_p50_s"], rel=0.05)  # type: ignore[operator]
    assert out["output_tokens_per_s"] == pytest.approx(128 * out["requests_per_s"], rel=0.01)  # type: ignore[operator]


def test_fp8_with_an_slo_prints_max_rate(capsys: pytest.CaptureFixture[str]) -> None:
    out = run_json(
        capsys, *BASE, "--concurrency", "8", *FIXED, "--dtype", "fp8", "--slo-tpot-ms", "50",
        "--slo-ttft-ms", "2000", "--json",
    )  # fmt: skip
    assert out["dtype"] == "fp8"
    assert isinstance(out["max_rate_rps"], float) and out["max_rate_rps"] > 0
    assert isinstance(out["max_concurrency"], int) and out["max_concurrency"] >= 8


def test_text_output_names_the_metrics(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BASE, "--rate", "2", *FIXED]) == 0
    text = capsys.readouterr().out
    for word in ("TTFT", "TPOT", "ITL", "E2E", "requests/s", "output tokens/s"):
        assert word in text


def test_headroom_is_the_edge_of_the_slo() -> None:
    """The highest concurrency meets the SLO and one more user does not; the highest rate meets it and
    5% more does not (the bisection's resolution is far finer)."""
    replica, _ = replica_model(ARCH, shape_spec(ARCH, H100), traffic(n=300), EFF)
    slo = Slo(ttft_p99_s=0.5, tpot_p99_s=0.02)
    room = headroom(replica, slo)
    assert room.max_concurrency is not None and room.max_rate_rps is not None
    assert meets(replica.at_concurrency(room.max_concurrency), slo)
    assert not meets(replica.at_concurrency(room.max_concurrency + 1), slo)
    assert meets(replica.at_rate(room.max_rate_rps), slo)
    assert not meets(replica.at_rate(room.max_rate_rps * 1.05), slo)
    assert room.rate_points and room.concurrency_points


def test_a_concurrency_search_met_at_its_cap_stops_there() -> None:
    """An SLO so loose that every concurrency meets it: the doubling passes the 4,096-user cap and the
    bisection must not ask for more users than the simulation accepts (it did: 6,144, an error)."""
    from gpuplace.planner.predict import MAX_CONCURRENCY

    replica, _ = replica_model(ARCH, shape_spec(ARCH, H100), traffic(64, 4, 60), EFF)
    room = headroom(replica, Slo(ttft_p99_s=1e6, tpot_p99_s=1e6), rate_steps=2)
    assert room.max_concurrency == MAX_CONCURRENCY
    assert max(p.load.value for p in room.concurrency_points) == MAX_CONCURRENCY
    assert any(f"concurrency search's top ({MAX_CONCURRENCY} users)" in n for n in room.notes)


def test_an_slo_no_load_meets_says_so_with_the_lightest_load() -> None:
    replica, _ = replica_model(ARCH, shape_spec(ARCH, H100), traffic(n=300), EFF)
    room = headroom(replica, Slo(tpot_p99_s=0.0001))
    assert room.max_rate_rps is None and room.max_concurrency is None
    (note,) = room.notes
    assert "no load meets p99 TPOT ≤ 0.1 ms" in note and "lightest load" in note
    light = replica.at_concurrency(1).tpot.p99 * 1e3
    assert f"p99 TPOT {light:.2f} ms" in note


def test_closed_loop_never_runs_more_than_its_users() -> None:
    replica, _ = replica_model(ARCH, shape_spec(ARCH, H100), traffic(512, 64, 500), EFF)
    for users in (1, 4, 32):
        pred = replica.at_concurrency(users)
        assert pred.max_running <= users
        assert pred.throughput_rps == pytest.approx(users / pred.e2e.mean, rel=0.1)
    # more users, more throughput and longer TTFT
    one, many = replica.at_concurrency(1), replica.at_concurrency(32)
    assert many.throughput_rps > 4 * one.throughput_rps
    assert many.ttft.p50 > one.ttft.p50


def test_itl_is_the_step_between_tokens() -> None:
    """One user at a time: every gap between two tokens is one decode step, so ITL = TPOT; under a
    stream of arrivals prefills join decode steps and ITL's p99 rises above its p50."""
    replica, _ = replica_model(ARCH, shape_spec(ARCH, H100), traffic(1024, 128, 400), EFF)
    alone = replica.at_concurrency(1)
    assert alone.itl.p50 == pytest.approx(alone.tpot.p50, rel=0.02)
    busy = replica.at_rate(20)
    assert busy.itl.p99 > 1.5 * busy.itl.p50
    engine = replica.engine
    direct = simulate(traffic(1024, 128, 400).at_rate(20), engine, replica.model)
    assert direct.itl == busy.itl


def test_weighted_distribution_on_hand_made_steps() -> None:
    """Two steps of 1 ms and 2 ms: equal weights put p50 between them; a 1 ms step decoding 3 sequences
    weighs three gaps, so the mean is 1.25 ms and p50 interpolates between the shares' midpoints."""
    from gpuplace.types import Distribution

    even = Distribution.weighted([(0.001, 1), (0.002, 1)])
    assert even.p50 == pytest.approx(0.0015) and even.count == 2
    skew = Distribution.weighted([(0.002, 1), (0.001, 3), (math.nan, 5), (0.009, 0)])
    assert skew.count == 4 and skew.mean == pytest.approx(0.00125)
    assert skew.p50 == pytest.approx(0.00125) and skew.p99 == 0.002 and skew.min == 0.001
    assert Distribution.weighted([]).count == 0


def test_trace_lengths_drive_predict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n0,100,20\n1,3000,20\n2,100,20\n")
    out = run_json(capsys, *BASE, "--rate", "1", "--trace", str(trace), "--requests", "300", "--json")
    assert "trace's length mix (3 rows" in str(out["traffic"])
    assert out["stable"] is True


def test_trace_missing_a_column_names_it_and_the_layout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("TIMESTAMP,ContextTokens\n0,100\n")
    assert main([*BASE, "--rate", "1", "--trace", str(trace)]) != 0
    err = capsys.readouterr().err
    assert "has no output_tokens column" in err and "GeneratedTokens" in err
    assert "TIMESTAMP,ContextTokens,GeneratedTokens" in err


def plan_with_trace(trace: Path, out: Path) -> list[str]:
    return ["plan", "--model", "llama-3.1-8b", "--inventory", "h100-nvlink", "--slo-tpot-ms", "50",
            "--slo-ttft-ms", "2000", "--rate", "2", "--trace", str(trace), "--out", str(out)]  # fmt: skip


def test_plan_reads_its_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``gpuplace plan --trace`` used to fail before reading the trace (issue 21)."""
    trace = tmp_path / "t.csv"
    trace.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n0,300,40\n1,900,80\n")
    status = main(plan_with_trace(trace, tmp_path / "plan"))
    assert status == 0, capsys.readouterr().err
    assert "chosen:" in capsys.readouterr().out
    assert str(trace) in (tmp_path / "plan" / "plan.json").read_text()


def test_plan_trace_missing_a_column_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("TIMESTAMP,ContextTokens\n0,300\n")
    status = main(plan_with_trace(trace, tmp_path / "plan"))
    err = capsys.readouterr().err
    assert status != 0
    assert "no output_tokens column" in err and "GeneratedTokens" in err and "was not read" not in err
    assert not (tmp_path / "plan").exists()


def test_unknown_gpu_gets_did_you_mean(capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["predict", "--model", "llama-3.1-8b", "--gpu", "H100-SXM5-80G", "--rate", "1"])
    assert status != 0
    assert "Did you mean 'H100-SXM5-80GB'" in capsys.readouterr().err


def test_tp_that_does_not_split_the_heads_is_refused() -> None:
    with pytest.raises(InvalidInput, match=r"32 attention heads and 8 KV heads.*TP=3.*--tp 1, 2, 4, 8"):
        shape_spec(ARCH, H100, tp=3)


def test_tp_beyond_one_nvlink_domain_is_refused() -> None:
    with pytest.raises(InvalidInput, match="exceeds the 8 GPUs of one H100-SXM5-80GB NVLink domain"):
        shape_spec(ARCH, H100, tp=16)


def test_weights_that_do_not_fit_say_by_how_much() -> None:
    big = model_arch_from_config("llama-3.1-70b", resolve_model("llama-3.1-70b").config)
    with pytest.raises(InvalidInput, match=r"does not fit L4-24GB x TP1: 131\.\d GiB of weights.*GiB short"):
        replica_model(big, shape_spec(big, CATALOG.get("L4-24GB")), traffic(), EFF)


@pytest.mark.parametrize("flags", [["--rate", "1", "--concurrency", "2"], []])
def test_rate_and_concurrency_exactly_one(flags: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*BASE, *flags]) != 0
    err = capsys.readouterr().err
    assert "rate/concurrency" in err and "--rate R" in err


def test_bad_mig_profile_and_share_are_refused() -> None:
    with pytest.raises(InvalidInput, match="is not a MIG profile of H100-SXM5-80GB"):
        shape_spec(ARCH, H100, mig_profile="9g.99gb")
    with pytest.raises(InvalidInput, match="share"):
        shape_spec(ARCH, H100, share=1.5)
    with pytest.raises(UnknownName):
        CATALOG.get("B9000")


def test_mig_and_share_shapes_are_slower_than_the_whole_gpu() -> None:
    load, t = Load(concurrency=1), traffic(512, 64, 300)
    whole = predict(ARCH, shape_spec(ARCH, H100), load, t, EFF)
    mig = predict(ARCH, shape_spec(ARCH, H100, mig_profile="3g.40gb"), load, t, EFF)
    half = predict(ARCH, shape_spec(ARCH, H100, share=0.5), load, t, EFF)
    assert mig.serving.tpot.p50 > 1.5 * whole.serving.tpot.p50
    assert half.serving.tpot.p50 > 1.5 * whole.serving.tpot.p50
    assert mig.shape == "H100-SXM5-80GB MIG 3g.40gb"


def test_arrival_forms() -> None:
    assert parse_arrival("poisson") == ("poisson", 1.0)
    assert parse_arrival("gamma:2") == ("gamma", 0.25)
    for bad in ("gamma", "gamma:0", "weibull:1"):
        with pytest.raises(InvalidInput, match="arrival"):
            parse_arrival(bad)


def _band(tmp_path: Path) -> PredictionBand:
    rows = ["gpu_class,metric,regime,low,high,nominal,rows,sources,source"]
    for regime, (low, high) in {"light": (0.9, 1.2), "heavy": (0.8, 1.6), "saturated": (0.5, 3.0)}.items():
        rows += [f"hopper,{m},{regime},{low},{high},0.8,2 3 4,a b,test" for m in ("ttft_p50", "tpot_p50")]
    (tmp_path / "band.csv").write_text("\n".join(rows) + "\n")
    return load_prediction_band(tmp_path / "band.csv")


def test_a_prediction_carries_the_band_of_its_load_regime(tmp_path: Path) -> None:
    """The band is the one of the prediction's regime (its load ÷ the fluid capacity), and the JSON says
    which; the shipped band's edges are 80% intervals of its class or borrowed, each said so."""
    band = _band(tmp_path)
    shape = shape_spec(ARCH, H100)
    light = predict(ARCH, shape, Load(rate_rps=1), traffic(n=300), EFF, band=band)
    assert light.regime == "light" and 0 < light.load_share < 0.3
    assert {(e.metric, e.regime, e.high) for e in light.band} == {
        ("ttft_p50", "light", 1.2),
        ("tpot_p50", "light", 1.2),
    }
    capacity = replica_model(ARCH, shape, traffic(n=300), EFF)[0].capacity_rps
    heavy = predict(ARCH, shape, Load(rate_rps=0.5 * capacity), traffic(n=300), EFF, band=band)
    assert heavy.regime == "heavy" and {e.high for e in heavy.band} == {1.6}
    js = heavy.to_json_dict()
    assert js["regime"] == "heavy" and js["band"]["tpot_p50"]["high"] == 1.6
    shipped = predict(ARCH, shape, Load(rate_rps=1), traffic(n=300), EFF, band=load_prediction_band())
    for edge in shipped.band:
        assert edge.regime == shipped.regime and edge.nominal == 0.8 and len(edge.sources) >= 2


def test_the_headroom_is_a_range_judged_at_the_bands_edges(tmp_path: Path) -> None:
    """With a band, the highest rate is searched again with the SLO judged at the slow edge (measured =
    1.6 × predicted at heavy load) and at the fast edge (× 0.8): slow ≤ the prediction's ≤ fast."""
    slo = Slo(ttft_p99_s=2.0, tpot_p99_s=0.015)
    pred = predict(
        ARCH, shape_spec(ARCH, H100), Load(rate_rps=1), traffic(n=300), EFF, slo=slo, band=_band(tmp_path)
    )
    h = pred.headroom
    assert h is not None and h.max_rate_rps is not None and h.band_rate_rps is not None
    slow, fast = h.band_rate_rps
    assert slow is not None and fast is not None and slow < h.max_rate_rps <= fast
    assert {e.regime for e in h.band_edges} <= {"heavy", "saturated"}
    assert "headroom within the band" in predict_text(pred)
    plain = predict(ARCH, shape_spec(ARCH, H100), Load(rate_rps=1), traffic(n=300), EFF, slo=slo)
    assert plain.headroom is not None and plain.headroom.band_rate_rps is None


def test_an_overloaded_prediction_reports_the_saturated_throughput() -> None:
    """Past capacity the replica still completes requests: the prediction reports the rate it completes
    when kept full, not 0 (issue 32)."""
    shape = shape_spec(ARCH, H100)
    capacity = replica_model(ARCH, shape, traffic(n=300), EFF)[0].capacity_rps
    over = predict(ARCH, shape, Load(rate_rps=3 * capacity), traffic(n=300), EFF)
    assert not over.serving.stable and over.regime == "saturated"
    assert over.saturated_rps is not None and 0.3 * capacity < over.requests_per_s <= 1.2 * capacity
    assert over.output_tokens_per_s == pytest.approx(over.requests_per_s * 128, rel=0.05)


def test_predict_imports_without_kfp_mlflow_kubernetes(tmp_path: Path) -> None:
    """The GPU machine has no kfp or mlflow: predict, profile and gpuplace.profiling import without them."""
    script = textwrap.dedent(
        """
        import importlib.abc, sys
        class Block(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("kfp", "mlflow", "kubernetes"):
                    raise ImportError(f"blocked: {name}")
        sys.meta_path.insert(0, Block())
        import gpuplace.profiling, gpuplace.cli.profile, gpuplace.planner.predict
        from gpuplace.cli import main
        sys.exit(main(["predict", "--model", "llama-3.1-8b", "--gpu", "H100-SXM5-80GB", "--rate", "1",
                       "--requests", "200", "--json"]))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert not math.isnan(json.loads(done.stdout)["tpot_p50_s"])


def test_plan_margin_band_sizes_against_the_slow_edge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--margin band`` reads the band's slow edge per GPU class and says so; a margin judges the SLO on
    the prediction × the edge: one H100 meets a p99 TPOT bound of 1.2 × its prediction, not at × 1.5,
    so more GPUs are chosen."""
    from gpuplace.inventory import load_inventory
    from gpuplace.planner import plan_placement
    from gpuplace.steps.plan import band_margins
    from gpuplace.steps.plan_params import plan_request

    argv = ["plan", "--model", "llama-3.1-8b", "--inventory", "h100-nvlink", "--slo-tpot-ms", "50",
            "--slo-ttft-ms", "60000", "--rate", "2", "--margin", "band"]  # fmt: skip
    argv += ["--out", str(tmp_path / "band")]
    assert main(argv) == 0
    ttft_k, tpot_k = band_margins()["hopper"]
    assert f"hopper GPUs judged at TTFT × {ttft_k:.2f}, TPOT × {tpot_k:.2f}" in capsys.readouterr().err
    fleet = load_inventory("h100-nvlink", catalog=CATALOG)
    one = replica_model(ARCH, shape_spec(ARCH, H100), traffic(512, 128, 400), EFF)[0].at_rate(20)
    slo_ms = 1.2 * one.tpot.p99 * 1e3  # one H100 meets it on the prediction, not at × 1.5
    params = {"model": "llama-3.1-8b", "slo_tpot_ms": slo_ms, "slo_ttft_ms": 5000, "rate": 20}
    plain = replace(plan_request(params, CATALOG), simulated_requests=400)
    banded = plan_request(params | {"margin": "band"}, CATALOG)
    banded = replace(banded, latency_margin={"hopper": (1.0, 1.5)}, simulated_requests=400)
    chosen = plan_placement(ARCH, fleet, CATALOG, plain, efficiency=EFF)
    assert (chosen.chosen.tp, chosen.replicas) == (1, 1)
    sized = plan_placement(ARCH, fleet, CATALOG, banded, efficiency=EFF)
    assert sized.chosen.tp * sized.replicas >= 2
    assert any("judged at TTFT × 1.00, TPOT × 1.50" in n for n in sized.notes)
    from gpuplace.planner.evaluate import ratios, rejection_reasons

    slo = Slo(ttft_p99_s=5.0, tpot_p99_s=slo_ms / 1000, rate_rps=20)
    lat, ttft, mem = ratios(one, slo, 0.1, (1.0, 1.5))
    (why,) = rejection_reasons(one, slo, lat, ttft, mem, "single", 1, 0.85, (1.0, 1.5))
    assert f"p99 TPOT {one.tpot.p99 * 1e3:.1f} ms × 1.50 (band edge) = {one.tpot.p99 * 1.5e3:.1f} ms" in why
    with pytest.raises(InvalidInput, match="margin"):
        plan_request(params | {"margin": "wide"}, CATALOG)


def test_plot_draws_the_curve_with_the_slo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--plot writes a PNG of load against p50/p99 latency, with the SLO's bounds in the legend."""
    from gpuplace.report.plots import headroom_figure

    out = tmp_path / "h.png"
    argv = [*BASE, "--rate", "2", *FIXED, "--slo-tpot-ms", "30", "--slo-ttft-ms", "1000", "--plot", str(out)]
    assert main(argv) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    slo = Slo(ttft_p99_s=1.0, tpot_p99_s=0.03)
    fig = headroom_figure(
        "t", slo, [("rate", [(1.0, 0.1, 0.2, 0.01, 0.02), (2.0, 0.2, 0.4, 0.02, 0.03)], 1.5)]
    )
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert {"TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "SLO p99 TTFT", "SLO p99 TPOT"} <= set(labels)
    assert any(label.startswith("highest load within the SLO (1.5)") for label in labels)


def test_a_plan_request_with_a_trace_is_built_before_its_rows_are_read() -> None:
    """``plan``/``run --trace``: the request is built from the flags before the plan step reads the trace
    (it used to refuse there); the planner still refuses a trace whose rows never came, naming the fix."""
    from gpuplace.planner.evaluate import planned_traffic
    from gpuplace.steps.plan_params import plan_request

    params = {"model": "llama-3.1-8b", "slo_tpot_ms": 50, "slo_ttft_ms": 2000, "rate": 2, "trace": "t.csv"}
    request = plan_request(params, CATALOG)
    assert request.traffic.trace == "t.csv" and not request.trace_lengths
    with pytest.raises(InvalidInput, match="its rows' lengths were not given to the planner"):
        planned_traffic(request)
    read = replace(request, trace_lengths=((100, 10), (200, 20)))
    assert planned_traffic(read).lengths == ((100, 10), (200, 20))


def test_arrival_and_precision_flags_reach_the_simulation(capsys: pytest.CaptureFixture[str]) -> None:
    """gamma:3 arrivals (CV 3) queue more than Poisson at the same rate; an FP8 KV cache holds about twice
    the blocks; FP8 weights decode faster (half the bytes read per step)."""
    poisson = run_json(capsys, *BASE, "--rate", "20", *FIXED, "--json")
    bursty = run_json(capsys, *BASE, "--rate", "20", "--arrival", "gamma:3", *FIXED, "--json")
    assert bursty["ttft_p99_s"] > 1.5 * poisson["ttft_p99_s"]  # type: ignore[operator]
    kv8 = run_json(capsys, *BASE, "--rate", "20", *FIXED, "--kv-cache-dtype", "fp8", "--json")
    assert kv8["num_gpu_blocks"] > 1.9 * poisson["num_gpu_blocks"]  # type: ignore[operator]
    fp8 = run_json(capsys, *BASE, "--concurrency", "1", *FIXED, "--dtype", "fp8", "--json")
    bf16 = run_json(capsys, *BASE, "--concurrency", "1", *FIXED, "--json")
    assert fp8["tpot_p50_s"] < 0.8 * bf16["tpot_p50_s"]  # type: ignore[operator]
