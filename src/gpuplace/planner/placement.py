"""Putting replicas on concrete GPUs: topology-aware GPU-set choice, FGD tie-breaking, and the fit score.

A tensor-parallel group spans nodes only inside one multi-node NVLink domain, and only when no node of that
domain could hold it: nodes GPU Feature Discovery labels with one ``nvidia.com/gpu.clique`` (the trays of a
GB200 NVL72 rack, :func:`choose_across`) may share a group, whole nodes' worth of GPUs first (the fewest
nodes, the same number of GPUs on each, as vLLM's multi-node launch runs them); never two cliques, and without
a clique label a group never spans nodes. A group that fits one node goes on one node. Within a node the
planner tries, best first, one NVLink island, one PCIe switch, one NUMA node, then any GPUs of the node, and
inside a tier takes the smallest group that fits (so larger groups stay whole for later). Across nodes the
order is: better tier, a node this plan does not use yet (replicas spread, which also lets the Deployment pin
exactly one per node), the smaller increase of the fleet's FGD fragmentation as gpuplace scores it
(:func:`~gpuplace.planner.fragmentation.gpuplace_key`), fewer GPUs left, then the node name — so the result is
deterministic. Fragmentation counts every whole GPU (models missing from the catalog too: they are capacity
the fleet's workload may use even where the planner cannot predict latency on them), the node's free CPU
against each task's CPU, and the GPU type against each task's accepted types.

The **GPU-fit score** of a placement (docs/placement.md) is
``0.40·latency + 0.20·memory + 0.25·locality + 0.15·fragmentation``, each term in [0, 1]:
latency = min(1, (1 − r)/0.1) with r the worst of predicted/target p99 TPOT and TTFT; memory = min(1,
(1 − used/usable)/0.1); locality = 1 for one GPU, a MIG slice or NVLink, 0.9 for one PCIe switch or a
shared GPU, 0.8 for one NUMA node, 0.5 across NUMA nodes; fragmentation, with x = ΔF / GPUs taken, is
``0.98 − 0.96·x`` for x in [0, 1] (0.98 when fragmentation is unchanged, 0.02 at one GPU of new
fragmentation per GPU taken), ``0.98 + 0.02·(1 − eˣ)`` below (a decrease) and ``0.02·e^(1−x)`` above:
strictly decreasing, so a larger decrease always scores higher (a clamp at 1 made every decrease alike).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from gpuplace.labels import NVLINK_CLIQUE
from gpuplace.planner.fragmentation import MILLI, NO_CPU_LIMIT, FragmentationModel, gpuplace_key
from gpuplace.planner.hardware import TIERS
from gpuplace.types import GpuDevice, Node

FIT_WEIGHTS: Mapping[str, float] = {"latency": 0.40, "memory": 0.20, "locality": 0.25, "fragmentation": 0.15}
LOCALITY_SCORE: Mapping[str, float] = {
    "single": 1.0,
    "nvlink": 1.0,
    "mig": 1.0,
    "pcie-switch": 0.9,
    "shared": 0.9,
    "numa": 0.8,
    "cross-numa": 0.5,
}
EPS = 1e-9


def fit_score(
    latency_ratio: float, memory_ratio: float, interconnect: str, frag_delta: float, gpus: float
) -> float:
    """The GPU-fit score in [0, 1] (formula in the module docstring)."""
    lat = min(1.0, max(0.0, (1 - latency_ratio) / 0.1)) if math.isfinite(latency_ratio) else 0.0
    mem = min(1.0, max(0.0, (1 - memory_ratio) / 0.1)) if math.isfinite(memory_ratio) else 0.0
    frag = fragmentation_term(frag_delta / gpus) if gpus > 0 else 1.0
    return (
        FIT_WEIGHTS["latency"] * lat
        + FIT_WEIGHTS["memory"] * mem
        + FIT_WEIGHTS["locality"] * LOCALITY_SCORE[interconnect]
        + FIT_WEIGHTS["fragmentation"] * frag
    )


def fragmentation_term(per_gpu: float) -> float:
    """The fit score's fragmentation term in (0, 1) for ΔF per GPU taken (module docstring)."""
    if per_gpu <= 0:
        return 0.98 + 0.02 * (1 - math.exp(max(per_gpu, -700.0)))
    if per_gpu <= 1:
        return 0.98 - 0.96 * per_gpu
    return 0.02 * math.exp(-min(per_gpu - 1, 700.0))


def tier_of(gpus: Sequence[GpuDevice]) -> str:
    if len(gpus) == 1:
        return "single"
    if gpus[0].nvlink_island and all(g.nvlink_island == gpus[0].nvlink_island for g in gpus):
        return "nvlink"
    same_numa = all(g.numa_node == gpus[0].numa_node for g in gpus)
    if same_numa and gpus[0].pcie_switch and all(g.pcie_switch == gpus[0].pcie_switch for g in gpus):
        return "pcie-switch"
    return "numa" if same_numa else "cross-numa"


def best_gpu_set(free: Sequence[GpuDevice], k: int) -> tuple[GpuDevice, ...] | None:
    """The most local ``k`` of a node's free whole GPUs, taking the tightest group that fits."""
    if len(free) < k:
        return None
    groupings: list[Callable[[GpuDevice], object]] = [
        lambda g: (g.numa_node, g.pcie_switch) if g.pcie_switch else None,
        lambda g: g.nvlink_island or None,
        lambda g: g.numa_node,
        lambda g: 0,
    ]
    options: list[tuple[int, int, tuple[int, ...], tuple[GpuDevice, ...]]] = []
    for grouping in groupings:
        groups: dict[object, list[GpuDevice]] = {}
        for g in free:
            key = grouping(g)
            if key is not None:
                groups.setdefault(key, []).append(g)
        fitting = [grp for grp in groups.values() if len(grp) >= k]
        if not fitting:
            continue
        grp = min(fitting, key=lambda grp: (len(grp), min(g.index for g in grp)))
        chosen = tuple(sorted(grp, key=lambda g: (g.numa_node, g.pcie_switch, g.index))[:k])
        options.append((TIERS.index(tier_of(chosen)), len(grp), tuple(g.index for g in chosen), chosen))
    return min(options, key=lambda o: o[:3])[3] if options else None


def gpu_type_of(node: Node) -> str:
    """The GPU type tasks name in their constraints: the reported product, else the catalog name."""
    whole = node.whole_gpus
    return (whole[0].product or whole[0].gpu) if whole else ""


def cpu_free_milli(node: Node) -> int:
    """Free milli-CPU; a node whose CPU is unknown (0 cores) counts as unlimited, not as empty."""
    if node.cpu_cores <= 0:
        return NO_CPU_LIMIT
    return max(0, round((node.cpu_cores - node.cpu_allocated) * 1000))


@dataclass
class FleetState:
    """The allocation the planner works on: a copy of the inventory's shares, updated per replica."""

    nodes: Mapping[str, Node]
    allocated: dict[str, float]
    frag: FragmentationModel

    @classmethod
    def of(cls, nodes: Sequence[Node], frag: FragmentationModel) -> FleetState:
        return cls({n.name: n for n in nodes}, {g.id: g.allocated for n in nodes for g in n.gpus}, frag)

    def free(self, g: GpuDevice) -> float:
        return max(0.0, 1.0 - self.allocated[g.id])

    def node_free_milli(self, node: Node, change: Mapping[str, float] | None = None) -> list[int]:
        """Free milli-GPU of each whole physical GPU, known model or not (MIG slices are fixed partitions)."""
        change = change or {}
        return [
            round(max(0.0, 1.0 - self.allocated[g.id] - change.get(g.id, 0.0)) * MILLI)
            for g in node.gpus
            if not g.mig_profile
        ]

    def node_fragmentation(self, node: Node, change: Mapping[str, float] | None = None) -> float:
        free = self.node_free_milli(node, change)
        return self.frag.node(free, cpu_free_milli(node), gpu_type_of(node)) / MILLI

    def usable_gpus(self) -> float:
        """Free whole-GPU capacity the workload can use: free GPUs minus the fragmentation, in GPUs."""
        free = sum(sum(self.node_free_milli(n)) for n in self.nodes.values()) / MILLI
        return free - self.fleet_fragmentation()

    def fleet_fragmentation(self) -> float:
        return sum(self.node_fragmentation(n) for n in self.nodes.values())

    def delta(self, node: Node, change: Mapping[str, float]) -> float:
        return self.node_fragmentation(node, change) - self.node_fragmentation(node)

    def take(self, change: Mapping[str, float]) -> None:
        for gid, share in change.items():
            self.allocated[gid] = min(1.0, self.allocated[gid] + share)


@dataclass(frozen=True, slots=True)
class Choice:
    node: Node  # the first of ``nodes``
    gpus: tuple[GpuDevice, ...]
    share: float  # of each GPU
    interconnect: str
    frag_delta: float
    nodes: tuple[Node, ...] = ()  # every node the GPUs are on (empty: ``node`` alone)

    @property
    def all_nodes(self) -> tuple[Node, ...]:
        return self.nodes or (self.node,)


def clique_of(node: Node) -> str:
    """The node's multi-node NVLink domain (GFD's ``nvidia.com/gpu.clique``), "" when it has none."""
    return str(node.labels.get(NVLINK_CLIQUE, "")).strip()


def whole_gpus_of(node: Node, gpu: str) -> list[GpuDevice]:
    """The node's whole GPUs of catalog model ``gpu`` (none on a time-sliced node: it shares them)."""
    if node.gpu_sharing > 1:
        return []
    return [g for g in node.gpus if g.gpu == gpu and not g.mig_profile]


def spanning_cliques(nodes: Sequence[Node], gpu: str, tp: int) -> dict[str, list[Node]]:
    """The cliques whose nodes may share a TP group of ``tp`` ``gpu``: those where no node has that many
    GPUs of the model (a group that fits one node stays on one node). Clique → its nodes with the model."""
    groups: dict[str, list[Node]] = {}
    for n in nodes:
        if clique_of(n) and whole_gpus_of(n, gpu):
            groups.setdefault(clique_of(n), []).append(n)
    return {c: ns for c, ns in sorted(groups.items()) if max(len(whole_gpus_of(n, gpu)) for n in ns) < tp}


def spanning_sizes(tp: int, nodes: Sequence[Node], gpu: str) -> list[int]:
    """How many nodes a group of ``tp`` may span in a clique, fewest first: the same GPUs on each node
    (``tp`` divides evenly), at most what the clique's largest node has."""
    biggest = max((len(whole_gpus_of(n, gpu)) for n in nodes), default=0)
    return [s for s in range(2, tp + 1) if tp % s == 0 and tp // s <= biggest]


def choose_across(
    state: FleetState,
    usable: Sequence[Node],
    *,
    gpu: str,
    tp: int,
    used_nodes: frozenset[str] = frozenset(),
    use_fragmentation: bool = True,
) -> Choice | None:
    """The best GPU set for a TP group across the nodes of one NVLink clique (module docstring), or None.

    In each clique the fewest nodes that can each give ``tp / nodes`` free GPUs; each node's share is its
    most local set, nodes ranked as :func:`choose` ranks them (unused by this plan, less new fragmentation,
    fewer GPUs left, name). Across cliques: fewer nodes, less new fragmentation, fewer GPUs left, clique.
    The interconnect is ``nvlink``: every GPU of a clique reaches every other over the NVLink switches.
    """
    best: tuple[tuple[object, ...], Choice] | None = None
    for clique, nodes in spanning_cliques(usable, gpu, tp).items():
        for size in spanning_sizes(tp, nodes, gpu):
            k = tp // size
            ranked = []
            for n in nodes:
                free = [g for g in whole_gpus_of(n, gpu) if state.allocated[g.id] <= EPS]
                found = best_gpu_set(free, k)
                if found is None:
                    continue
                delta = state.delta(n, {g.id: 1.0 for g in found})
                frag = gpuplace_key(delta * MILLI, cpu_only=False, spare_cpu=0.0) if use_fragmentation else ()
                ranked.append(((n.name in used_nodes, *frag, len(free) - k, n.name), n, found, delta))
            if len(ranked) < size:
                continue
            picked = sorted(ranked, key=lambda r: r[0])[:size]
            delta = sum(r[3] for r in picked)
            frag = gpuplace_key(delta * MILLI, cpu_only=False, spare_cpu=0.0) if use_fragmentation else ()
            left = sum(r[0][-2] for r in picked)
            key = (size, *frag, left, clique, tuple(r[1].name for r in picked))
            gpus = tuple(g for r in picked for g in r[2])
            choice = Choice(picked[0][1], gpus, 1.0, "nvlink", delta, tuple(r[1] for r in picked))
            if best is None or key < best[0]:
                best = (key, choice)
            break  # the fewest nodes this clique can give
    return best[1] if best else None


def choose(
    state: FleetState,
    usable: Sequence[Node],
    *,
    gpu: str,
    kind: str,
    tp: int = 1,
    mig_profile: str = "",
    share: float = 1.0,
    used_nodes: frozenset[str] = frozenset(),
    use_fragmentation: bool = True,
) -> Choice | None:
    """The best GPU set for one replica of a shape, or None when no node has room.

    A whole-GPU group no single node has room for may span the nodes of one NVLink clique
    (:func:`choose_across`). ``use_fragmentation=False`` drops the fragmentation criterion, to show what
    it changed.
    """
    best: tuple[tuple[object, ...], Choice] | None = None
    for node in usable:
        options: list[tuple[GpuDevice, ...]] = []
        if kind == "whole":
            if node.gpu_sharing > 1:
                continue  # a time-sliced GPU cannot be held exclusively
            free = [
                g for g in node.gpus if g.gpu == gpu and not g.mig_profile and state.allocated[g.id] <= EPS
            ]
            found = best_gpu_set(free, tp)
            options = [found] if found else []
            interconnect = tier_of(found) if found else "single"
        elif kind == "mig":
            free = [
                g
                for g in node.gpus
                if g.gpu == gpu and g.mig_profile == mig_profile and state.allocated[g.id] <= EPS
            ]
            options = [(min(free, key=lambda g: (g.index, g.id)),)] if free else []
            interconnect = "mig"
        else:
            if node.gpu_sharing <= 1 or abs(share * node.gpu_sharing - round(share * node.gpu_sharing)) > EPS:
                continue
            options = [
                (g,) for g in node.gpus if g.gpu == gpu and not g.mig_profile and state.free(g) + EPS >= share
            ]
            interconnect = "shared"
        for gpus in options:
            change = {g.id: (share if kind == "shared" else 1.0) for g in gpus}
            delta = 0.0 if kind == "mig" else state.delta(node, change)
            left = sum(state.free(g) for g in gpus) - len(gpus) * (share if kind == "shared" else 1.0)
            frag_key = gpuplace_key(delta * MILLI, cpu_only=False, spare_cpu=0.0) if use_fragmentation else ()
            key = (
                TIERS.index(interconnect) if interconnect in TIERS else 0,
                node.name in used_nodes,
                *frag_key,
                round(left, 9),
                node.name,
                tuple(g.index for g in gpus),
            )
            if best is None or key < best[0]:
                best = (key, Choice(node, gpus, share if kind == "shared" else 1.0, interconnect, delta))
    if best is None and kind == "whole" and tp > 1:
        return choose_across(
            state, usable, gpu=gpu, tp=tp, used_nodes=used_nodes, use_fragmentation=use_fragmentation
        )
    return best[1] if best else None
