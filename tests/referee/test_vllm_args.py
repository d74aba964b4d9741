"""gpuplace's vLLM argument lists and engine defaults against vLLM 0.34's own code (issue 21, item 4).

Real parts: vLLM's ``vllm serve`` argument parser (``make_arg_parser`` in
``vllm.entrypoints.common.cli_args``, then ``validate_parsed_serve_args``), its ``EngineArgs`` and
``CacheConfig`` defaults and ``EngineArgs.get_batch_defaults``, in vLLM's own venv
(``tests/referee/vllm_venv.sh`` creates it on first use: about 10 GB and 5 minutes), driven by
``tests/referee/vllm_args_driver.py``. The only stand-in: vLLM runs on its ``CpuPlatform`` (no GPU
here), and for ``get_batch_defaults``, which asks the device it runs on, a stand-in CUDA platform answers
each GPU's memory and name (the decision is vLLM's code).

Every argument list gpuplace writes is collected from real plans (gpuplace's planner on hand-made fleets)
of every kind of shape: one whole GPU, tensor-parallel groups, a MIG slice, a time-sliced share, FP8
weights with an FP8 KV cache, and a replica across two nodes of one NVLink domain (made by hand); from
every container that runs ``vllm serve`` in every emitted form (Deployment, DRA, KServe InferenceService
and LLMInferenceService, Kueue, LeaderWorkerSet), and from the serving spec the Kubeflow task runs
(``deploy/inline.py``: ``vllm serve *spec.args``). One driver run serves the module (vLLM's import is
most of its cost: 30-60 s here).
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from gpuplace.catalog import load_gpu_catalog, model_arch_from_config, resolve_model
from gpuplace.catalog.efficiency import load_efficiency_table
from gpuplace.inventory import parse_fleet
from gpuplace.labels import NVLINK_CLIQUE
from gpuplace.manifests import FORMS, EmitOptions, ServingOptions, build_manifests, serving_spec
from gpuplace.planner import plan_placement
from gpuplace.planner.engine import (
    GIB,
    KV_CACHE_MARGIN_FLOOR_GIB,
    KV_CACHE_MARGIN_FRACTION,
    VLLM_BLOCK_SIZE,
    VLLM_GPU_MEMORY_UTILIZATION,
    vllm_batch_defaults,
)
from gpuplace.serving.runtime import vllm_args
from gpuplace.steps.plan_params import plan_request
from gpuplace.types import GpuDevice, GpuSpec, Inventory, Node
from gpuplace.types.plan import Placement, PlacementPlan
from gpuplace.types.serving import VLLM_VERSION
from tests.support.vllm_scheduler import vllm_python

pytestmark = [pytest.mark.referee, pytest.mark.integration]

REPO = Path(__file__).resolve().parents[2]
CATALOG = load_gpu_catalog()
TABLE = load_efficiency_table()
BOGUS = "bogus: an unknown flag"


def _node(name: str, product: str, count: int, **extra: Any) -> dict[str, Any]:
    gpus: dict[str, Any] = {"product": product, "count": count, "nvlink_island": "nvswitch"}
    return {"name": name, "gpus": [gpus | extra.pop("gpu", {})], **extra}


# shape label -> (fleet nodes, model, request overrides)
SHAPES: dict[str, tuple[list[dict[str, Any]], str, dict[str, Any]]] = {
    "whole": ([_node("h100", "H100-SXM5-80GB", 8)], "llama-3.1-8b", {"kinds": "whole"}),
    "tp": ([_node("a100", "A100-SXM4-40GB", 8)], "llama-3.1-70b", {"kinds": "whole", "rate": 0.5}),
    "mig": (
        [_node("mig", "A100-SXM4-80GB", 1, gpu={"mig": ["3g.40gb", "3g.40gb"]}, mig_strategy="mixed")],
        "llama-3.1-8b",
        {"kinds": "mig", "rate": 0.5},
    ),
    "shared": ([_node("l4", "L4-24GB", 2, time_slicing=2)], "tiny", {"kinds": "shared"}),
    "fp8": (
        [_node("h100", "H100-SXM5-80GB", 8)],
        "llama-3.1-8b",
        {"kinds": "whole", "dtype": "fp8", "kv_cache_dtype": "fp8"},
    ),
}


def _plan(label: str) -> tuple[PlacementPlan, Any]:
    nodes, model, overrides = SHAPES[label]
    fleet = parse_fleet({"nodes": nodes}, label, CATALOG)
    params = {"model": model, "slo_tpot_ms": 200, "slo_ttft_ms": 20000, "rate": 1} | overrides
    request = replace(plan_request(params, CATALOG), simulated_requests=200)
    arch = model_arch_from_config(model, resolve_model(model).config)
    plan = plan_placement(arch, fleet, CATALOG, request, efficiency=TABLE)
    return replace(plan, serving=serving_spec(plan, fleet, ServingOptions())), fleet


# what LeaderWorkerSet's webhook adds to every container of a group (a worker's index; any address)
LWS_ENV = {"LWS_LEADER_ADDRESS": "leader.group.svc", "LWS_WORKER_INDEX": "1", "LWS_GROUP_SIZE": "2"}


def kubelet_args(container: dict[str, Any]) -> list[str]:
    """The arguments as the kubelet hands them to ``vllm serve``: ``$(VAR)`` expanded from the container's
    env (and the env LeaderWorkerSet injects), as Kubernetes does; a reference to an undefined variable
    stays literal, as it would reach vLLM."""
    env = dict(LWS_ENV) if "LWS_" in json.dumps(container.get("args")) else {}
    env |= {e["name"]: e["value"] for e in container.get("env") or () if "value" in e}
    return [
        re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m[1], m[0]), a) for a in container["args"]
    ]


def _vllm_containers(obj: object) -> Iterator[dict[str, Any]]:
    if isinstance(obj, dict):
        if obj.get("command") == ["vllm", "serve"]:
            yield obj
        for value in obj.values():
            yield from _vllm_containers(value)
    elif isinstance(obj, list | tuple):
        for value in obj:
            yield from _vllm_containers(value)


def argument_lists() -> tuple[list[dict[str, Any]], dict[str, PlacementPlan]]:
    """Every argument list gpuplace writes for the shapes above, labelled ``shape/where``."""
    lists: list[dict[str, Any]] = []
    plans = {}
    for label in SHAPES:
        plan, fleet = _plan(label)
        plans[label] = plan
        assert plan.serving is not None
        lists.append({"label": f"{label}/kfp-task", "args": list(plan.serving.args), "shape": label})
        manifests = build_manifests(plan, fleet, ServingOptions(), EmitOptions(forms=FORMS))
        for name, objects in {**manifests.apply, **manifests.alternatives}.items():
            for i, container in enumerate(_vllm_containers(list(objects))):
                lists.append(
                    {"label": f"{label}/{name}#{i}", "args": kubelet_args(container), "shape": label}
                )
    lists += _multi_node(plans["whole"])
    lists.append(
        {
            "label": "random-weights",
            "args": vllm_args(model="m", tensor_parallel_size=2, random_weights=True, served_model_name="m"),
            "shape": "whole",
        }
    )
    lists.append({"label": BOGUS, "args": ["m", "--no-such-flag", "1"], "shape": ""})
    return lists, plans


def _multi_node(single: PlacementPlan) -> list[dict[str, Any]]:
    """A TP-8 replica across two 4-GPU nodes of one NVLink domain (a GB200 NVL72 rack), made by hand from
    a planned shape as tests/unit/test_emit_forms.py does (the planner does not place a replica across
    nodes): the LeaderWorkerSet's leader and worker add vLLM's multi-node flags."""
    nodes = tuple(
        Node(
            name=f"gb200-{i}",
            gpus=tuple(
                GpuDevice(id=f"gb200-{i}/gpu{g}", index=g, gpu="GB200-NVL72-186GB", memory_gib=185.0)
                for g in range(4)
            ),
            labels={NVLINK_CLIQUE: "rack-0"},
        )
        for i in range(2)
    )
    fleet = Inventory(nodes=nodes, source="gb200")
    ids = tuple(f"gb200-{i}/gpu{g}" for i in range(2) for g in range(4))
    plan = replace(
        single,
        chosen=replace(single.chosen, gpu="GB200-NVL72-186GB", tp=8, replicas=1),
        placements=(Placement(0, "gb200-0", ids, "nvlink", None, 1.0, 0.0),),
    )
    plan = replace(plan, serving=serving_spec(plan, fleet, ServingOptions()))
    emit = EmitOptions(forms=("lws", "kserve-llmisvc"), explicit=True)
    manifests = build_manifests(plan, fleet, ServingOptions(), emit)
    out = []
    for name, objects in manifests.alternatives.items():
        for i, container in enumerate(_vllm_containers(list(objects))):
            args = kubelet_args(container)
            out.append({"label": f"multi-node/{name}#{i}", "args": args, "shape": "multi-node"})
    return out


def _device_name(spec: GpuSpec) -> str:
    """The name CUDA reports (torch.cuda.get_device_name): the catalog alias that starts with NVIDIA."""
    return next((a for a in spec.aliases if a.startswith("NVIDIA ")), f"NVIDIA {spec.name}")


def devices() -> list[dict[str, Any]]:
    """Every catalog GPU, whole and as each of its MIG slices (a slice reports its own memory)."""
    out = []
    for spec in CATALOG:
        out.append({"name": spec.name, "memory_gib": spec.memory_gib, "device_name": _device_name(spec)})
        for mig in spec.mig_profiles:
            out.append(
                {
                    "name": f"{spec.name}/{mig.name}",
                    "memory_gib": mig.memory_gib,
                    "device_name": f"{_device_name(spec)} MIG {mig.name}",
                }
            )
    return out


@pytest.fixture(scope="module")
def referee(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    python = str(vllm_python())
    lists, plans = argument_lists()
    request = tmp_path_factory.mktemp("vllm-args") / "request.json"
    request.write_text(json.dumps({"arg_lists": lists, "devices": devices()}))
    done = subprocess.run(
        [python, str(REPO / "tests" / "referee" / "vllm_args_driver.py"), str(request)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    return {"result": result, "lists": lists, "plans": plans}


def test_the_referee_is_the_release_gpuplace_follows(referee: dict[str, Any]) -> None:
    result = referee["result"]
    assert result["vllm_version"] == VLLM_VERSION
    assert result["platform"] == "CpuPlatform"


def test_every_argument_list_gpuplace_writes_parses_with_vllm_serve(referee: dict[str, Any]) -> None:
    parsed = {p["label"]: p for p in referee["result"]["parsed"]}
    bad = {label: p["error"] for label, p in parsed.items() if not p["ok"] and label != BOGUS}
    assert not bad
    # the referee does refuse: an unknown flag is vLLM's error, not silently accepted
    assert not parsed[BOGUS]["ok"] and "unrecognized arguments: --no-such-flag" in parsed[BOGUS]["error"]
    shapes = {item["shape"] for item in referee["lists"]}
    assert shapes >= {"whole", "tp", "mig", "shared", "fp8", "multi-node"}
    multi = [item["args"] for item in referee["lists"] if item["shape"] == "multi-node"]
    assert any("--headless" in a for a in multi) and all("--nnodes" in a for a in multi)
    where = {
        item["label"].split("/", 1)[1].split("#")[0] for item in referee["lists"] if "/" in item["label"]
    }
    assert {"kfp-task", "10-deployment.yaml", "kserve.yaml", "kserve-llmisvc.yaml"} <= where


def test_vllm_reads_the_values_the_prediction_assumed(referee: dict[str, Any]) -> None:
    parsed = {p["label"]: p["parsed"] for p in referee["result"]["parsed"] if p["ok"]}
    for label, plan in referee["plans"].items():
        engine = plan.engine
        got = parsed[f"{label}/kfp-task"]
        assert got["tensor_parallel_size"] == plan.chosen.tp, label
        assert got["max_num_batched_tokens"] == engine.max_num_batched_tokens, label
        assert got["max_num_seqs"] == engine.max_num_seqs, label
        assert got["block_size"] == engine.block_size, label
        # unset on a whole GPU: vLLM resolves it (1.0 with its extensible KV cache); passed on a share
        util = got["gpu_memory_utilization"]
        assert (util is None) is (engine.gpu_memory_utilization == 1.0), label
        resolved = referee["result"]["gpu_memory_utilization"] if util is None else util
        assert resolved == pytest.approx(engine.gpu_memory_utilization), label
        assert got["max_model_len"] == engine.max_model_len, label
        assert got["enable_chunked_prefill"] is True, label
        assert got["async_scheduling"] is engine.async_scheduling is True, label  # vllm serve's default
        assert got["quantization"] == ("fp8" if engine.precision.fp8_weights else None), label
        assert got["kv_cache_dtype"] == ("fp8" if engine.precision.kv_cache == "fp8" else "auto"), label
    assert referee["plans"]["tp"].chosen.tp > 1
    assert referee["plans"]["mig"].chosen.kind == "mig" and referee["plans"]["shared"].chosen.kind == "shared"
    assert parsed["random-weights"]["load_format"] == "dummy"
    multi = {label: got for label, got in parsed.items() if label.startswith("multi-node/")}
    assert multi, "no multi-node argument list parsed"
    for label, got in multi.items():  # the leader (#0) serves; the worker (#1) joins it headless
        rank = int(label.rsplit("#", 1)[1])
        assert (got["nnodes"], got["node_rank"], got["headless"]) == (2, rank, rank == 1), label
        assert got["master_addr"] == LWS_ENV["LWS_LEADER_ADDRESS"] and got["tensor_parallel_size"] == 8, label


def test_the_engine_defaults_the_plan_records_are_vllms(referee: dict[str, Any]) -> None:
    result = referee["result"]
    assert result["gpu_memory_utilization_flag"] is None  # unset: vLLM resolves it
    assert result["gpu_memory_utilization"] == VLLM_GPU_MEMORY_UTILIZATION
    assert result["kv_cache_margin"] == {
        "floor_bytes": KV_CACHE_MARGIN_FLOOR_GIB * GIB,
        "fraction": KV_CACHE_MARGIN_FRACTION,
    }
    assert result["block_size"] == VLLM_BLOCK_SIZE
    ours = {}
    for spec in CATALOG:
        ours[spec.name] = list(vllm_batch_defaults(spec, spec.memory_gib)[:2])
        for mig in spec.mig_profiles:
            ours[f"{spec.name}/{mig.name}"] = list(vllm_batch_defaults(spec, mig.memory_gib)[:2])
    assert ours == result["batch_defaults"]
    sources = referee["plans"]["whole"].engine.sources
    assert f"vLLM {VLLM_VERSION}" in sources["gpu_memory_utilization"]
    assert f"vLLM {VLLM_VERSION}" in sources["max_num_seqs"]


def _driver_flags() -> set[str]:
    """The driver's ``FLAGS``, read from its source (importing it would set vLLM's platform variable here)."""
    import ast

    tree = ast.parse((REPO / "tests" / "referee" / "vllm_args_driver.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "FLAGS" for t in node.targets):
            return set(ast.literal_eval(node.value))
    raise AssertionError("tests/referee/vllm_args_driver.py defines no FLAGS")


def test_the_driver_reads_back_every_flag_gpuplace_sets() -> None:
    """vLLM hands back parsed values only for the driver's ``FLAGS``: a flag gpuplace starts writing that
    ``FLAGS`` lacks would parse, and its value would go unchecked. Needs no vLLM."""
    lists, _ = argument_lists()
    written = {
        re.sub(r"^--(no-)?", "", str(a)).split("=")[0].replace("-", "_")
        for item in lists
        if item["label"] != BOGUS
        for a in item["args"]
        if str(a).startswith("--")
    }
    assert written - _driver_flags() == set()
