"""Fleet files: the YAML schema that describes a GPU fleet, and its parser into an :class:`Inventory`.

A fleet file lists nodes with their GPUs in groups that share topology (NUMA node, PCIe switch,
NVLink island) and, per GPU, an optional MIG layout and what is already allocated. ``count`` on a node
stamps copies (``{i}`` in the name and rack is the copy's number). The schema is documented in
docs/inventory.md; every problem is reported with its path in the file (``nodes[2].gpus[0].mig``),
the value and what to do, and nothing is returned half-parsed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from gpuplace.catalog import GpuCatalog
from gpuplace.errors import InvalidInput
from gpuplace.types import GpuDevice, GpuSpec, Inventory, Node, Taint
from gpuplace.types.fleet import MIG_STRATEGIES, TAINT_EFFECTS

SCHEMA = "gpuplace.io/fleet/v1"
FILE_KEYS = frozenset({"schema", "name", "description", "defaults", "nodes"})
NODE_KEYS = frozenset(
    {
        "name",
        "count",
        "zone",
        "rack",
        "cpu_cores",
        "memory_gib",
        "numa_nodes",
        "mig_strategy",
        "labels",
        "taints",
        "gpus",
        "time_slicing",
    }
)
DEFAULT_KEYS = NODE_KEYS - {"name", "count", "gpus"}
GPU_KEYS = frozenset(
    {"product", "count", "memory_gib", "numa_node", "pcie_switch", "nvlink_island", "allocated", "mig"}
)
MAX_NODE_COPIES = 100_000


def _fail(
    path: str, value: object, problem: str, fix: str = "See the fleet file schema in docs/inventory.md"
) -> InvalidInput:
    return InvalidInput(path, value, problem, fix)


def _mapping(value: object, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _fail(path, value, f"must be a mapping, not {type(value).__name__}")
    return value


def _check_keys(entry: Mapping[str, Any], allowed: frozenset[str], path: str) -> None:
    unknown = sorted(str(k) for k in entry if k not in allowed)
    if unknown:
        raise _fail(
            f"{path}.{unknown[0]}",
            entry[unknown[0]],
            "is not a known key",
            f"Known keys: {', '.join(sorted(allowed))}",
        )


def _int(value: object, path: str, *, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(path, value, "must be an integer")
    if value < minimum:
        raise _fail(path, value, f"must be at least {minimum}")
    return value


def _float(value: object, path: str, *, minimum: float = 0.0, maximum: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _fail(path, value, "must be a finite number")
    if not minimum <= value <= maximum:
        raise _fail(path, value, f"must be between {minimum} and {maximum}")
    return float(value)


def _str(value: object, path: str, *, allow_empty: bool = True) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise _fail(path, value, "must be a string")
    text = str(value)
    if not allow_empty and not text.strip():
        raise _fail(path, value, "must not be empty")
    return text


def parse_taints(value: object, path: str) -> tuple[Taint, ...]:
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise _fail(path, value, "must be a list of {key, value, effect}")
    taints = []
    for i, raw in enumerate(value):
        entry = _mapping(raw, f"{path}[{i}]")
        _check_keys(entry, frozenset({"key", "value", "effect"}), f"{path}[{i}]")
        effect = _str(entry.get("effect", "NoSchedule"), f"{path}[{i}].effect")
        if effect not in TAINT_EFFECTS:
            raise _fail(
                f"{path}[{i}].effect",
                effect,
                "unknown taint effect",
                f"Use one of {', '.join(TAINT_EFFECTS)}",
            )
        taints.append(
            Taint(
                key=_str(entry.get("key"), f"{path}[{i}].key", allow_empty=False),
                value=_str(entry.get("value", ""), f"{path}[{i}].value"),
                effect=effect,
            )
        )
    return tuple(taints)


def _per_gpu(value: object, count: int, path: str) -> list[object]:
    """A scalar applies to every GPU of a group; a list gives one value per GPU."""
    if isinstance(value, list):
        if len(value) != count:
            raise _fail(
                path,
                value,
                f"has {len(value)} entries for {count} GPUs",
                "Give one value per GPU, or one scalar",
            )
        return list(value)
    return [value] * count


def match_product(product: str, catalog: GpuCatalog, memory_gib: float | None = None) -> GpuSpec | None:
    """The catalog entry for a product string, also when it carries a MIG suffix (GFD single strategy)."""
    base = product.split("-MIG-")[0]
    return catalog.find(base) or catalog.match_device(base.replace("-", " "), memory_gib)


def mig_layout(spec: GpuSpec, profiles: Sequence[str], path: str) -> None:
    """Check that the slices fit the GPU: known profiles, instance limits, compute and memory slices."""
    known = {m.name: m for m in spec.mig_profiles}
    if not known:
        raise _fail(
            path, list(profiles), f"{spec.name} does not support MIG", "Remove mig, or use a MIG-capable GPU"
        )
    for p in profiles:
        if p not in known:
            raise _fail(path, p, f"is not a MIG profile of {spec.name}", f"Use one of {', '.join(known)}")
    for name, m in known.items():
        n = sum(1 for p in profiles if p == name)
        if n > m.max_instances:
            raise _fail(
                path,
                list(profiles),
                f"{n}× {name} exceeds the {m.max_instances} instances a {spec.name} allows",
            )
    compute = sum(known[p].compute_slices for p in profiles)
    memory = sum(known[p].memory_slices for p in profiles)
    if compute > spec.compute_slices or memory > spec.memory_slices:
        raise _fail(
            path,
            list(profiles),
            f"uses {compute}/{spec.compute_slices} compute and {memory}/{spec.memory_slices} memory slices",
            "Choose a layout that fits one GPU (NVIDIA MIG user guide)",
        )


def _mig_slices(mig_raw: object, path: str) -> list[tuple[str, float]]:
    """A GPU group's ``mig`` list as (profile, allocated): each entry a profile or {profile, allocated}."""
    if not isinstance(mig_raw, list) or not mig_raw:
        raise _fail(f"{path}.mig", mig_raw, "must be a non-empty list of profiles or {profile, allocated}")
    slices: list[tuple[str, float]] = []
    for j, s in enumerate(mig_raw):
        if isinstance(s, Mapping):
            _check_keys(s, frozenset({"profile", "allocated"}), f"{path}.mig[{j}]")
            slices.append(
                (
                    _str(s.get("profile"), f"{path}.mig[{j}].profile", allow_empty=False),
                    _float(s.get("allocated", 0.0), f"{path}.mig[{j}].allocated", maximum=1.0),
                )
            )
        else:
            slices.append((_str(s, f"{path}.mig[{j}]", allow_empty=False), 0.0))
    return slices


def _gpu_group(
    raw: object, path: str, node_name: str, first_index: int, catalog: GpuCatalog, warnings: list[str]
) -> list[GpuDevice]:
    entry = _mapping(raw, path)
    _check_keys(entry, GPU_KEYS, path)
    product = _str(entry.get("product"), f"{path}.product", allow_empty=False)
    count = _int(entry.get("count", 1), f"{path}.count", minimum=1)
    mem = entry.get("memory_gib")
    memory_override = None if mem is None else _float(mem, f"{path}.memory_gib", minimum=0.001)
    spec = match_product(product, catalog, memory_override)
    if spec is None:
        warnings.append(
            f"{path}.product={product!r}: not in the GPU catalog; {node_name} is kept with {count} GPU(s) "
            "marked unknown, which the planner will not use. Add the GPU to a catalog copy (docs/catalog.md)"
        )
    memory = memory_override if memory_override is not None else (spec.memory_gib if spec else 0.0)
    numa = _per_gpu(entry.get("numa_node", 0), count, f"{path}.numa_node")
    switch = _per_gpu(entry.get("pcie_switch", ""), count, f"{path}.pcie_switch")
    island = _per_gpu(entry.get("nvlink_island", ""), count, f"{path}.nvlink_island")
    mig_raw = entry.get("mig")
    devices: list[GpuDevice] = []
    if mig_raw is None:
        allocated = _per_gpu(entry.get("allocated", 0.0), count, f"{path}.allocated")
        for k in range(count):
            index = first_index + k
            devices.append(
                GpuDevice(
                    id=f"{node_name}/gpu{index}",
                    index=index,
                    gpu=spec.name if spec else "",
                    product=product,
                    memory_gib=memory,
                    numa_node=_int(numa[k], f"{path}.numa_node"),
                    pcie_switch=_str(switch[k], f"{path}.pcie_switch"),
                    nvlink_island=_str(island[k], f"{path}.nvlink_island"),
                    allocated=_float(allocated[k], f"{path}.allocated", maximum=1.0),
                )
            )
        return devices
    if "allocated" in entry:
        raise _fail(
            f"{path}.allocated",
            entry["allocated"],
            "is set on a MIG-partitioned GPU",
            "Give allocated per slice inside mig",
        )
    slices = _mig_slices(mig_raw, path)
    if spec is None:
        raise _fail(
            f"{path}.product",
            product,
            "a MIG layout needs a GPU the catalog knows",
            "Use a catalog GPU name or GFD product",
        )
    mig_layout(spec, [p for p, _ in slices], f"{path}.mig")
    mig_memory = {m.name: m.memory_gib for m in spec.mig_profiles}
    for k in range(count):
        index = first_index + k
        seen: dict[str, int] = {}
        for profile, alloc in slices:
            n = seen.get(profile, 0)
            seen[profile] = n + 1
            devices.append(
                GpuDevice(
                    id=f"{node_name}/gpu{index}/{profile}-{n}",
                    index=index,
                    gpu=spec.name,
                    product=product,
                    memory_gib=mig_memory[profile],
                    numa_node=_int(numa[k], f"{path}.numa_node"),
                    pcie_switch=_str(switch[k], f"{path}.pcie_switch"),
                    nvlink_island="",  # MIG instances have no NVLink peer-to-peer
                    mig_profile=profile,
                    allocated=alloc,
                )
            )
    return devices


def _node(
    entry: Mapping[str, Any],
    defaults: Mapping[str, Any],
    path: str,
    copy: int | None,
    catalog: GpuCatalog,
    warnings: list[str],
) -> Node:
    merged = {**defaults, **entry}
    raw_name = _str(merged.get("name"), f"{path}.name", allow_empty=False)
    name = raw_name.replace("{i}", str(copy)) if copy is not None else raw_name
    rack = _str(merged.get("rack", ""), f"{path}.rack")
    rack = rack.replace("{i}", str(copy)) if copy is not None else rack
    labels_raw = _mapping(merged.get("labels", {}), f"{path}.labels")
    labels = {str(k): _str(v, f"{path}.labels.{k}") for k, v in labels_raw.items()}
    numa_nodes = _int(merged.get("numa_nodes", 1), f"{path}.numa_nodes", minimum=1)
    gpus_raw = merged.get("gpus", [])
    if not isinstance(gpus_raw, list):
        raise _fail(f"{path}.gpus", gpus_raw, "must be a list of GPU groups")
    devices: list[GpuDevice] = []
    next_index = 0
    for g, group in enumerate(gpus_raw):
        made = _gpu_group(group, f"{path}.gpus[{g}]", name, next_index, catalog, warnings)
        devices.extend(made)
        next_index = max(d.index for d in made) + 1
    for d in devices:
        if d.numa_node >= numa_nodes:
            raise _fail(
                f"{path}.gpus",
                d.numa_node,
                f"GPU {d.index} is on NUMA node {d.numa_node} but the node has numa_nodes={numa_nodes}",
                "Raise numa_nodes or fix numa_node",
            )
    has_mig = any(d.mig_profile for d in devices)
    strategy = _str(merged.get("mig_strategy", "mixed" if has_mig else "none"), f"{path}.mig_strategy")
    if strategy not in MIG_STRATEGIES:
        raise _fail(f"{path}.mig_strategy", strategy, "unknown", f"Use one of {', '.join(MIG_STRATEGIES)}")
    if has_mig and strategy == "none":
        raise _fail(f"{path}.mig_strategy", strategy, "the node has MIG slices", "Use mixed or single")
    if strategy == "single":
        profiles = {d.mig_profile for d in devices}
        if len(profiles) != 1 or "" in profiles:
            raise _fail(
                f"{path}.mig_strategy",
                strategy,
                "single needs every GPU split into one profile, got "
                + str(sorted(p or "whole GPU" for p in profiles)),
                "Use mixed, or give every GPU the same MIG layout",
            )
    return Node(
        name=name,
        gpus=tuple(devices),
        labels=MappingProxyType(labels),
        taints=parse_taints(merged.get("taints", []), f"{path}.taints"),
        zone=_str(merged.get("zone", ""), f"{path}.zone"),
        rack=rack,
        cpu_cores=_int(merged.get("cpu_cores", 0), f"{path}.cpu_cores"),
        memory_gib=_float(merged.get("memory_gib", 0.0), f"{path}.memory_gib"),
        numa_nodes=numa_nodes,
        mig_strategy=strategy,
        gpu_sharing=_int(merged.get("time_slicing", 1), f"{path}.time_slicing", minimum=1),
    )


def parse_fleet(document: object, source: str, catalog: GpuCatalog) -> Inventory:
    """Turn a parsed fleet document into an :class:`Inventory` (see docs/inventory.md)."""
    doc = _mapping(document, "fleet")
    _check_keys(doc, FILE_KEYS, "fleet")
    schema = doc.get("schema", SCHEMA)
    if schema != SCHEMA:
        raise _fail("fleet.schema", schema, "unsupported schema", f"Use schema: {SCHEMA}")
    defaults = _mapping(doc.get("defaults", {}), "fleet.defaults")
    _check_keys(defaults, DEFAULT_KEYS, "fleet.defaults")
    nodes_raw = doc.get("nodes")
    if not isinstance(nodes_raw, list) or not nodes_raw:
        raise _fail("fleet.nodes", nodes_raw, "must be a non-empty list of nodes")
    warnings: list[str] = []
    nodes: list[Node] = []
    where: dict[str, str] = {}
    for i, raw in enumerate(nodes_raw):
        path = f"nodes[{i}]"
        entry = _mapping(raw, path)
        _check_keys(entry, NODE_KEYS, path)
        count = _int(entry.get("count", 1), f"{path}.count", minimum=1)
        if count > MAX_NODE_COPIES:
            raise _fail(f"{path}.count", count, f"more than {MAX_NODE_COPIES} copies")
        if count > 1 and "{i}" not in str(entry.get("name", "")):
            raise _fail(
                f"{path}.name",
                entry.get("name"),
                "count > 1 needs {i} in the name",
                "e.g. name: gpu-node-{i}",
            )
        for copy in range(count) if count > 1 else [None]:
            node = _node(entry, defaults, path, copy, catalog, warnings)
            if node.name in where:
                raise _fail(
                    f"{path}.name",
                    node.name,
                    f"is listed twice (also at {where[node.name]})",
                    "Give every node a unique name",
                )
            where[node.name] = path
            nodes.append(node)
    inventory = Inventory(nodes=tuple(nodes), source=source, warnings=tuple(warnings))
    require_gpus(inventory, "fleet.nodes")
    return inventory


def require_gpus(inventory: Inventory, field: str) -> None:
    """An inventory the planner can do nothing with is an input error, not an empty plan."""
    if not any(n.gpus for n in inventory.nodes):
        raise InvalidInput(
            field,
            f"{len(inventory.nodes)} nodes",
            "the inventory has no GPUs",
            "List GPUs under each node's gpus (fleet file), or point at a cluster with GPU nodes",
        )


def read_fleet_file(path: Path, catalog: GpuCatalog, *, source: str = "") -> Inventory:
    try:
        document = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        raise InvalidInput("inventory", str(path), f"is not valid YAML ({e})", "Fix the file") from None
    return parse_fleet(document, source or str(path), catalog)
