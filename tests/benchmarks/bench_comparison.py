"""Native vs Kubeflow path on the local control plane, measured the same way (issue 14). Writes
docs/benchmarks/comparison.{md,json}.

For each fleet (``h100-nvlink``, ``mixed-a100-h100-l4``) a control plane is started with the fleet's nodes
and DRA devices, the planner plans the ``tiny`` model from a CPU profile made here, and each path is run
``--runs`` times, alternating:

- **native**: ``deploy_plan`` with ``--gpu-api auto`` (DRA claims for the planned devices when the DRA
  driver publishes them, else the device plugin);
- **kubeflow**: the ``serve-and-load-test`` task's pod built from the checked-in compiled pipeline with the
  plan's outputs resolved, as KFP 2.17's driver builds it (:mod:`gpuplace.k8s.kfp_task`).

Both are served by the KWOK stand-in (a real local engine started per pod on this machine, ``transformers
serve`` over the model built from its preset) and timed by the same watch from pod creation to the first
successful request. Then a short load test, and the placement read back from the API gives the GPU-level
match rate against the plan, and the fragmentation (FGD of the fleet after the measured devices) and the
GPU-hours per 1,000 requests of each path (docs/comparison.md#metrics). A last row per fleet applies the
plan's *one* ResourceClaimTemplate (``alternatives/dra.yaml``) and reads back which devices kube-scheduler's
DRA allocator picked on its own — how often that is the planner's choice.

Then, on a testenv with the real node (``--real-node``: containerd + runc + kubelet, root, the CPU serving
image ``IMAGES=cpu make images`` built), the plan for this machine on both paths from real containers
(``gpuplace.deploy.deploy`` and the Kubeflow path's task pod, each running ``transformers serve`` of
``tiny`` built in the container), ``--real-node-runs`` times each, with provisioning split into
scheduling, image, container start and server start (:class:`~gpuplace.types.PodRecord`).

Run: ``.venv/bin/python tests/benchmarks/bench_comparison.py`` (needs ``make k8s-bins``; about 15 min on
2 cores, plus about 10 min for the real node). ``--runs N`` (default 5), ``--quick`` = 2 runs and one fleet;
``--real-node-only`` runs the real-node part alone and keeps the KWOK cases of the last ``comparison.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from gpuplace.catalog import load_gpu_catalog  # noqa: E402
from gpuplace.compare.fragmentation import default_fragmentation  # noqa: E402
from gpuplace.compare.metrics import PathResult, path_metrics  # noqa: E402
from gpuplace.components.images import SERVING_IMAGE  # noqa: E402
from gpuplace.deploy.local import teardown_local  # noqa: E402
from gpuplace.deploy.standin import LocalStandIn  # noqa: E402
from gpuplace.inventory import load_inventory  # noqa: E402
from gpuplace.jobs.submit import compiled_path  # noqa: E402
from gpuplace.k8s import Api, connect, deploy_plan, teardown_plan  # noqa: E402
from gpuplace.k8s.dra import read_placements  # noqa: E402
from gpuplace.k8s.kfp_task import delete_task_pod, run_task_pod  # noqa: E402
from gpuplace.k8s.provisioning import PodTimer  # noqa: E402
from gpuplace.k8s.retry import Deadline  # noqa: E402
from gpuplace.loadtest.run import run_loadtest_step  # noqa: E402
from gpuplace.manifests import ServingOptions  # noqa: E402
from gpuplace.plandir import ALTERNATIVES_DIR, PlanDir, load_manifests  # noqa: E402
from gpuplace.profiling import ProfileConfig, run_profile  # noqa: E402
from gpuplace.profiling.io import save_profile  # noqa: E402
from gpuplace.steps.loadtest import load_test_config  # noqa: E402
from gpuplace.steps.plan import run_plan_step  # noqa: E402
from gpuplace.steps.plan_params import plan_request  # noqa: E402
from gpuplace.testenv import binaries, up  # noqa: E402
from gpuplace.types import DeploymentRecord, Distribution  # noqa: E402

OUT = REPO / "docs" / "benchmarks"
# (fleet, label, planner kinds): the planner's own choice on each fleet, and a MIG plan on the mixed fleet
# (its default choice there is a time-sliced L4 share, which only the device plugin gives).
CASES = (
    ("h100-nvlink", "planner's choice", "whole,mig,shared"),
    ("mixed-a100-h100-l4", "planner's choice", "whole,mig,shared"),
    ("mixed-a100-h100-l4", "MIG only", "mig"),
)
LOAD = {"prompt_tokens": "64", "output_tokens": "16", "rate": 2.0, "max_requests": 10, "seed": 0}


def profile(out: Path) -> Path:
    config = ProfileConfig(
        model="tiny", device="cpu", batch_sizes=(1, 4), prompt_tokens=(64,), output_tokens=(16,)
    ).validated()
    return save_profile(run_profile(config, show_progress=False), out)


def plan_for(fleet: str, kinds: str, profile_path: Path, out: Path) -> PlanDir:
    catalog = load_gpu_catalog()
    params = {
        "model": "tiny",
        "slo_tpot_ms": 50.0,
        "slo_ttft_ms": 2000.0,
        "rate": 2.0,
        "prompt_tokens": "64",
        "output_tokens": "16",
        "kinds": kinds,
    }
    result = run_plan_step(
        plan_request(params, catalog),
        profile=profile_path,
        inventory=fleet,
        out=out,
        catalog=catalog,
        options=ServingOptions(image=SERVING_IMAGE),
    )
    return result.plan_dir


def load_test(record: DeploymentRecord, planned: PlanDir, out: Path) -> Any:
    config = load_test_config(
        {**LOAD, "endpoint": "", "tokenizer": "tiny"}, deployment=record, plan=planned.plan
    )
    return run_loadtest_step(config, out, show_progress=False)


def one_run(path: str, api: Api, planned: PlanDir, ns: str, work: Path) -> dict[str, Any]:
    standin = LocalStandIn("tiny", workdir=work / "servers", startup_timeout_s=300)
    if path == "native":
        record = deploy_plan(planned, api=api, namespace=ns, timeout_s=300, runtime=standin, path="native")
    else:
        record = run_task_pod(
            planned,
            api=api,
            namespace=ns,
            package=compiled_path("orchestration_comparison"),
            runtime=standin,
            timeout_s=300,
        )
    try:
        result = load_test(record, planned, work / f"lt-{path}")
    finally:
        for server in standin.servers().values():
            teardown_local(server)
        if path == "native":
            teardown_plan(planned, api=api, namespace=ns)
        else:
            delete_task_pod(api, ns, record.name)
    return {"record": record, "report": result.report}


def scheduler_pick(api: Api, planned: PlanDir, ns: str) -> dict[str, Any]:
    """The plan's one ResourceClaimTemplate + Deployment: which devices does the allocator pick itself?"""
    from gpuplace.k8s.labelling import labelled, pod_selector
    from gpuplace.k8s.teardown import teardown_objects

    path = planned.path / ALTERNATIVES_DIR
    if not (path / "dra.yaml").is_file():
        return {"applicable": False}
    objects = [
        labelled(o, planned.plan.plan_id) for o in load_manifests(path) if o.get("kind") != "InferenceService"
    ]
    if planned.plan.chosen.kind == "shared":
        return {"applicable": False}
    with PodTimer(api, ns, label_selector=pod_selector(planned.plan.plan_id)) as timer:
        for o in objects:
            api.apply(o, ns)
        timer.wait(planned.plan.replicas, deadline=Deadline(120))
    placements = read_placements(
        api, ns, label_selector=pod_selector(planned.plan.plan_id), deadline=Deadline(30)
    )
    planned_ids = sorted(g for p in planned.plan.placements for g in p.gpu_ids)
    got = sorted(g for p in placements for g in p.gpu_ids)
    teardown_objects(api, objects, ns, plan_id=planned.plan.plan_id, deadline=Deadline(60))
    return {"applicable": True, "planned": planned_ids, "allocated": got, "match": got == planned_ids}


def summarise(path: str, runs: list[dict[str, Any]], planned: PlanDir, fleet_name: str) -> dict[str, Any]:
    fleet = load_inventory(fleet_name)
    catalog = load_gpu_catalog()
    frag = default_fragmentation()
    per_run = [r["record"].provisioning() for r in runs]
    provisioning = [
        max(p.serving_at_s for p in r["record"].pods) - min(p.created_at_s for p in r["record"].pods)
        for r in runs
    ]
    metrics = [
        path_metrics(
            PathResult(path, r["record"], r["report"]),
            plan=planned.plan,
            fleet=fleet,
            catalog=catalog,
            fragmentation=frag,
            penalty_usd_per_breach=0.0,
        )
        for r in runs
    ]
    level = {r["record"].placement_level for r in runs}
    device_match = [
        all(p.gpu_ids == p.planned_gpu_ids for p in r["record"].pods)
        for r in runs
        if r["record"].placement_level == "device"
    ]
    node_match = [all(p.node == p.planned_node for p in r["record"].pods) for r in runs]
    dist = Distribution.of(provisioning)
    first = runs[0]["record"]
    return {
        "runs": len(runs),
        "gpu_api": first.gpu_api,
        "placement_level": "/".join(sorted(level)),
        "provisioning_p50_s": dist.p50,
        "provisioning_p95_s": _p95(provisioning),
        "provisioning_s": provisioning,
        "scheduled_p50_s": statistics.median(p.scheduling_s for r in runs for p in r["record"].pods),
        "ready_p50_s": statistics.median(p.ready_s for r in runs for p in r["record"].pods),
        "per_pod_p50_s": [d.p50 for d in per_run],
        "gpu_match_rate": (sum(device_match) / len(device_match)) if device_match else None,
        "node_match_rate": sum(node_match) / len(node_match),
        "nodes": sorted({p.node for r in runs for p in r["record"].pods}),
        "gpu_ids": sorted({g for r in runs for p in r["record"].pods for g in p.gpu_ids}),
        "planned_gpu_ids": sorted(g for p in planned.plan.placements for g in p.gpu_ids),
        "gpus": metrics[0].gpus,
        "fragmentation_gpus": _median_or_nan([m.fragmentation_gpus for m in metrics]),
        "gpu_hours_per_1k": statistics.median(m.gpu_hours_per_1k_requests for m in metrics),
        "cost_usd_per_month": metrics[0].cost_usd_per_month,
        "ttft_p99_ms": statistics.median(m.ttft.p99 for m in metrics) * 1000,
        "tpot_p99_ms": statistics.median(m.tpot.p99 for m in metrics) * 1000,
        "completed": sum(m.completed for m in metrics),
        "failed": sum(m.failed for m in metrics),
        "served_on": first.served_on,
        "serving": first.serving.to_json_dict() if first.serving else None,
        "notes": sorted({n for m in metrics for n in m.notes}),
    }


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    k = 0.95 * (len(ordered) - 1)
    lo, hi = math.floor(k), math.ceil(k)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def _median_or_nan(values: list[float]) -> float:
    known = [v for v in values if not math.isnan(v)]
    return statistics.median(known) if known else math.nan


def run_case(fleet: str, label: str, kinds: str, runs: int, profile_path: Path, work: Path) -> dict[str, Any]:
    inventory = load_inventory(fleet)
    planned = plan_for(fleet, kinds, profile_path, work / "plan")
    print(f"== {fleet} ({label}): {planned.plan.chosen.label} on {planned.plan.nodes}", flush=True)
    cp = up(inventory, state_dir=work / "testenv")
    api = Api(connect(cp.kubeconfig))
    results: dict[str, list[dict[str, Any]]] = {"native": [], "kubeflow": []}
    try:
        ns = "bench"
        api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        for i in range(runs):
            for path in ("native", "kubeflow") if i % 2 == 0 else ("kubeflow", "native"):
                t0 = time.monotonic()
                results[path].append(one_run(path, api, planned, ns, work / f"{path}-{i}"))
                rec = results[path][-1]["record"]
                print(
                    f"  {path} run {i + 1}: {rec.provisioning().max:.2f} s to serve ({time.monotonic() - t0:.0f} s)",
                    flush=True,
                )
        pick = scheduler_pick(api, planned, ns)
    finally:
        api.client.close()
        cp.stop()
    same = results["native"][0]["record"].serving == results["kubeflow"][0]["record"].serving
    return {
        "fleet": fleet,
        "label": label,
        "shape": planned.plan.chosen.label,
        "unit": planned.plan.chosen.unit,
        "plan_fragmentation_after": planned.plan.fragmentation_after,
        "same_serving_spec": same,
        "native": summarise("native", results["native"], planned, fleet),
        "kubeflow": summarise("kubeflow", results["kubeflow"], planned, fleet),
        "scheduler_pick": pick,
    }


STAGES = ("scheduling_s", "image_s", "container_start_s", "server_start_s")


def real_node_unavailable() -> str:
    """Why the real-node part cannot run here ("" when it can)."""
    from gpuplace.testenv.realnode import built_images, host_tools_missing

    if os.geteuid() != 0:
        return "not root (the real node needs containerd, runc and a CNI bridge)"
    if host_tools_missing():
        return f"missing {', '.join(host_tools_missing())} (make node-deps)"
    if not any("/gpuplace-cpu:" in t for t in built_images()):
        return "the CPU serving image is not built (IMAGES=cpu make images)"
    return ""


def real_node_run(path: str, kubeconfig: str, planned: PlanDir, work: Path) -> dict[str, Any]:
    from gpuplace.deploy import deploy, teardown
    from gpuplace.steps.serve_and_loadtest import compiled_package, serve_and_load_test

    load = {**LOAD, "tokenizer": "tiny"}
    if path == "native":
        record = deploy(planned, kubeconfig=kubeconfig, timeout_s=900, path="native", workdir=work / "w")
        try:
            report = load_test(record, planned, work / "lt").report
        finally:
            teardown(planned, kubeconfig=kubeconfig)
    else:
        result = serve_and_load_test(
            planned.path,
            load,
            workdir=work / "kf",
            records=work / "records",
            report=work / "report",
            summary=work / "summary",
            startup_timeout_s=900,
            backend="testenv",
            kubeconfig=kubeconfig,
            package=compiled_package("orchestration_comparison"),
        )
        record, report = result.deployment, result.loadtest.report
    return {"record": record, "report": report}


def run_real_node(runs: int, work: Path) -> dict[str, Any]:
    """Both paths serving the plan for this machine from real containers on the testenv's real node."""
    from gpuplace.testenv.env import stop
    from gpuplace.testenv.realnode import RealNode, node_name
    from tests.support.plans import local_plan_dir

    why = real_node_unavailable()
    if why:
        print(f"== real node: not run ({why})", flush=True)
        return {"ran": False, "why": why}
    state = Path(tempfile.mkdtemp(prefix="gp-bench-", dir="/tmp"))  # short: the kubelet's unix sockets
    t0 = time.monotonic()
    cp = up(load_inventory("h100-nvlink"), state_dir=state, real_node=True)
    node = RealNode.load(cp.state_dir)
    up_s = time.monotonic() - t0
    planned = local_plan_dir(work / "plan", node_name())
    results: dict[str, list[dict[str, Any]]] = {"native": [], "kubeflow": []}
    try:
        for i in range(runs):
            for path in ("native", "kubeflow") if i % 2 == 0 else ("kubeflow", "native"):
                results[path].append(
                    real_node_run(path, str(cp.kubeconfig), planned, work / f"rn-{path}-{i}")
                )
                pod = results[path][-1]["record"].pods[0]
                print(f"  real node {path} run {i + 1}: {pod.provisioning_s:.1f} s to serve", flush=True)
    finally:
        stop(cp)
        shutil.rmtree(state, ignore_errors=True)
    out: dict[str, Any] = {
        "ran": True,
        "runs": runs,
        "up_s": up_s,
        "images_imported_s": node.imported if node else {},
        "same_serving_spec": results["native"][0]["record"].serving
        == results["kubeflow"][0]["record"].serving,
        "image": results["native"][0]["record"].serving.image,
    }
    for path, rs in results.items():
        pods = [r["record"].pods[0] for r in rs]
        out[path] = {
            "runtime": sorted({r["record"].runtime for r in rs}),
            "provisioning_s": [p.provisioning_s for p in pods],
            **{stage: [getattr(p, stage) for p in pods] for stage in STAGES},
            "completed": sum(r["report"].completed for r in rs),
            "failed": sum(r["report"].failed for r in rs),
            "ttft_p99_ms": statistics.median(r["report"].ttft.p99 for r in rs) * 1000,
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--real-node-runs", type=int, default=2)
    parser.add_argument("--real-node-only", action="store_true")
    args = parser.parse_args()
    binaries.resolve()
    runs = 2 if args.quick else args.runs
    cases = CASES[:1] if args.quick else CASES
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        os.environ.setdefault("GPUPLACE_STATE_DIR", str(work / "state"))
        if args.real_node_only:
            results = json.loads((OUT / "comparison.json").read_text())
        else:
            profile_path = profile(work / "profile.parquet")
            results = {
                "cases": [
                    run_case(fleet, label, kinds, runs, profile_path, work / f"case-{i}")
                    for i, (fleet, label, kinds) in enumerate(cases)
                ],
                "load": LOAD,
                "machine": {"cpus": os.cpu_count(), "k8s": binaries.k8s_version(), "quick": args.quick},
                "wall_s": time.monotonic() - t0,
            }
        t1 = time.monotonic()
        results["real_node"] = run_real_node(args.real_node_runs, work / "real-node")
        results["real_node"]["wall_s"] = time.monotonic() - t1
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "comparison.json").write_text(json.dumps(results, indent=2, default=_json) + "\n")
    (OUT / "comparison.md").write_text(render(results))
    print((OUT / "comparison.md").read_text())
    return 0


def _json(value: Any) -> Any:
    return None if isinstance(value, float) and math.isnan(value) else str(value)


def _f(value: Any, fmt: str = ".2f") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "unknown"
    return format(value, fmt)


def render_real_node(rn: dict[str, Any] | None) -> str:
    if not rn or not rn.get("ran"):
        return (
            "## From real containers (the testenv's real node)\n\nNot run: "
            f"{(rn or {}).get('why', 'the benchmark predates it')}.\n"
        )

    def med(values: list[Any]) -> str:
        known = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
        return _f(statistics.median(known)) if known else "unknown"

    rows = []
    for path in ("native", "kubeflow"):
        p = rn[path]
        runs = ", ".join(_f(v, ".1f") for v in p["provisioning_s"])
        rows.append(
            f"| {path} | {', '.join(p['runtime'])} | {med(p['provisioning_s'])} ({runs}) | "
            + " | ".join(med(p[s]) for s in STAGES)
            + f" | {_f(p['ttft_p99_ms'], '.0f')} | {p['completed']}/{p['failed']} |"
        )
    imported = ", ".join(f"{k} {v:.0f} s" for k, v in rn.get("images_imported_s", {}).items())
    return f"""## From real containers (the testenv's real node)

`testenv up --real-node` (containerd 1.6 + runc + a kubelet on this machine, beside the KWOK GPU nodes) took
{rn["up_s"]:.0f} s, of which loading the built images into the node's containerd: {imported}. The plan is
for this machine (one replica of `transformers serve --continuous-batching` of `tiny` on its CPUs), pinned
to the real node; both paths run it in the CPU serving image `{rn["image"]}` (serving specs
{"identical" if rn["same_serving_spec"] else "DIFFERENT"}), the model built from its preset inside the
container (random weights, a locally trained tokenizer: no download). The native path is `gpuplace deploy`'s
Deployment; the Kubeflow path is the task pod as KFP's driver builds it, its main container running the
plan's serving container (KFP's launcher cannot be had here). Readiness probes are the kubelet's; the first
request and the load test ({rn_load(rn)}) go to the pod IP on the CNI bridge. {rn["runs"]} runs per path,
alternating; {rn["wall_s"] / 60:.0f} min in all.

Provisioning = pod created → first successful request, split per pod (medians over the runs):
**scheduling** created → bound (watch); **image** bound → the kubelet's `Pulled` event (the image is already
on the node, `imagePullPolicy: Never`; events have 1 s resolution, so this is 0 or 1 s); **container start**
→ phase Running (sandbox, CNI, runc: watch); **server start** → the first successful request (building the
model, importing torch and transformers, loading, answering).

| path | runtime | provisioning s, median (each run) | scheduling s | image s | container start s | server start s | p99 TTFT ms | ok/failed |
|---|---|---:|---:|---:|---:|---:|---:|---|
{chr(10).join(rows)}

Reading: once a container has to start, provisioning is the server's start inside it (tens of seconds of
imports and the model build on this shared 2-core machine), not the orchestration: scheduling and the
container's own start are a small share on either path.
"""


def rn_load(rn: dict[str, Any]) -> str:
    return f"{LOAD['max_requests']} requests at {LOAD['rate']} req/s per run"


def render(r: dict[str, Any]) -> str:
    rows = []
    for c in r["cases"]:
        for path in ("native", "kubeflow"):
            p = c[path]
            gpu_match = "n/a (node level)" if p["gpu_match_rate"] is None else f"{p['gpu_match_rate']:.0%}"
            rows.append(
                f"| {c['fleet']} | {c['shape']} | {path} | {p['gpu_api']} | {_f(p['provisioning_p50_s'])} | "
                f"{_f(p['provisioning_p95_s'])} | {_f(p['scheduled_p50_s'], '.3f')} | {_f(p['ready_p50_s'], '.3f')} | "
                f"{gpu_match} | {p['node_match_rate']:.0%} | {', '.join(p['gpu_ids']) or 'not in the API'} | "
                f"{_f(p['fragmentation_gpus'])} | {_f(p['gpu_hours_per_1k'], '.3f')} | {p['completed']}/{p['failed']} |"
            )
    picks = []
    for c in r["cases"]:
        s = c["scheduler_pick"]
        if not s.get("applicable"):
            picks.append(
                f"| {c['fleet']} | {c['shape']} | – | – | not applicable (a time-sliced share is not claimed through DRA) |"
            )
        else:
            picks.append(
                f"| {c['fleet']} | {c['shape']} | {', '.join(s['planned'])} | {', '.join(s['allocated'])} | "
                f"{'yes' if s['match'] else 'no'} |"
            )
    specs = ", ".join(
        f"{c['fleet']} {c['shape']}: {'identical' if c['same_serving_spec'] else 'DIFFERENT'}"
        for c in r["cases"]
    )
    return f"""# Native vs Kubeflow path on the local control plane

Produced by `.venv/bin/python tests/benchmarks/bench_comparison.py` on {r["machine"]["cpus"]} CPUs (shared with
other work), Kubernetes {r["machine"]["k8s"]}{" (--quick)" if r["machine"]["quick"] else ""}, {r["cases"][0]["native"]["runs"]} runs per path
and plan, alternating the paths; {r["wall_s"] / 60:.0f} min in all. Raw figures: `comparison.json`.

**What is real and what stands in** (docs/comparison.md#on-the-testenv): the API server, kube-scheduler (its
DRA allocator too), kube-controller-manager, the watch-timed pod events, the server start and the first
request, and the load test against a real server are real. KWOK plays the kubelets: no container runs, so
the KWOK stand-in starts the local engine (`transformers serve` over the `tiny` preset) on this machine for
each pod KWOK marks Ready. The Kubeflow path's pod is built as KFP 2.17's driver builds it, from the
checked-in compiled pipeline; no KFP backend (Argo, ML Metadata) runs. The requests are served by this
machine's CPU, never by the simulated GPU: latency here says nothing about the planned GPU, so no
prediction error is computed. Serving specs of the two paths: {specs}.

Provisioning = first pod created → first successful request (a one-token completion), on the local clock
from watch events (sub-second), over the runs; "scheduled" and "Ready" are per-pod medians from creation.
GPU match = the pods' DRA-allocated devices equal the plan's; with the device plugin (the only way KFP 2.17
gives a task GPUs) the API does not say which devices, so it is not measurable ("n/a"), and fragmentation
after the placement is unknown for the same reason. GPU-hours per 1,000 requests = GPUs held (measured;
a time-sliced GPU at its share) × the load test's wall hours ÷ completed requests × 1000; the load test is
{r["load"]["max_requests"]} requests at {r["load"]["rate"]} req/s, so this is the cost of a short, lightly loaded run on a CPU.

| fleet | plan | path | GPU API | provisioning p50 s | p95 s | scheduled p50 s | Ready p50 s | GPU match | node match | GPUs (measured) | FGD after (GPUs) | GPU-h / 1k req | ok/failed |
|---|---|---|---|---:|---:|---:|---:|---|---|---|---:|---:|---|
{chr(10).join(rows)}

**The scheduler's own pick.** With the plan's single ResourceClaimTemplate (`alternatives/dra.yaml`) instead of
one claim per replica naming the planned devices, which devices does kube-scheduler's DRA allocator choose?

| fleet | plan | planned | allocated | same as the plan |
|---|---|---|---|---|
{chr(10).join(picks)}

Reading: the two paths differ by how the pod is created (a Deployment's ReplicaSet vs a bare task pod) and
by how GPUs are claimed (DRA claims vs the device plugin): that is the "scheduled" and "Ready" columns. The
rest of provisioning is the local engine's start and first request on this shared CPU, the same code on
both paths, so differences there are noise of this machine, not the orchestration. Where the allocator's
own pick differs from the plan, only claiming the planned devices (`--gpu-api dra`) makes the placement
match what the planner scored.

{render_real_node(r.get("real_node"))}"""


if __name__ == "__main__":
    sys.exit(main())
