"""Benchmark of the load tester: generator capacity, arrival accuracy, and the local transformers target.

1. Generator capacity: Poisson load at rising rates against gpuplace's minimal streaming server (in
   its own process, so client and server each get one of the 2 cores); the highest rate whose
   arrival lag (send time − scheduled time) has p99 < 5 ms, and the client-side TTFT overhead (TTFT
   measured against a server that answers at once).
2. Arrival accuracy: Kolmogorov–Smirnov test of inter-arrival times against the exponential, for
   the generated schedule and for the send times actually achieved.
3. The local target: TTFT/TPOT vs concurrency for the ``tiny`` preset under ``transformers serve``.

Writes docs/benchmarks/loadtest.md, loadtest.json and loadtest_tiny.png. Run: ``python tests/benchmarks/bench_loadtest.py``.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs" / "benchmarks"
LAG_BUDGET_S = 0.005
CAPACITY_RATES = (100, 200, 400, 600, 800, 1000, 1200)
POINT_SECONDS = 4.0


def _log(msg: str) -> None:
    print(f"[bench_loadtest] {msg}", file=sys.stderr, flush=True)


def start_test_server(port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.testserver", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).read()
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the test server did not start")


def run_point(url: str, rate: float | None, n: int, *, concurrency: int | None = None, seed: int = 0) -> Any:
    from gpuplace.loadtest.client import EndpointState
    from gpuplace.loadtest.runner import RunOptions, run_load
    from gpuplace.workload import LengthDist, synthetic

    specs = synthetic(n, LengthDist("fixed", 16), LengthDist("fixed", 4), rate=rate, seed=seed)
    prompts = [" hello" * 15] * n
    endpoint = EndpointState(base_url=url, model="test-model")
    return run_load(endpoint, specs, prompts, RunOptions(concurrency=concurrency, show_progress=False))


def capacity(url: str) -> dict[str, Any]:
    from gpuplace.progress import Progress

    points = []
    with Progress(len(CAPACITY_RATES), "generator capacity", min_interval_s=0) as progress:
        for rate in CAPACITY_RATES:
            n = int(rate * POINT_SECONDS)
            result = run_point(url, rate, n, seed=rate)
            r = result.report
            points.append(
                {
                    "rate_rps": rate,
                    "requests": r.requests,
                    "completed": r.completed,
                    "arrival_lag_p50_ms": r.arrival_lag.p50 * 1000,
                    "arrival_lag_p99_ms": r.arrival_lag.p99 * 1000,
                    "ttft_p50_ms": r.ttft.p50 * 1000,
                    "ttft_p99_ms": r.ttft.p99 * 1000,
                    "send_starts": [x.start_s for x in result.records],
                }
            )
            progress.advance(f"{rate} req/s: lag p99 {r.arrival_lag.p99 * 1000:.2f} ms")
    ok = [
        p["rate_rps"]
        for p in points
        if p["arrival_lag_p99_ms"] < LAG_BUDGET_S * 1000 and p["completed"] == p["requests"]
    ]
    return {"points": points, "max_rate_rps": max(ok, default=0)}


def overhead(url: str) -> dict[str, float]:
    """TTFT at 10 req/s against a server that answers at once: what the client and loopback add."""
    r = run_point(url, 10.0, 100, seed=7).report
    return {
        "ttft_p50_ms": r.ttft.p50 * 1000,
        "ttft_p99_ms": r.ttft.p99 * 1000,
        "ttft_mean_ms": r.ttft.mean * 1000,
    }


def ks_tests(achieved_starts: list[float], rate: float) -> dict[str, Any]:
    from scipy import stats

    from gpuplace.workload import arrival_times

    def ks(times: list[float], r: float) -> dict[str, float]:
        gaps = [b - a for a, b in itertools.pairwise(times)]
        res = stats.kstest(gaps, "expon", args=(0, 1 / r))
        return {"n": len(gaps), "D": float(res.statistic), "p_value": float(res.pvalue)}

    return {
        "generated": {"rate_rps": 100.0, **ks(arrival_times(10_000, 100.0, seed=3), 100.0)},
        "achieved": {"rate_rps": rate, **ks(sorted(achieved_starts), rate)},
    }


def local_target() -> dict[str, Any]:
    from gpuplace.deploy.local import deploy_local, teardown_local
    from gpuplace.loadtest.sweep import run_sweep_step
    from gpuplace.steps.loadtest import load_test_config

    with tempfile.TemporaryDirectory() as tmp:
        _log("starting transformers serve (tiny preset, CPU)")
        record = deploy_local("tiny", workdir=Path(tmp), device="cpu", startup_timeout_s=300)
        try:
            config = load_test_config(
                {"prompt_tokens": "64", "output_tokens": "32", "max_requests": 8}, deployment=record
            )
            points = run_sweep_step(config, Path(tmp) / "sweep", concurrencies=(1, 2, 4))
        finally:
            teardown_local(record)
    rows = []
    for label, r in points:
        rows.append(
            {
                "concurrency": int(label.split("-")[1]),
                "requests": r.requests,
                "completed": r.completed,
                "ttft_p50_ms": r.ttft.p50 * 1000,
                "ttft_p99_ms": r.ttft.p99 * 1000,
                "tpot_p50_ms": r.tpot.p50 * 1000,
                "tpot_p99_ms": r.tpot.p99 * 1000,
                "output_tps": r.output_throughput_tps,
                "provisioning_s": record.provisioning().p50,
            }
        )
    return {"rows": rows, "provisioning_s": record.provisioning().p50}


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    c = [r["concurrency"] for r in rows]
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.5))
    a.plot(c, [r["ttft_p50_ms"] for r in rows], "o-", label="p50")
    a.plot(c, [r["ttft_p99_ms"] for r in rows], "s--", label="p99")
    a.set(xlabel="concurrency", ylabel="TTFT (ms)", title="TTFT, tiny on transformers serve (CPU)")
    b.plot(c, [r["tpot_p50_ms"] for r in rows], "o-", label="p50")
    b.plot(c, [r["tpot_p99_ms"] for r in rows], "s--", label="p99")
    b.set(xlabel="concurrency", ylabel="TPOT (ms)", title="TPOT")
    for ax in (a, b):
        ax.set_xticks(c)
        ax.legend()
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    from gpuplace.deploy.local import free_port

    DOCS.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()[0]
    port = free_port()
    server = start_test_server(port)
    url = f"http://127.0.0.1:{port}"
    try:
        _log("warm-up")
        run_point(url, None, 50, concurrency=8)
        cap = capacity(url)
        over = overhead(url)
    finally:
        server.terminate()
        server.wait(10)
    ks_rate = max(cap["max_rate_rps"], CAPACITY_RATES[0])
    achieved = next(p["send_starts"] for p in cap["points"] if p["rate_rps"] == ks_rate)
    ks = ks_tests(achieved, float(ks_rate))
    for p in cap["points"]:
        del p["send_starts"]
    local = local_target()
    plot(local["rows"], DOCS / "loadtest_tiny.png")
    results = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "load_average_1min": [load_before, os.getloadavg()[0]],
        },
        "capacity": cap,
        "client_overhead": over,
        "ks": ks,
        "local_target": local,
    }
    (DOCS / "loadtest.json").write_text(json.dumps(results, indent=2) + "\n")
    (DOCS / "loadtest.md").write_text(render(results))
    _log(f"wrote {DOCS / 'loadtest.md'}")


def render(r: dict[str, Any]) -> str:
    cap, over, ks, local = r["capacity"], r["client_overhead"], r["ks"], r["local_target"]
    base = cap["points"][0]
    cap_rows = "\n".join(
        f"| {p['rate_rps']} | {p['requests']} | {p['completed']} | {p['arrival_lag_p50_ms']:.3f} | {p['arrival_lag_p99_ms']:.3f} "
        f"| {p['arrival_lag_p99_ms'] / base['arrival_lag_p99_ms']:.1f}× | {p['ttft_p50_ms']:.2f} | {p['ttft_p99_ms']:.2f} |"
        for p in cap["points"]
    )
    loc_rows = "\n".join(
        f"| {x['concurrency']} | {x['completed']}/{x['requests']} | {x['ttft_p50_ms']:.0f} | {x['ttft_p99_ms']:.0f} "
        f"| {x['tpot_p50_ms']:.1f} | {x['tpot_p99_ms']:.1f} | {x['output_tps']:.1f} |"
        for x in local["rows"]
    )
    c1 = local["rows"][0]
    verdict = "met" if cap["max_rate_rps"] >= 500 else "missed"
    passed = f"{cap['max_rate_rps']} req/s" if cap["max_rate_rps"] else "none of the rates tried"
    below = list(itertools.takewhile(lambda p: p["arrival_lag_p50_ms"] < LAG_BUDGET_S * 1000, cap["points"]))
    median_note = f"under 5 ms up to {below[-1]['rate_rps']} req/s" if below else "above 5 ms at every rate"
    return f"""# Load tester benchmark

Produced by `python tests/benchmarks/bench_loadtest.py` (`make bench`) on this machine
({r["machine"]["cpus"]} CPUs, Python {r["machine"]["python"]}, 1-minute load average
{r["machine"]["load_average_1min"][0]:.1f} before and {r["machine"]["load_average_1min"][1]:.1f} after the
run); raw figures in [loadtest.json](loadtest.json). The machine is shared: with a load average above
its 2 cores, the generator's process is descheduled for tens of milliseconds at a time, which shows as
bursts of consecutive late requests (consecutive indices, all late by about the same amount); those
bursts set the arrival-lag tail below, and figures move by tens of percent between runs.

## Generator capacity

Poisson arrivals for {POINT_SECONDS:g} s per rate against gpuplace's minimal streaming server
(`python -m tests.support.testserver`, its own process; 16-token prompts, 4 output tokens, no
server delay). Arrival lag = when a request was sent − when the Poisson schedule wanted it; the ratio
column compares each rate's lag p99 with the lowest rate's, measured in the same run. TTFT here is
mostly the client's and the server's own overhead.

| rate (req/s) | sent | completed | lag p50 (ms) | lag p99 (ms) | lag p99 vs {base["rate_rps"]} req/s | TTFT p50 (ms) | TTFT p99 (ms) |
|---|---|---|---|---|---|---|---|
{cap_rows}

**Highest rate with arrival-lag p99 < 5 ms and every request completed: {passed}** (goal ≥ 500
req/s: {verdict} on this run's machine). The lag p50 stays {median_note} (every rate from the lowest
up); points above that are not monotone from run to run here, because a burst of descheduling that
lands in a 4-second point can put thousands of requests behind schedule.

Client-side TTFT overhead (10 req/s against a server that streams its first token at once, 100
requests): p50 {over["ttft_p50_ms"]:.2f} ms, p99 {over["ttft_p99_ms"]:.2f} ms, mean {over["ttft_mean_ms"]:.2f} ms —
an upper bound on what the generator adds to every TTFT it reports (it includes the server's own
time to parse the request and write the first chunk).

## Arrival accuracy (Kolmogorov–Smirnov against the exponential)

| inter-arrival times | rate (req/s) | n | D | p-value |
|---|---|---|---|---|
| generated schedule (seed 3) | {ks["generated"]["rate_rps"]:g} | {ks["generated"]["n"]} | {ks["generated"]["D"]:.4f} | {ks["generated"]["p_value"]:.3f} |
| achieved send times | {ks["achieved"]["rate_rps"]:g} | {ks["achieved"]["n"]} | {ks["achieved"]["D"]:.4f} | {ks["achieved"]["p_value"]:.3f} |

A p-value above 0.05 means the test cannot tell the gaps from exponential ones at that rate (the
Poisson process the run claims). The achieved row uses the sends of the capacity point at the
highest passing rate, so it includes the generator's timing error.

## Local target: `tiny` on `transformers serve` (CPU)

`gpuplace deploy`'s local target (provisioning: {local["provisioning_s"]:.1f} s from start to ready),
64-token prompts, 32 forced output tokens, 8 requests per point, closed loop at each concurrency.
`transformers serve` without continuous batching generates one response at a time, so TTFT grows
with concurrency (requests queue in the server) while TPOT stays near the single-request figure
(TTFT p50 at concurrency 4 is {local["rows"][-1]["ttft_p50_ms"] / c1["ttft_p50_ms"]:.1f}× that at 1).

| concurrency | completed | TTFT p50 (ms) | TTFT p99 (ms) | TPOT p50 (ms) | TPOT p99 (ms) | output tok/s |
|---|---|---|---|---|---|---|
{loc_rows}

![TTFT and TPOT vs concurrency](loadtest_tiny.png)
"""


if __name__ == "__main__":
    main()
