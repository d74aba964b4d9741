"""A small, deterministic set of comparison inputs: what ``gpuplace compare`` reads, made up on purpose.

``python -m tests.support.sample OUT`` writes a plan directory, and for each path a deployment.json and
a load-test folder (records.jsonl + report.json, summarised by the load tester's own ``summarize``)
on the bundled ``h100-nvlink`` fleet, so that the commands in docs/comparison.md and
docs/tracking.md run without a cluster. The numbers are synthetic and labelled so in the records'
notes; the benchmark and the integration tests use the same builder.
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from gpuplace.loadtest.io import write_outputs
from gpuplace.loadtest.metrics import summarize
from gpuplace.steps.compare import PathInput, parse_path_inputs
from gpuplace.types import (
    DeploymentRecord,
    DeviceInfo,
    Distribution,
    LatencyProfile,
    ModelArch,
    PodRecord,
    PointResult,
    SweepPoint,
)
from gpuplace.types.loadtest import RequestResult
from gpuplace.types.plan import Candidate, PlacementPlan, Slo
from tests.support.plans import predicted, sample_plan, write_sample_plan

SAMPLE_NOTE = "synthetic sample written by tests.support.sample (not a measurement)"


@dataclass(frozen=True, slots=True)
class SamplePaths:
    plan: Path
    deployments: dict[str, Path]
    loadtests: dict[str, Path]
    profile: Path | None = None

    def path_inputs(self) -> tuple[PathInput, ...]:
        """Both paths' inputs as ``gpuplace compare`` takes them."""
        return parse_path_inputs(
            str(self.deployments["native"]),
            str(self.loadtests["native"]),
            str(self.deployments["kubeflow"]),
            str(self.loadtests["kubeflow"]),
        )


def sample_profile(
    batch_sizes: tuple[int, ...] = (1, 4), prompts: tuple[int, ...] = (128, 512)
) -> LatencyProfile:
    """A hand-made profile (one point per batch × prompt), shaped like the profiler's output."""
    arch = ModelArch(
        "llama-3.1-8b", "llama", 32, 4096, 32, 8, 128, 14336, 128256, 131072, False, 8_030_261_248
    )
    device = DeviceInfo(
        kind="cuda", name="NVIDIA H100 80GB HBM3", catalog_gpu="H100-SXM5-80GB", notes=(SAMPLE_NOTE,)
    )
    results = []
    for b in batch_sizes:
        for p in prompts:
            prefill = 0.02 + 0.00004 * b * p
            step = 0.0065 + 0.0002 * b
            results.append(
                PointResult(
                    point=SweepPoint(b, p, 32, "bfloat16", "eager"),
                    ok=True,
                    repeats=3,
                    prefill=Distribution.of([prefill, prefill * 1.02, prefill * 1.05]),
                    decode_step=Distribution.of([step, step * 1.01, step * 1.03, step * 1.1]),
                    tpot=Distribution.of([step * 1.02] * 3),
                    e2e=Distribution.of([prefill + 31 * step] * 3),
                    mbu=0.6,
                    decode_tokens_per_s=b / step,
                )
            )
    return LatencyProfile(arch, device, tuple(results), 3350.0, "catalog:H100-SXM5-80GB")


def _records(
    rng: random.Random, n: int, rate: float, ttft: float, tpot: float, slow_every: int
) -> list[RequestResult]:
    out, t = [], 0.0
    for i in range(n):
        t += rng.expovariate(rate)
        slow = 3.0 if slow_every and i % slow_every == 0 else 1.0
        first = ttft * slow * rng.uniform(0.8, 1.2)
        steps = [tpot * slow * rng.uniform(0.85, 1.15) for _ in range(31)]
        chunks = [first]
        for s in steps:
            chunks.append(chunks[-1] + s)
        out.append(
            RequestResult(
                index=i,
                scheduled_s=t,
                start_s=t,
                prompt_tokens=256,
                max_tokens=32,
                success=True,
                ttft_s=first,
                e2e_s=chunks[-1],
                chunk_times_s=tuple(chunks),
                output_tokens=32,
                output_tokens_source="usage",
                status=200,
            )
        )
    return out


def _sample_plan(slo: Slo) -> PlacementPlan:
    """Two replicas of llama-3.1-8b on one H100 each, chosen over an A100 and an L4 shape."""
    prices = {"H100-SXM5-80GB": 6.88, "A100-SXM4-80GB": 5.12, "L4-24GB": 0.80}  # the bundled catalog's
    rows = (("H100-SXM5-80GB", 2, 0.021, "chosen"), ("A100-SXM4-80GB", 2, 0.034, "feasible"),
            ("L4-24GB", 4, 0.071, "rejected"))  # fmt: skip
    candidates = tuple(
        Candidate(
            gpu, "whole", 1, n,
            prediction=predicted((0.08, 0.15), (tpot * 0.85, tpot), max_batch=8, memory_per_gpu_gib=30.0),
            cost_usd_per_hour=n * prices[gpu], verdict=verdict, fit_score=0.95,
        )
        for gpu, n, tpot, verdict in rows
    )  # fmt: skip
    base = sample_plan(plan_id="sample-0001", name="llama-8b", model="llama-3.1-8b", nodes=("h100-a-0",) * 2)
    placements = tuple(replace(p, gpu_ids=(f"h100-a-0/gpu{i}",)) for i, p in enumerate(base.placements))
    return replace(
        base,
        slo=slo,
        chosen=candidates[0],
        candidates=candidates,
        placements=placements,
        fragmentation_before=0.0,
        fragmentation_after=0.6,  # FGD of the planned placement (two GPUs of h100-a-0)
    )


def write_sample_inputs(
    out_dir: str | Path, *, requests: int = 200, seed: int = 0, with_profile: bool = False
) -> SamplePaths:
    """Write the sample plan and both paths' records; with ``with_profile`` also profile.parquet."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    slo = Slo(ttft_p99_s=0.5, tpot_p99_s=0.05, rate_rps=4.0)
    placements = [{"node": "h100-a-0"}, {"node": "h100-a-0"}]
    plan = _sample_plan(slo)
    plan_path = write_sample_plan(
        out / "plan", plan, {"10-deployment.yaml": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                                   "metadata": {"name": "llama-8b"}}]}
    ).path  # fmt: skip

    rng = random.Random(seed)
    # path: (created→ready s per pod, ttft, tpot, every n-th request slow, nodes, DRA-allocated ids or none)
    shapes = {
        "native": (41.0, 0.09, 0.019, 12, ["h100-a-0", "h100-a-0"], ["h100-a-0/gpu0", "h100-a-0/gpu1"]),
        "kubeflow": (63.0, 0.10, 0.020, 25, ["h100-a-0", "h100-a-1"], []),  # device plugin: node level
    }
    deployments, loadtests = {}, {}
    for path, (ready_s, ttft, tpot, slow_every, nodes, gpus) in shapes.items():
        t0 = 1_800_000_000.0
        pods = tuple(
            PodRecord(
                name=f"llama-8b-{path}-{i}",
                node=node,
                planned_node=placements[i]["node"],  # type: ignore[arg-type]
                phase="Running",
                created_at_s=t0 + i,
                scheduled_at_s=t0 + i + 2.0,
                ready_at_s=t0 + i + ready_s + i * 3.0,
                serving_at_s=t0 + i + ready_s + i * 3.0 + 1.5,
                gpu_ids=(gpus[i],) if gpus else (),
                planned_gpu_ids=plan.placements[i].gpu_ids,
                placement_level="device" if gpus else "node",
                gpu_resource="gpu.nvidia.com" if gpus else "nvidia.com/gpu",
                gpu_count=1,
                timing="watch",
            )
            for i, node in enumerate(nodes)
        )
        dep = DeploymentRecord(
            target="kubernetes",
            name=f"llama-8b-{path}",
            namespace="gpuplace",
            endpoint=f"http://llama-8b-{path}.gpuplace:8000",
            model="llama-3.1-8b",
            ready=True,
            pods=pods,
            plan_id="sample-0001",
            notes=(SAMPLE_NOTE,),
            serving=plan.serving,
            path=path,
            gpu_api="dra" if gpus else "device-plugin",
            runtime="kubelet",
            served_on="H100-SXM5-80GB",
        )
        dep_path = out / path / "deployment.json"
        dep_path.parent.mkdir(parents=True, exist_ok=True)
        dep_path.write_text(json.dumps(dep.to_json_dict(), indent=2) + "\n")
        records = _records(rng, requests, 4.0, ttft, tpot, slow_every)
        report = summarize(records, slo=slo, workload={"rate": 4.0, "arrival": "poisson"})
        lt = out / path / "loadtest"
        write_outputs(lt, records, report, None, (SAMPLE_NOTE,))
        deployments[path], loadtests[path] = dep_path, lt
    profile_path = None
    if with_profile:
        from gpuplace.profiling.io import save_profile

        profile_path = save_profile(sample_profile(), out / "profile.parquet")
    return SamplePaths(plan_path, deployments, loadtests, profile_path)


if __name__ == "__main__":
    paths = write_sample_inputs(sys.argv[1] if len(sys.argv) > 1 else "sample", with_profile=True)
    print(f"profile: {paths.profile}")
    print(f"plan: {paths.plan}")
    for name in paths.deployments:
        print(f"{name}: {paths.deployments[name]}  {paths.loadtests[name]}")
