"""Inventory from Kubernetes objects (the GFD/device-plugin view) and from the Alibaba trace CSVs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import SHARED_DATA

from gpuplace.errors import InvalidInput
from gpuplace.inventory import load_inventory
from gpuplace.inventory.alibaba import read_alibaba_nodes, read_alibaba_tasks
from gpuplace.inventory.cluster import inventory_from_objects, quantity, running_workload
from gpuplace.labels import gfd_labels, node_resources, topology_annotations
from gpuplace.types import Node

TRACE = SHARED_DATA / "alibaba-gpu-v2023"


def node_object(node: Node, *, annotate: bool = True) -> dict[str, Any]:
    """A Node object as the control plane builds it from a fleet node (the labels module's contract)."""
    res = node_resources(node)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "labels": gfd_labels(node),
            "annotations": topology_annotations(node) if annotate else {},
        },
        "spec": {"taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in node.taints]},
        "status": {"capacity": res, "allocatable": res},
    }


def gpu_pod(node: str, resource: str, n: int, phase: str = "Running") -> dict[str, Any]:
    return {
        "spec": {"nodeName": node, "containers": [{"resources": {"limits": {resource: str(n)}}}]},
        "status": {"phase": phase},
    }


def test_fleet_survives_the_round_trip_through_node_objects() -> None:
    fleet = load_inventory("mixed-a100-h100-l4")
    back = inventory_from_objects([node_object(n) for n in fleet.nodes])
    assert [n.name for n in back.nodes] == sorted(n.name for n in fleet.nodes)
    for node in back.nodes:
        orig = fleet.node(node.name)
        assert node.zone == orig.zone and node.rack == orig.rack and node.mig_strategy == orig.mig_strategy
        assert node.taints == orig.taints and node.numa_nodes == orig.numa_nodes
        assert sorted(
            (g.index, g.gpu, g.mig_profile, g.numa_node, g.pcie_switch) for g in node.gpus
        ) == sorted((g.index, g.gpu, g.mig_profile, g.numa_node, g.pcie_switch) for g in orig.gpus)
        assert node.physical_gpu_count == orig.physical_gpu_count
    assert not back.warnings


def test_pods_mark_gpus_allocated_and_terminated_pods_do_not() -> None:
    fleet = load_inventory("h100-nvlink")
    node = fleet.nodes[0]
    pods = [
        gpu_pod(node.name, "nvidia.com/gpu", 3),
        gpu_pod(node.name, "nvidia.com/gpu", 4, phase="Succeeded"),
    ]
    back = inventory_from_objects([node_object(node)], pods)
    assert [g.allocated for g in back.nodes[0].gpus] == [1, 1, 1, 0, 0, 0, 0, 0]


def test_mig_pods_allocate_slices_of_their_profile() -> None:
    node = load_inventory("mixed-a100-h100-l4").node("a100-mig-0")
    back = inventory_from_objects([node_object(node)], [gpu_pod(node.name, "nvidia.com/mig-3g.40gb", 1)])
    used = [g.id for g in back.nodes[0].gpus if g.allocated]
    assert len(used) == 1 and "3g.40gb" in used[0]


def test_without_topology_annotation_sxm_gpus_share_an_island_and_split_over_numa() -> None:
    node = load_inventory("h100-nvlink").nodes[0]
    obj = node_object(node, annotate=False)
    obj["metadata"]["annotations"] = {"gpuplace.io/numa-nodes": "2"}
    back = inventory_from_objects([obj]).nodes[0]
    assert {g.nvlink_island for g in back.gpus} == {"nvlink"}
    assert [g.numa_node for g in back.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]


def test_unknown_product_label_keeps_node_and_warns() -> None:
    obj = node_object(load_inventory("h100-nvlink").nodes[0])
    obj["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-Hyper-Z"
    back = inventory_from_objects([obj])
    assert len(back.nodes) == 1 and all(not g.known for g in back.nodes[0].gpus)
    assert "NVIDIA-Hyper-Z" in back.warnings[0]


def test_cluster_without_gpus_is_an_error() -> None:
    cpu_node = {"metadata": {"name": "cpu"}, "status": {"allocatable": {"cpu": "4", "memory": "8Gi"}}}
    with pytest.raises(InvalidInput, match="no GPUs"):
        inventory_from_objects([cpu_node])


@pytest.mark.parametrize(("text", "value"), [("96", 96), ("500m", 0.5), ("2Gi", 2 * 2**30), ("1k", 1000)])
def test_quantity(text: str, value: float) -> None:
    assert quantity(text, "f") == value


def test_bad_quantity_names_field() -> None:
    with pytest.raises(InvalidInput, match="cpu"):
        quantity("lots", "cpu")


def require_trace() -> Path:
    nodes = TRACE / "openb_node_list_gpu_node.csv"
    assert nodes.is_file(), f"the Alibaba trace is missing: expected {nodes} (see shared/data/README.md)"
    return nodes


def test_alibaba_node_list_as_inventory() -> None:
    inv = load_inventory(str(require_trace()))
    assert len(inv.nodes) == 1213 and inv.physical_gpu_count == 6212
    assert {g.gpu for _, g in inv.devices() if g.product == "V100M32"} == {"V100-SXM2-32GB"}
    assert any("G2" in w for w in inv.warnings) and any("P100" in w for w in inv.warnings)


def test_alibaba_pod_list() -> None:
    require_trace()
    tasks = read_alibaba_tasks(TRACE / "openb_pod_list_default.csv")
    assert len(tasks) == 8152
    assert tasks[1].gpu_demand == pytest.approx(0.46)
    assert max(t.num_gpu for t in tasks) == 8
    constrained = read_alibaba_tasks(TRACE / "openb_pod_list_gpuspec33.csv")
    assert ("V100M16", "V100M32") in {t.gpu_spec for t in constrained}


def test_alibaba_duplicate_node_is_an_error(tmp_path: Path) -> None:
    p = tmp_path / "n.csv"
    p.write_text("sn,cpu_milli,memory_mib,gpu,model\na,1000,1024,1,T4\na,1000,1024,1,T4\n")
    with pytest.raises(InvalidInput, match="listed twice"):
        read_alibaba_nodes(p)


def test_alibaba_pod_list_without_gpu_spec_column() -> None:
    require_trace()
    tasks = read_alibaba_tasks(TRACE / "openb_pod_list_multigpu20.csv")
    assert tasks and all(t.gpu_spec == () for t in tasks)


def test_time_slicing_survives_the_round_trip() -> None:
    fleet = load_inventory("mixed-a100-h100-l4")
    shared = fleet.node("l4-shared-0")
    assert node_resources(shared)["nvidia.com/gpu"] == "8"
    back = inventory_from_objects([node_object(shared)], [gpu_pod(shared.name, "nvidia.com/gpu", 1)]).nodes[0]
    assert back.gpu_sharing == 2
    assert [g.allocated for g in back.gpus] == [0.5, 0, 0, 0]


@pytest.mark.parametrize("bad", [".", "", "abc", "1.2.3", "5Xi"])
def test_quantity_rejects_what_is_not_a_quantity(bad: str) -> None:
    from gpuplace.errors import InvalidInput
    from gpuplace.inventory.cluster import quantity

    with pytest.raises(InvalidInput, match="is not a Kubernetes quantity"):
        quantity(bad, "node/x.capacity.nvidia.com/gpu")


def test_running_pods_give_the_fleets_workload_and_the_cpu_they_hold() -> None:
    fleet = load_inventory("mixed-a100-h100-l4")
    whole = next(n for n in fleet.nodes if n.gpu_sharing == 1 and not n.mig_slices)
    shared = fleet.node("l4-shared-0")
    pods = [
        gpu_pod(whole.name, "nvidia.com/gpu", 2),
        gpu_pod(shared.name, "nvidia.com/gpu", 1),
        gpu_pod(whole.name, "nvidia.com/gpu", 4, phase="Succeeded"),  # finished: not workload
        {"spec": {"nodeName": whole.name, "containers": [{"resources": {"requests": {"cpu": "1500m"}}}]}},
        {"spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}]}},  # not bound yet
    ]
    pods[0]["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "6"}
    pods[0]["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    objects = [node_object(whole), node_object(shared)]
    shapes = running_workload(objects, pods)
    assert sorted(shapes) == sorted(
        [
            (2, 1000, 6000, frozenset({"NVIDIA-H100-80GB-HBM3"})),
            (1, 500, 0, frozenset()),  # one of a 2-way time-sliced GPU is half a GPU
            (0, 0, 1500, frozenset()),
        ]
    )
    back = inventory_from_objects(objects, pods)
    assert back.node(whole.name).cpu_allocated == pytest.approx(7.5)


def test_plan_workload_prefers_the_given_mix_then_the_trace_then_the_default(tmp_path: Path) -> None:
    from gpuplace.inventory import inventory_source
    from gpuplace.steps.plan import plan_workload

    fleet = inventory_source("h100-nvlink")
    assert fleet.kind == "bundled" and fleet.path is not None and fleet.path.name == "h100-nvlink.yaml"
    assert plan_workload(fleet, "1:1").source == "given"
    fallback = plan_workload(fleet)
    assert fallback.source == "default mix" and "carries no workload" in fallback.detail
    nodes = inventory_source(str(require_trace()))
    assert nodes.kind == "alibaba"
    trace = plan_workload(nodes)
    assert trace.source == "trace" and trace.tasks == 8152 and trace.detail == "openb_pod_list_default.csv"
    (tmp_path / "pods.csv").write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1000,1,0,0\n")
    no_gpu = plan_workload(fleet, workload=str(tmp_path / "pods.csv"))
    assert no_gpu.source == "default mix" and "no GPU task" in no_gpu.detail
