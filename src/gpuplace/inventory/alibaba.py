"""The Alibaba GPU trace (cluster-trace-gpu-v2023, "openb") as an inventory and as a task list.

The node list (``openb_node_list_gpu_node.csv``: ``sn, cpu_milli, memory_mib, gpu, model``) becomes an
:class:`~gpuplace.types.Inventory`; its model codes map to catalog GPUs where they can (T4, V100M16,
V100M32, A10) and stay unknown otherwise (P100 is not in the catalog; G2 and G3 are undisclosed), with
one warning per code. The pod list (``openb_pod_list_*.csv``) becomes :class:`TraceTask` values for the
fragmentation benchmark. Weng et al., "Beware of Fragmentation", USENIX ATC'23 published the trace.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gpuplace.catalog import GpuCatalog, load_gpu_catalog
from gpuplace.errors import InvalidInput
from gpuplace.inventory.fleetfile import require_gpus
from gpuplace.types import GpuDevice, Inventory, Node

NODE_COLUMNS: tuple[str, ...] = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
# gpu_spec is optional: the multigpu20 variant has no such column.
POD_COLUMNS: tuple[str, ...] = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
# The trace's model codes that name a GPU the catalog has.
MODEL_CODES: Mapping[str, str] = {
    "T4": "T4-16GB",
    "V100M16": "V100-SXM2-16GB",
    "V100M32": "V100-SXM2-32GB",
    "A10": "A10-24GB",
}


@dataclass(frozen=True, slots=True)
class TraceTask:
    """One task of the pod list: ``num_gpu`` whole GPUs, or a ``gpu_milli`` share of one GPU."""

    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int  # per GPU, 1..1000
    gpu_spec: tuple[str, ...]  # allowed trace model codes; empty = any

    @property
    def gpu_demand(self) -> float:
        """GPUs requested, fractions included (a 460-milli task asks for 0.46 GPU)."""
        return self.num_gpu * self.gpu_milli / 1000 if self.num_gpu else 0.0


def _rows(path: Path, columns: tuple[str, ...], field: str) -> list[dict[str, str]]:
    if not path.is_file():
        raise InvalidInput(
            field, str(path), "no such file", "Point at a file of the Alibaba openb trace format"
        )
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in columns if c not in (reader.fieldnames or ())]
        if missing:
            raise InvalidInput(
                f"{field}:columns",
                missing,
                f"missing from {path.name}",
                f"Give the columns {', '.join(columns)}",
            )
        return list(reader)


def _int(row: Mapping[str, str], column: str, path: Path, line: int) -> int:
    raw = row.get(column) or "0"
    try:
        value = int(float(raw))
    except ValueError:
        raise InvalidInput(f"{path.name}:{line}:{column}", raw, "is not a number", "Fix that cell") from None
    if value < 0:
        raise InvalidInput(f"{path.name}:{line}:{column}", raw, "must not be negative", "Fix that cell")
    return value


def read_alibaba_nodes(path: Path, *, catalog: GpuCatalog | None = None) -> Inventory:
    """The trace's node list as an inventory; nodes without GPUs are kept (they hold no GPU devices)."""
    catalog = catalog or load_gpu_catalog()
    nodes: list[Node] = []
    unknown: Counter[str] = Counter()
    seen: set[str] = set()
    for line, row in enumerate(_rows(path, NODE_COLUMNS, "inventory"), start=2):
        name = row["sn"].strip()
        if not name:
            raise InvalidInput(f"{path.name}:{line}:sn", name, "is empty", "Name every node")
        if name in seen:
            raise InvalidInput(
                f"{path.name}:{line}:sn", name, "is listed twice", "Give every node a unique sn"
            )
        seen.add(name)
        count = _int(row, "gpu", path, line)
        code = row["model"].strip()
        spec = catalog.find(MODEL_CODES[code]) if code in MODEL_CODES else None
        if count and spec is None:
            unknown[code] += count
        gpus = tuple(
            GpuDevice(
                id=f"{name}/gpu{i}",
                index=i,
                gpu=spec.name if spec else "",
                product=code,
                memory_gib=spec.memory_gib if spec else 0.0,
            )
            for i in range(count)
        )
        nodes.append(
            Node(
                name=name,
                gpus=gpus,
                cpu_cores=_int(row, "cpu_milli", path, line) // 1000,
                memory_gib=_int(row, "memory_mib", path, line) / 1024,
            )
        )
    warnings = tuple(
        f"model={code!r}: not in the GPU catalog; {n} GPUs kept as unknown (the planner will not use them)"
        for code, n in sorted(unknown.items())
    )
    inventory = Inventory(nodes=tuple(nodes), source=str(path), warnings=warnings)
    require_gpus(inventory, "inventory")
    return inventory


def read_alibaba_tasks(path: Path) -> tuple[TraceTask, ...]:
    """The trace's pod list, in file order; CPU-only tasks (``num_gpu`` 0) are included."""
    tasks = []
    for line, row in enumerate(_rows(path, POD_COLUMNS, "pods"), start=2):
        num_gpu = _int(row, "num_gpu", path, line)
        milli = _int(row, "gpu_milli", path, line)
        if num_gpu and not 0 < milli <= 1000:
            raise InvalidInput(f"{path.name}:{line}:gpu_milli", milli, "must be in 1..1000", "Fix that cell")
        if num_gpu > 1 and milli != 1000:
            raise InvalidInput(
                f"{path.name}:{line}:gpu_milli", milli, "multi-GPU tasks must ask for whole GPUs", "Use 1000"
            )
        spec = tuple(s for s in (row.get("gpu_spec") or "").split("|") if s)
        tasks.append(
            TraceTask(
                name=row["name"],
                cpu_milli=_int(row, "cpu_milli", path, line),
                memory_mib=_int(row, "memory_mib", path, line),
                num_gpu=num_gpu,
                gpu_milli=milli if num_gpu else 0,
                gpu_spec=spec,
            )
        )
    return tuple(tasks)
