"""discover_inventory: the function's wiring called directly, and the real component under kfp.local."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuplace.components.placement.discover_inventory import discover_inventory
from gpuplace.inventory import load_inventory
from tests.support.kfp_artifacts import FakeArtifact as _Out


def test_python_func_writes_an_inventory_the_planner_reads(tmp_path: Path) -> None:
    inv, metrics = _Out(tmp_path / "inventory.json"), _Out(tmp_path / "metrics")
    summary = discover_inventory.python_func(inventory=inv, metrics=metrics, source="h100-nvlink")
    assert summary == "4 nodes, 32 GPUs from h100-nvlink"
    assert metrics.logged == {"nodes": 4.0, "gpus": 32.0, "mig_slices": 0.0, "free_gpus": 32.0}
    back = load_inventory(inv.path)
    assert back.nodes == load_inventory("h100-nvlink").nodes
    assert json.loads(Path(inv.path).read_text())["source"] == "h100-nvlink"


def test_python_func_rejects_an_unknown_fleet(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="inventory='nope'"):
        discover_inventory.python_func(
            inventory=_Out(tmp_path / "i"), metrics=_Out(tmp_path / "m"), source="nope"
        )
    assert not (tmp_path / "i").exists()


@pytest.mark.integration
def test_runs_under_the_local_runner(kfp_local: Path) -> None:
    task = discover_inventory(source="mixed-a100-h100-l4")
    assert task.outputs["Output"] == "8 nodes, 48 GPUs from mixed-a100-h100-l4"
    assert len(load_inventory(task.outputs["inventory"].path).nodes) == 8
