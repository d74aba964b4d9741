"""An inventory as JSON, the only module that writes and reads it: what the inventory step
(``gpuplace inventory --out``, the ``discover_inventory`` component) writes with :func:`write_inventory_json`,
and what ``load_inventory("<file>.json")`` reads back (the dataclasses' fields, one object per node)."""

from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType
from typing import Any

from gpuplace.errors import InvalidInput
from gpuplace.types import GpuDevice, Inventory, Node, Taint


def inventory_to_json(inventory: Inventory) -> dict[str, Any]:
    return {
        "source": inventory.source,
        "warnings": list(inventory.warnings),
        "nodes": [
            {
                "name": n.name,
                "zone": n.zone,
                "rack": n.rack,
                "cpu_cores": n.cpu_cores,
                "memory_gib": n.memory_gib,
                "numa_nodes": n.numa_nodes,
                "mig_strategy": n.mig_strategy,
                "gpu_sharing": n.gpu_sharing,
                "labels": dict(n.labels),
                "taints": [{"key": t.key, "value": t.value, "effect": t.effect} for t in n.taints],
                "gpus": [{f: getattr(g, f) for f in GpuDevice.__dataclass_fields__} for g in n.gpus],
            }
            for n in inventory.nodes
        ],
    }


def inventory_from_json(data: Any, source: str) -> Inventory:
    try:
        nodes = tuple(
            Node(
                name=n["name"],
                gpus=tuple(GpuDevice(**g) for g in n.get("gpus", ())),
                labels=MappingProxyType(dict(n.get("labels", {}))),
                taints=tuple(Taint(**t) for t in n.get("taints", ())),
                zone=n.get("zone", ""),
                rack=n.get("rack", ""),
                cpu_cores=int(n.get("cpu_cores", 0)),
                memory_gib=float(n.get("memory_gib", 0.0)),
                numa_nodes=int(n.get("numa_nodes", 1)),
                mig_strategy=n.get("mig_strategy", "none"),
                gpu_sharing=int(n.get("gpu_sharing", 1)),
            )
            for n in data["nodes"]
        )
    except (KeyError, TypeError, ValueError) as e:
        raise InvalidInput(
            "inventory",
            source,
            f"is not a gpuplace inventory JSON ({type(e).__name__}: {e})",
            "Write it with gpuplace inventory --out",
        ) from None
    return Inventory(
        nodes=nodes, source=str(data.get("source") or source), warnings=tuple(data.get("warnings") or ())
    )


def write_inventory_json(inventory: Inventory, path: str | Path) -> Path:
    """Write ``inventory`` to the file ``path`` (a KFP output artifact or ``--out``)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(inventory_to_json(inventory), indent=2) + "\n")
    return out


def read_inventory_json(path: Path) -> Inventory:
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise InvalidInput("inventory", str(path), f"is not valid JSON ({e.msg})", "Fix the file") from None
    return inventory_from_json(data, str(path))
