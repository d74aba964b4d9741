"""Scheduler-extender benchmarks (issue: GPU-topology-fit scheduler extender). Writes
docs/benchmarks/extender.{md,json}.

1. Latency of filter + prioritize for one pod over the 1,213 nodes of the Alibaba GPU trace (Weng et al.,
   "Beware of Fragmentation", USENIX ATC'23), through ``gpuplace extender serve --fleet`` as its own
   process on 127.0.0.1, one keep-alive connection: with ``nodeCacheCapable`` (``NodeNames``) and,
   as the baseline, without (full Node objects in every request). Pods are the trace's whole-GPU tasks
   (1–8 GPUs, with their GPU-model constraints); the first request (cold caches) is reported apart.
2. Requests per second on this machine's cores: 4 client threads, each on its own connection, for 10 s.
3. Fleet replay through the real kube-scheduler: the trace's nodes as KWOK nodes, whole-GPU pods from the
   trace (seeded shuffle, repeated until requests reach 100% of GPU capacity; ``gpu_spec`` as required
   node affinity on ``nvidia.com/gpu.product``; CPU and memory requests from the trace) submitted in
   arrival order, three runs: the default scheduler; a scheduler whose ``NodeResourcesFit`` scores
   ``MostAllocated`` over cpu, memory and nvidia.com/gpu; the default profile + the gpuplace extender
   (weight 20, bind verb, FGD mix of all the trace's whole-GPU task shapes). Measured: the share of GPUs left
   unallocated once every pod is decided, the pods that could not be placed, wall time and pods/s.
   Sizing: ``--scale`` (default 0.25: a seeded quarter of the nodes, ~1,550 GPUs, ~1,300 pods per
   run) keeps the three runs within a few minutes on 2 cores; ``--scale 1`` replays the whole fleet
   (registering 1,213 nodes alone takes ~2 minutes here).

Run: ``make bench`` (or ``.venv/bin/python tests/benchmarks/bench_extender.py``); part 3 needs
``make k8s-bins``. ``--skip-replay`` runs parts 1–2 only.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import http.client
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "docs" / "benchmarks"
SHARED = Path(os.environ.get("GPUPLACE_SHARED_DATA", REPO.parent / "shared" / "data"))
ALIBABA = SHARED / "alibaba-gpu-v2023"
NODES_CSV = ALIBABA / "openb_node_list_gpu_node.csv"
PODS_CSV = ALIBABA / "openb_pod_list_default.csv"

from gpuplace import labels as L  # noqa: E402
from gpuplace.extender.config import ExtenderSettings, scheduler_configuration  # noqa: E402
from gpuplace.inventory.alibaba import TraceTask, read_alibaba_nodes, read_alibaba_tasks  # noqa: E402
from gpuplace.planner.fragmentation import MILLI, typical_mix  # noqa: E402
from gpuplace.progress import Progress  # noqa: E402
from gpuplace.testenv.controlplane import free_port  # noqa: E402
from gpuplace.testenv.nodes import node_objects  # noqa: E402
from gpuplace.types import Inventory  # noqa: E402
from tests.support.localsched import start_scheduler  # noqa: E402


def whole_gpu_tasks() -> list[TraceTask]:
    return [t for t in read_alibaba_tasks(PODS_CSV) if t.num_gpu >= 1 and t.gpu_milli == MILLI]


def trace_mix(tasks: list[TraceTask]) -> str:
    # Every shape, not the paper's 95% cut: 1-GPU tasks alone are >95% here, and a mix of only those
    # sees no fragmentation at all (any free GPU serves them).
    mix = typical_mix(((t.num_gpu, MILLI, 0, frozenset()) for t in tasks), popularity_threshold=1.0)
    return ",".join(f"{c.num_gpu}:{c.weight:.4f}" for c in mix)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def pod_body(t: TraceTask, i: int) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "resources": {"limits": {L.GPU_RESOURCE: str(t.num_gpu)}}}]
    }
    annotations = {"gpuplace.io/gpu-models": ",".join(t.gpu_spec)} if t.gpu_spec else {}
    return {"metadata": {"name": f"p{i}", "namespace": "bench", "annotations": annotations}, "spec": spec}


# --- 1 and 2: latency and throughput of the HTTP service ----------------------------------------------
def start_extender(args: list[str], cmd: list[str] | None = None) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    cmd = cmd or [sys.executable, "-m", "gpuplace", "extender", "serve", "--port", str(port), *args]
    if "{port}" in cmd:
        cmd = [str(port) if c == "{port}" else c for c in cmd]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    end = time.monotonic() + 120
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
                if r.status == 200:
                    return proc, port
        except OSError:
            time.sleep(0.2)
    proc.terminate()
    raise RuntimeError("extender did not start")


def call(conn: http.client.HTTPConnection, verb: str, body: bytes) -> Any:
    conn.request("POST", f"/gpuplace/{verb}", body=body, headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    if r.status != 200:
        raise RuntimeError(f"{verb}: {r.status} {data[:200]!r}")
    return json.loads(data)


def round_trips(port: int, bodies: list[bytes]) -> list[float]:
    """Seconds per filter + prioritize pair over one keep-alive connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    samples = []
    for raw in bodies:
        t0 = time.perf_counter()
        call(conn, "filter", raw)
        call(conn, "prioritize", raw)
        samples.append(time.perf_counter() - t0)
    conn.close()
    return samples


def summary(samples: list[float]) -> dict[str, Any]:
    return {
        "requests": len(samples),
        "p50_ms": pct(samples, 50) * 1e3,
        "p99_ms": pct(samples, 99) * 1e3,
        "mean_ms": statistics.fmean(samples) * 1e3,
    }


def baseline_vs_extender(
    names: list[str], tasks: list[TraceTask], n: int, extender_port: int
) -> dict[str, Any]:
    """The bare HTTP round trip and the extender, same bodies, interleaved in blocks so that load from
    other work on the machine falls on both alike."""
    rng = random.Random(2)
    bodies = [
        json.dumps({"Pod": pod_body(rng.choice(tasks), i), "NodeNames": names}).encode() for i in range(n)
    ]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(names, f)
    stub = [sys.executable, str(Path(__file__).with_name("http_baseline.py")), "{port}", f.name]
    proc, port = start_extender([], stub)
    try:
        # Every request shape once on both first: a new shape's cold cost is reported apart (above).
        round_trips(port, bodies)
        round_trips(extender_port, bodies)
        base: list[float] = []
        ext: list[float] = []
        for start in range(0, n, 50):
            block = bodies[start : start + 50]
            base += round_trips(port, block)
            ext += round_trips(extender_port, block)
    finally:
        proc.terminate()
        proc.wait(10)
        os.unlink(f.name)
    return {"baseline": summary(base), "extender": summary(ext)}


def one_node_changed(names: list[str], tasks: list[TraceTask], n: int) -> dict[str, Any]:
    """In process, no HTTP: filter + prioritize when one node's pods changed since the last pod (as after
    each bind), so one fit per request is computed again and the cached answers are void."""
    from gpuplace.extender.run import ServeOptions, build
    from gpuplace.extender.state import PodGpus

    service, _ = build(ServeOptions(fleet=str(NODES_CSV)))
    gc.collect()
    gc.freeze()  # as `extender serve` does once synced
    rng = random.Random(3)
    bodies = [
        json.dumps({"Pod": pod_body(rng.choice(tasks), i), "NodeNames": names}).encode() for i in range(n)
    ]
    for raw in bodies:  # every request shape seen once: the cold cost is measured apart
        service.respond("filter", raw)
    samples = []
    for i, raw in enumerate(bodies):
        node = names[rng.randrange(len(names))]
        service.state.put_pod(f"churn/{i}", PodGpus(node, {L.GPU_RESOURCE: 0}))
        t0 = time.perf_counter()
        service.respond("filter", raw)
        service.respond("prioritize", raw)
        samples.append(time.perf_counter() - t0)
    return summary(samples)


def latency(
    inv: Inventory, tasks: list[TraceTask], n_cache: int, n_full: int, progress: Progress
) -> dict[str, Any]:
    proc, port = start_extender(["--fleet", str(NODES_CSV)])
    try:
        names = [n.name for n in inv.nodes]
        objs = node_objects(inv)
        for i, o in enumerate(
            objs
        ):  # as the API serves them: the extender re-reads a node only when this changes
            o["metadata"]["resourceVersion"] = str(i + 1)
        rng = random.Random(1)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        out: dict[str, Any] = {}
        for mode, n in (("node_cache", n_cache), ("full_nodes", n_full)):
            samples: list[float] = []
            cold = 0.0
            for i in range(n + 1):
                t = rng.choice(tasks)
                body = {"Pod": pod_body(t, i)}
                body.update({"NodeNames": names} if mode == "node_cache" else {"Nodes": {"items": objs}})
                raw = json.dumps(body).encode()
                t0 = time.perf_counter()
                call(conn, "filter", raw)
                call(conn, "prioritize", raw)
                dt = time.perf_counter() - t0
                if i == 0:
                    cold = dt
                else:
                    samples.append(dt)
            out[mode] = {
                "requests": n,
                "cold_ms": cold * 1e3,
                "p50_ms": pct(samples, 50) * 1e3,
                "p99_ms": pct(samples, 99) * 1e3,
                "mean_ms": statistics.fmean(samples) * 1e3,
            }
            progress.advance(f"{mode}: p50 {out[mode]['p50_ms']:.1f} ms, p99 {out[mode]['p99_ms']:.1f} ms")
        out["versus_http"] = baseline_vs_extender(names, tasks, n_cache, port)
        progress.advance(
            f"bare HTTP p99 {out['versus_http']['baseline']['p99_ms']:.1f} ms, "
            f"extender p99 {out['versus_http']['extender']['p99_ms']:.1f} ms"
        )
        out["one_node_changed"] = one_node_changed(names, tasks, n_cache)
        out["rps"] = throughput(port, names, tasks)
        progress.advance(f"{out['rps']['requests_per_s']:.0f} requests/s")
        return out
    finally:
        proc.terminate()
        proc.wait(10)


def throughput(
    port: int, names: list[str], tasks: list[TraceTask], threads: int = 4, seconds: float = 10.0
) -> dict[str, Any]:
    bodies = [
        json.dumps({"Pod": pod_body(t, i), "NodeNames": names}).encode() for i, t in enumerate(tasks[:200])
    ]
    counts = [0] * threads
    stop = time.monotonic() + seconds

    def worker(k: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        i = k
        while time.monotonic() < stop:
            call(conn, "filter" if i % 2 else "prioritize", bodies[i % len(bodies)])
            counts[k] += 1
            i += 1

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return {
        "threads": threads,
        "seconds": seconds,
        "requests": sum(counts),
        "requests_per_s": sum(counts) / seconds,
        "nodes": len(names),
    }


# --- 3: fleet replay through kube-scheduler ----------------------------------------------------------------
def replay_pods(tasks: list[TraceTask], capacity: int, scheduler: str, seed: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    pods: list[dict[str, Any]] = []
    requested = 0
    order: list[TraceTask] = []
    while requested < capacity:
        if not order:
            order = list(tasks)
            rng.shuffle(order)
        t = order.pop()
        requested += t.num_gpu
        res = {L.GPU_RESOURCE: str(t.num_gpu), "cpu": f"{t.cpu_milli}m", "memory": f"{t.memory_mib}Mi"}
        spec: dict[str, Any] = {
            "schedulerName": scheduler,
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": "c", "image": "x", "resources": {"limits": res, "requests": res}}],
        }
        if t.gpu_spec:
            term = {"matchExpressions": [{"key": L.PRODUCT, "operator": "In", "values": list(t.gpu_spec)}]}
            spec["affinity"] = {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
                }
            }
        pods.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"t{len(pods):05d}", "labels": {"bench": "extender"}},
                "spec": spec,
            }
        )
    return pods


def run_policy(
    api: Any, name: str, pods: list[dict[str, Any]], capacity: int, progress: Progress
) -> dict[str, Any]:
    from gpuplace.k8s.retry import Deadline
    from gpuplace.k8s.rollout import wait_until_scheduled_or_unschedulable

    ns = f"replay-{name}"
    api.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    api.apply({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}, ns)
    t0 = time.monotonic()
    # One creator keeps arrival order; the scheduler's queue is FIFO for equal priority.
    for p in pods:
        api.create(p, ns)
    create_s = time.monotonic() - t0
    pending = wait_until_scheduled_or_unschedulable(api, ns, deadline=Deadline(1800), interval_s=0.5)
    wall_s = time.monotonic() - t0
    items = api.list("v1", "Pod", ns)
    bound_gpus = sum(
        int(p["spec"]["containers"][0]["resources"]["requests"][L.GPU_RESOURCE])
        for p in items
        if p["spec"].get("nodeName")
    )
    result = {
        "pods": len(pods),
        "unplaced_pods": len(pending),
        "unplaced_gpus_requested": sum(
            int(p["spec"]["containers"][0]["resources"]["requests"][L.GPU_RESOURCE]) for p in pending
        ),
        "allocated_gpus": bound_gpus,
        "unallocated_share": (capacity - bound_gpus) / capacity,
        "create_s": create_s,
        "wall_s": wall_s,
        "pods_per_s": len(pods) / wall_s,
    }
    progress.advance(
        f"{name}: {result['unallocated_share']:.1%} unallocated, {len(pending)} unplaced, {wall_s:.0f} s"
    )
    # Free the GPUs for the next run: force-delete (KWOK pods have no kubelet to wait for).
    api.request(
        "DELETE",
        f"/api/v1/namespaces/{ns}/pods",
        action="delete replay pods",
        query={"gracePeriodSeconds": 0},
    )
    while api.list("v1", "Pod", ns):
        time.sleep(0.5)
    return result


def replay(inv: Inventory, tasks: list[TraceTask], scale: float, progress: Progress) -> dict[str, Any]:
    from gpuplace.k8s import Api, connect
    from gpuplace.testenv import add_fleet, up

    rng = random.Random(0)
    keep = sorted(rng.sample(range(len(inv.nodes)), max(1, round(scale * len(inv.nodes)))))
    fleet = dataclasses.replace(inv, nodes=tuple(inv.nodes[i] for i in keep))
    capacity = sum(len(n.gpus) for n in fleet.nodes)
    work = Path(tempfile.mkdtemp(prefix="bench-extender-"))
    cp = up(None, state_dir=work / "cp", timeout_s=180)
    extender = None
    try:
        t0 = time.monotonic()
        add_fleet(cp, fleet, timeout_s=900)
        register_s = time.monotonic() - t0
        progress.advance(f"{len(fleet.nodes)} nodes registered in {register_s:.0f} s")
        api = Api(connect(cp.kubeconfig))
        runs: dict[str, Any] = {}
        runs["default"] = run_policy(
            api, "default", replay_pods(tasks, capacity, "default-scheduler"), capacity, progress
        )
        most = {
            "pluginConfig": [
                {
                    "name": "NodeResourcesFit",
                    "args": {
                        "scoringStrategy": {
                            "type": "MostAllocated",
                            "resources": [
                                {"name": "cpu", "weight": 1},
                                {"name": "memory", "weight": 1},
                                {"name": L.GPU_RESOURCE, "weight": 1},
                            ],
                        }
                    },
                }
            ]
        }
        conf = {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": "most-allocated", **most}],
        }
        sched = start_scheduler(cp, conf, work, name="most-allocated")
        try:
            runs["most_allocated"] = run_policy(
                api, "most", replay_pods(tasks, capacity, "most-allocated"), capacity, progress
            )
        finally:
            sched.stop()
        mix = trace_mix(tasks)
        extender, port = start_extender(["--kubeconfig", str(cp.kubeconfig), "--task-mix", mix])
        settings = ExtenderSettings(url=f"http://127.0.0.1:{port}/gpuplace", scheduler_name="gpuplace")
        sched = start_scheduler(cp, scheduler_configuration(settings), work, name="gpuplace")
        try:
            runs["gpuplace_extender"] = run_policy(
                api, "gpuplace", replay_pods(tasks, capacity, "gpuplace"), capacity, progress
            )
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=10) as r:
                runs["gpuplace_extender"]["extender_calls"] = json.load(r)["calls"]
        finally:
            sched.stop()
        api.client.close()
        return {
            "scale": scale,
            "nodes": len(fleet.nodes),
            "gpus": capacity,
            "register_nodes_s": register_s,
            "task_mix": mix,
            "runs": runs,
        }
    finally:
        if extender is not None:
            extender.terminate()
            extender.wait(10)
        cp.stop()


def render(r: dict[str, Any]) -> str:
    lat = r["latency"]
    c, f = lat["node_cache"], lat["full_nodes"]
    v, o = lat["versus_http"], lat["one_node_changed"]
    lines = [
        "# Scheduler extender benchmarks",
        "",
        f"Produced by `.venv/bin/python tests/benchmarks/bench_extender.py{r['argv']}` (`make bench`) on {os.cpu_count()} CPUs,",
        "shared with other work, so times are noisy. Raw figures: `extender.json`. Trace: Alibaba",
        'cluster-trace-gpu-v2023 (Weng et al., "Beware of Fragmentation", USENIX ATC\'23).',
        "",
        f"## Filter + prioritize latency, one pod over {lat['rps']['nodes']:,} nodes",
        "",
        "`gpuplace extender serve --fleet <trace node list>` as its own process, one keep-alive connection;",
        "pods are the trace's whole-GPU tasks with their GPU-model constraints.",
        "",
        "| mode | requests | p50 | p99 | cold first request |",
        "| --- | --- | --- | --- | --- |",
        f"| `nodeCacheCapable: true` (NodeNames) | {c['requests']} | {c['p50_ms']:.1f} ms | {c['p99_ms']:.1f} ms | {c['cold_ms']:.0f} ms |",
        f"| baseline: full Node objects | {f['requests']} | {f['p50_ms']:.1f} ms | {f['p99_ms']:.1f} ms | {f['cold_ms']:.0f} ms |",
        "",
        "Against the bare HTTP round trip, same bodies, interleaved in blocks of 50 (the extender's HTTP server",
        "in front of fixed pre-encoded answers of the real size: `tests/benchmarks/http_baseline.py`):",
        "",
        "| | requests | p50 | p99 |",
        "| --- | --- | --- | --- |",
        f"| bare HTTP round trip | {v['baseline']['requests']} | {v['baseline']['p50_ms']:.2f} ms | {v['baseline']['p99_ms']:.2f} ms |",
        f"| gpuplace extender (NodeNames) | {v['extender']['requests']} | {v['extender']['p50_ms']:.2f} ms | {v['extender']['p99_ms']:.2f} ms (goal < 5 ms) |",
        f"| extender − bare HTTP | | {v['extender']['p50_ms'] - v['baseline']['p50_ms']:.2f} ms | ratio p99 {v['extender']['p99_ms'] / v['baseline']['p99_ms']:.2f}× |",
        "",
        "The bare round trip's own p99 is the machine's noise (2 CPUs shared with other work): a p99 goal can",
        "only be read against it, measured in the same run.",
        "",
        f"In process (no HTTP), when one node changed before every pod, as after each bind: filter + prioritize "
        f"p50 {o['p50_ms']:.2f} ms, p99 {o['p99_ms']:.2f} ms over {o['requests']} pods (one fit computed again "
        "per request, cached answers void).",
        "",
        f"Ratio p99 full / node-cache: {f['p99_ms'] / c['p99_ms']:.1f}×. Throughput with node cache: "
        f"**{lat['rps']['requests_per_s']:.0f} requests/s** ({lat['rps']['threads']} client threads in one process, "
        f"{lat['rps']['seconds']:.0f} s, filter and prioritize alternating).",
        "",
        "Each request shape keeps its fits per node, and a change (a bind, a pod, a node update) drops only",
        "that node from them; a NodeNames answer is kept encoded until anything changes, so prioritize after",
        "filter for the same pod (kube-scheduler's cycle) is decoded, validated and looked up, not recomputed.",
        "The cold figure is every node computed once for a new request shape.",
    ]
    rep = r.get("replay")
    if rep:
        runs = rep["runs"]
        base = runs["default"]
        lines += [
            "",
            f"## Fleet replay through kube-scheduler ({rep['nodes']} nodes, {rep['gpus']:,} GPUs, scale {rep['scale']:g})",
            "",
            f"Whole-GPU trace pods in arrival order until requests reach 100% of GPU capacity ({base['pods']:,} pods per run);",
            f"nodes registered in {rep['register_nodes_s']:.0f} s. FGD mix of the extender (from the trace): `{rep['task_mix']}`.",
            "",
            "| scheduler | GPUs unallocated at 100% requested | pods not placed | GPUs those pods asked | wall time | pods/s |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        labels = {
            "default": "default kube-scheduler",
            "most_allocated": "default + `NodeResourcesFit` MostAllocated (cpu, memory, nvidia.com/gpu)",
            "gpuplace_extender": "default + gpuplace extender (weight 20, bind)",
        }
        for key, label in labels.items():
            x = runs[key]
            lines.append(
                f"| {label} | {x['unallocated_share']:.1%} | {x['unplaced_pods']} | {x['unplaced_gpus_requested']} | {x['wall_s']:.0f} s | {x['pods_per_s']:.1f} |"
            )
        ext = runs["gpuplace_extender"]
        lines += [
            "",
            f"Extender calls in its run: {ext.get('extender_calls', {})}. Ratios against the default scheduler in the same run: "
            f"unallocated share {ext['unallocated_share'] / max(base['unallocated_share'], 1e-9):.2f}× (extender), "
            f"{runs['most_allocated']['unallocated_share'] / max(base['unallocated_share'], 1e-9):.2f}× (MostAllocated); "
            f"throughput {ext['pods_per_s'] / base['pods_per_s']:.2f}× (extender).",
            "",
            "Reading it: the default scheduler spreads (LeastAllocated over cpu and memory) and strands GPUs",
            "that multi-GPU pods then cannot use. Packing and FGD both avoid that; on this trace ~98% of whole-GPU",
            "tasks ask for one GPU, so the two choose almost alike, and the extender's view can trail kube-scheduler's",
            "by the binds in flight. Its cost is the HTTP round trips and the bind per pod (the pods/s column).",
        ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--scale", type=float, default=0.25, help="share of the trace's nodes replayed (default 0.25)"
    )
    parser.add_argument(
        "--requests", type=int, default=300, help="latency samples with node cache (default 300)"
    )
    parser.add_argument("--skip-replay", action="store_true")
    args = parser.parse_args()
    for path in (NODES_CSV, PODS_CSV):
        if not path.is_file():
            print(f"missing {path}: the Alibaba trace (see ../shared/data/README.md)", file=sys.stderr)
            return 2
    inv = read_alibaba_nodes(NODES_CSV)
    tasks = whole_gpu_tasks()
    progress = Progress(4 + (0 if args.skip_replay else 4), "bench_extender", min_interval_s=0)
    result: dict[str, Any] = {"argv": "".join(f" {a}" for a in sys.argv[1:])}
    result["latency"] = latency(inv, tasks, args.requests, 30, progress)
    if not args.skip_replay:
        result["replay"] = replay(inv, tasks, args.scale, progress)
    progress.close()
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "extender.json").write_text(json.dumps(result, indent=2))
    (OUT / "extender.md").write_text(render(result))
    print(render(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
