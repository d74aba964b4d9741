"""The shapes a fleet offers (:class:`OfferedShape`): GPU model × {whole GPUs at a tensor-parallel degree, a
MIG profile, a time-sliced share}, with how many replicas of each the fleet has room for (a group larger
than any node of a multi-node NVLink domain counted across that domain's nodes) and the best link a
tensor-parallel group of it can get; :meth:`OfferedShape.hardware` is the
:class:`~gpuplace.planner.hardware.ReplicaHardware` the step-time model prices, and
:meth:`OfferedShape.candidate` the plan's :class:`~gpuplace.types.plan.Candidate` of it. Shapes the fleet
cannot offer at all (a TP degree the model's heads do not split over, no node with enough free GPUs) are
returned as rejected candidates with the reason. Pure.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpuplace.catalog import GpuCatalog
from gpuplace.labels import NVLINK_CLIQUE
from gpuplace.planner.hardware import TIERS, ReplicaHardware
from gpuplace.planner.placement import (
    EPS,
    best_gpu_set,
    spanning_cliques,
    spanning_sizes,
    tier_of,
    whole_gpus_of,
)
from gpuplace.planner.request import PlanRequest
from gpuplace.types import GpuSpec, Inventory, ModelArch, Node
from gpuplace.types.plan import Candidate

TP_DEGREES: tuple[int, ...] = (1, 2, 4, 8)


def slug(text: str) -> str:
    """A DNS-1123 label from a model name (lower case, '-' separated, ≤ 63 characters)."""
    s = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return re.sub(r"-+", "-", s)[:50].strip("-") or "model"


def inputs_id(inputs: Mapping[str, object]) -> str:
    """A plan id: the hash of everything the plan depends on (same inputs, same id)."""
    text = json.dumps(inputs, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def usable_nodes(inventory: Inventory, tolerated: Sequence[str]) -> tuple[Node, ...]:
    """Nodes whose hard taints the serving pods tolerate."""
    return tuple(
        n
        for n in inventory.nodes
        if all(t.effect == "PreferNoSchedule" or t.key in tolerated for t in n.taints)
    )


@dataclass(frozen=True, slots=True)
class OfferedShape:
    """One shape the fleet offers, and how many replicas of it the fleet has room for (``units``)."""

    spec: GpuSpec
    kind: str
    tp: int = 1
    mig_profile: str = ""
    share: float = 1.0
    memory_gib: float = 0.0  # one GPU's memory as the engine sees it (the slice's for MIG)
    units: int = 0  # replicas of this shape the fleet has room for
    link: str = "single"

    @property
    def key(self) -> tuple[str, str, int, str, float, float]:
        """What the serving model of the shape depends on (not how many the fleet has room for)."""
        return (self.spec.name, self.kind, self.tp, self.mig_profile, self.share, self.memory_gib)

    def hardware(self, link: str | None = None) -> ReplicaHardware:
        if self.kind == "mig":
            mig = next(m for m in self.spec.mig_profiles if m.name == self.mig_profile)
            return ReplicaHardware(
                self.spec,
                1,
                bandwidth_share=mig.memory_slices / max(self.spec.memory_slices, 1),
                compute_share=mig.compute_slices / max(self.spec.compute_slices, 1),
                memory_gib=mig.memory_gib,
                link="single",
            )
        if self.kind == "shared":
            return ReplicaHardware(self.spec, 1, self.share, self.share, self.memory_gib, shared=True)
        return ReplicaHardware(self.spec, self.tp, memory_gib=self.memory_gib, link=link or self.link)

    def engine_memory(self, utilization: float) -> tuple[float, float]:
        """(GiB one GPU of a replica has, the ``gpu_memory_utilization`` its engine may take of it):
        a MIG slice's own memory; a time-sliced GPU's ``utilization`` × its share, the rest being its
        other tenants'."""
        memory = self.hardware().memory_gib or self.spec.memory_gib
        if self.kind == "shared":
            return memory, float(f"{utilization * self.share:.3g}")
        return memory, utilization

    def price(self, prices: Mapping[str, float]) -> float:
        per_gpu = prices.get(self.spec.name, self.spec.price_usd_per_hour)
        if self.kind == "mig":
            mig = next(m for m in self.spec.mig_profiles if m.name == self.mig_profile)
            return per_gpu * mig.compute_slices / max(self.spec.compute_slices, 1)
        if self.kind == "shared":
            return per_gpu * self.share
        return per_gpu * self.tp

    @property
    def locality(self) -> str:
        return self.link if self.kind == "whole" else "mig" if self.kind == "mig" else "shared"

    def candidate(self, **fields: object) -> Candidate:
        """A :class:`Candidate` of this shape (no replicas yet) with ``fields`` set."""
        base: dict[str, object] = {
            "gpu": self.spec.name,
            "kind": self.kind,
            "tp": self.tp,
            "replicas": 0,
            "mig_profile": self.mig_profile,
            "share": self.share,
            "interconnect": self.link,
        }
        return Candidate(**(base | fields))  # type: ignore[arg-type]


def enumerate_shapes(
    nodes: Sequence[Node], catalog: GpuCatalog, request: PlanRequest, arch: ModelArch
) -> tuple[list[OfferedShape], list[Candidate]]:
    """The shapes ``nodes`` offer for ``arch`` under ``request``'s limits, and those rejected outright."""
    shapes: list[OfferedShape] = []
    rejected: list[Candidate] = []
    models = sorted({g.gpu for n in nodes for g in n.gpus if g.gpu})
    for name in models:
        if request.gpus and name not in request.gpus:
            continue
        spec = catalog.get(name, field="inventory gpu")
        if "whole" in request.kinds:
            shapes += _whole(nodes, spec, request, arch, rejected)
        if "mig" in request.kinds:
            free_slices: dict[str, int] = {}
            for n in nodes:
                for g in n.gpus:
                    if g.gpu == name and g.mig_profile and g.allocated <= EPS:
                        free_slices[g.mig_profile] = free_slices.get(g.mig_profile, 0) + 1
            for profile, count in sorted(free_slices.items()):
                mig = next(m for m in spec.mig_profiles if m.name == profile)
                shapes.append(
                    OfferedShape(spec, "mig", 1, profile, memory_gib=mig.memory_gib, units=count, link="mig")
                )
        if "shared" in request.kinds:
            for sharing in sorted({n.gpu_sharing for n in nodes if n.gpu_sharing > 1}):
                share = 1 / sharing
                units = sum(
                    int((1 - g.allocated) * sharing + EPS)
                    for n in nodes
                    if n.gpu_sharing == sharing
                    for g in n.gpus
                    if g.gpu == name and not g.mig_profile
                )
                if units:
                    shapes.append(
                        OfferedShape(
                            spec,
                            "shared",
                            1,
                            share=share,
                            memory_gib=spec.memory_gib,
                            units=units,
                            link="shared",
                        )
                    )
    return shapes, rejected


def _whole(
    nodes: Sequence[Node], spec: GpuSpec, request: PlanRequest, arch: ModelArch, rejected: list[Candidate]
) -> list[OfferedShape]:
    name = spec.name
    per_node = [
        [g for g in n.gpus if g.gpu == name and not g.mig_profile and g.allocated <= EPS]
        for n in nodes
        if n.gpu_sharing <= 1
    ]
    memory = min((g.memory_gib for free in per_node for g in free), default=spec.memory_gib)
    out = []
    for tp in TP_DEGREES:
        if tp > request.max_tp:
            continue
        units = sum(len(free) // tp for free in per_node)
        if arch.num_attention_heads % tp or (arch.num_kv_heads % tp and tp % arch.num_kv_heads):
            rejected.append(
                Candidate(
                    name,
                    "whole",
                    tp,
                    0,
                    reason=f"{arch.num_attention_heads} attention heads "
                    f"and {arch.num_kv_heads} KV heads do not split over TP={tp}",
                )
            )
            continue
        across, free_in = _spanning_units(nodes, name, tp)
        if units + across == 0:
            if free_in:
                free_text = ", ".join(f"{c}: {n}" for c, n in free_in.items())
                rejected.append(
                    Candidate(
                        name,
                        "whole",
                        tp,
                        0,
                        reason=f"no node has {tp} free {name}, and no NVLink domain ({NVLINK_CLIQUE}) has "
                        f"{tp} free on nodes that can split them evenly (free per domain: {free_text}); "
                        "a tensor-parallel group never spans two domains",
                    )
                )
            elif tp == 1 or any(len(f) >= tp // 2 for f in per_node):
                rejected.append(Candidate(name, "whole", tp, 0, reason=f"no node has {tp} free {name}"))
            continue
        sets = [best_gpu_set(free, tp) for free in per_node if len(free) >= tp]
        link = min((tier_of(s) for s in sets if s), key=TIERS.index, default="nvlink")
        out.append(OfferedShape(spec, "whole", tp, memory_gib=memory, units=units + across, link=link))
    return out


def _spanning_units(nodes: Sequence[Node], gpu: str, tp: int) -> tuple[int, dict[str, int]]:
    """TP groups of ``tp`` that fit across the nodes of an NVLink clique no node of which holds one
    (:func:`~gpuplace.planner.placement.choose_across`; an upper bound, the placement has the last word),
    and the free GPUs of each such clique."""
    units = 0
    free_in: dict[str, int] = {}
    for clique, members in spanning_cliques(nodes, gpu, tp).items():
        free = [sum(g.allocated <= EPS for g in whole_gpus_of(n, gpu)) for n in members]
        free_in[clique] = sum(free)
        units += max(
            (sum(f // (tp // size) for f in free) // size for size in spanning_sizes(tp, members, gpu)),
            default=0,
        )
    return units, free_in
