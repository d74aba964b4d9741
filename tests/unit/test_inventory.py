"""Fleet files and bundled fleets: parsing, topology, MIG layouts, labels, and every bad-input error."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

import pytest
import yaml

from gpuplace.catalog import load_gpu_catalog
from gpuplace.errors import InvalidInput, UnknownName
from gpuplace.inventory import bundled_fleet_names, load_inventory, parse_fleet
from gpuplace.labels import gfd_labels, node_resources, used_resources

CATALOG = load_gpu_catalog()


def fleet(text: str) -> object:
    return yaml.safe_load(dedent(text))


def test_bundled_fleets_are_addressable_by_name() -> None:
    assert set(bundled_fleet_names()) >= {"mixed-a100-h100-l4", "h100-nvlink"}


def test_h100_nvlink_fleet_has_two_numa_nodes_and_one_nvlink_island_per_host() -> None:
    inv = load_inventory("h100-nvlink")
    assert inv.source == "h100-nvlink"
    assert len(inv.nodes) == 4 and inv.gpu_count == 32
    for node in inv.nodes:
        assert node.numa_nodes == 2 and node.cpu_cores == 192
        assert {g.gpu for g in node.gpus} == {"H100-SXM5-80GB"}
        assert [g.numa_node for g in node.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
        assert len({g.pcie_switch for g in node.gpus}) == 4
        assert {g.nvlink_island for g in node.gpus} == {"nvswitch"}
        assert node.taints[0].key == "nvidia.com/gpu"
    assert {n.zone for n in inv.nodes} == {"zone-a", "zone-b"}
    assert len({g.id for _, g in inv.devices()}) == 32


def test_mixed_fleet_has_mig_slices_preallocations_and_three_models() -> None:
    inv = load_inventory("mixed-a100-h100-l4")
    models = {g.gpu for _, g in inv.devices()}
    assert models == {"H100-SXM5-80GB", "A100-SXM4-80GB", "L4-24GB"}
    mig = inv.node("a100-mig-0")
    assert mig.mig_strategy == "mixed"
    assert mig.physical_gpu_count == 8 and len(mig.whole_gpus) == 4
    assert {s.mig_profile for s in mig.mig_slices} == {"3g.40gb", "2g.20gb", "1g.10gb"}
    assert all(s.nvlink_island == "" for s in mig.mig_slices)
    assert sum(g.allocated for g in inv.node("a100-0").gpus) == 2
    assert not inv.warnings


def test_gfd_labels_and_resources_for_mixed_strategy() -> None:
    node = load_inventory("mixed-a100-h100-l4").node("a100-mig-0")
    labels = gfd_labels(node)
    assert labels["nvidia.com/mig.strategy"] == "mixed"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"
    assert labels["nvidia.com/gpu.count"] == "8"
    assert labels["nvidia.com/mig-3g.40gb.count"] == "2"
    assert labels["topology.kubernetes.io/zone"] == "zone-b"
    res = node_resources(node)
    assert res["nvidia.com/gpu"] == "4"
    assert res["nvidia.com/mig-1g.10gb"] == "18"
    assert used_resources(node) == {"nvidia.com/mig-1g.10gb": 2}


def test_single_strategy_exposes_slices_as_gpus_with_mig_product() -> None:
    inv = parse_fleet(
        fleet(
            """
            nodes:
              - name: n
                mig_strategy: single
                gpus: [{product: A100-SXM4-40GB, count: 2, mig: [1g.5gb, 1g.5gb, 1g.5gb]}]
            """
        ),
        "t",
        CATALOG,
    )
    node = inv.nodes[0]
    labels = gfd_labels(node)
    assert labels["nvidia.com/gpu.product"].endswith("-MIG-1g.5gb")
    assert labels["nvidia.com/gpu.count"] == "6"
    assert node_resources(node)["nvidia.com/gpu"] == "6"


def test_fleet_file_by_path(tmp_path: Path) -> None:
    path = tmp_path / "f.yaml"
    path.write_text("nodes: [{name: a, gpus: [{product: NVIDIA L4, count: 2}]}]\n")
    inv = load_inventory(str(path))
    assert inv.source == str(path) and inv.gpu_count == 2
    assert inv.nodes[0].gpus[1].id == "a/gpu1" and inv.nodes[0].gpus[0].gpu == "L4-24GB"


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        ("nodes: [{name: a, gpus: []}]", "fleet.nodes", "no GPUs"),
        ("nodes: []", "fleet.nodes", "non-empty"),
        (
            "nodes: [{name: a, gpus: [{product: L4}]}, {name: a, gpus: [{product: L4}]}]",
            "nodes[1].name",
            "listed twice",
        ),
        (
            "nodes: [{name: 'n{i}', count: 2, gpus: [{product: L4}]}, {name: n1}]",
            "nodes[1].name",
            "listed twice",
        ),
        ("nodes: [{name: a, gpu: []}]", "nodes[0].gpu", "not a known key"),
        (
            "nodes: [{name: a, gpus: [{product: L4, allocated: 1.5}]}]",
            "nodes[0].gpus[0].allocated",
            "between",
        ),
        (
            "nodes: [{name: a, gpus: [{product: L4, mig: [1g.5gb]}]}]",
            "nodes[0].gpus[0].mig",
            "does not support MIG",
        ),
        (
            "nodes: [{name: a, gpus: [{product: A100-80GB, mig: [4g.40gb, 4g.40gb]}]}]",
            "nodes[0].gpus[0].mig",
            "exceeds",
        ),
        (
            "nodes: [{name: a, gpus: [{product: A100-80GB, mig: [3g.40gb, 3g.40gb, 2g.20gb]}]}]",
            "nodes[0].gpus[0].mig",
            "compute",
        ),
        (
            "nodes: [{name: a, gpus: [{product: A100-80GB, mig: [9g.1gb]}]}]",
            "nodes[0].gpus[0].mig",
            "not a MIG profile",
        ),
        (
            "nodes: [{name: a, mig_strategy: none, gpus: [{product: A100-80GB, mig: [7g.80gb]}]}]",
            "nodes[0].mig_strategy",
            "MIG slices",
        ),
        (
            "nodes: [{name: a, taints: [{key: k, effect: Never}], gpus: [{product: L4}]}]",
            "nodes[0].taints[0].effect",
            "unknown",
        ),
        (
            "nodes: [{name: a, gpus: [{product: L4, count: 2, numa_node: [0]}]}]",
            "nodes[0].gpus[0].numa_node",
            "entries",
        ),
        ("nodes: [{name: a, gpus: [{product: L4, numa_node: 1}]}]", "nodes[0].gpus", "NUMA"),
        ("nodes: [{name: a, count: 3, gpus: [{product: L4}]}]", "nodes[0].name", "{i}"),
        ("schema: other/v9\nnodes: [{name: a}]", "fleet.schema", "unsupported"),
    ],
)
def test_bad_fleet_files_name_the_field(text: str, field: str, words: str) -> None:
    with pytest.raises(InvalidInput) as err:
        parse_fleet(yaml.safe_load(text), "t", CATALOG)
    assert err.value.field == field
    assert words in str(err.value)


def test_unknown_product_keeps_node_marks_gpus_unknown_and_warns() -> None:
    inv = parse_fleet(
        yaml.safe_load("nodes: [{name: a, gpus: [{product: Mystery-X9, count: 2}, {product: L4}]}]"),
        "t",
        CATALOG,
    )
    node = inv.nodes[0]
    assert [g.gpu for g in node.gpus] == ["", "", "L4-24GB"]
    assert [g.known for g in node.gpus] == [False, False, True]
    assert len(inv.warnings) == 1 and "Mystery-X9" in inv.warnings[0] and "unknown" in inv.warnings[0]


def test_unknown_bundled_name_suggests_close_match() -> None:
    with pytest.raises(UnknownName) as err:
        load_inventory("h100-nvlnk")
    assert "h100-nvlink" in str(err.value)


def test_missing_fleet_path_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="no such file"):
        load_inventory(str(tmp_path / "nope.yaml"))
