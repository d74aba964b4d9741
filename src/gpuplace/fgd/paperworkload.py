"""The FGD paper's workload and metric, as its simulator defines them (``--protocol paper``; the replay
itself is :mod:`gpuplace.fgd.paperreplay`): the nodes and pods of a trace, the typical pods FGD
targets (``GetTypicalPods``), the workload tuned to 1.3× capacity (``tuneUpPods``/``tuneDownPods``),
GPU-type access, fragmentation memoised per node state, and the unallocated-share curve
(``merge_alloc_discrete.py``). File names are in github.com/hkust-adsl/kubernetes-scheduler-simulator.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

TUNE_RATIO = 1.3
POPULARITY_THRESHOLD = 0.95
DEFAULT_CPU_REQUEST = 100  # kube-scheduler's GetNonzeroRequests: a pod asking no CPU counts as 0.1 core
# FragAmount bins (pkg/utils/frag.go FragRatioDataMap); Q3 is the part a task can use.
Q1, Q2, Q3, Q4, XL, XR, NA = range(7)


@dataclass(frozen=True, slots=True)
class PaperNode:
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    gpu_type: str  # the trace's model code


@dataclass(frozen=True, slots=True)
class PaperPod:
    """One pod of the list as the simulator sees it (``PodResource`` plus memory)."""

    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int  # per GPU; 0 for a CPU-only pod
    gpu_type: str  # the gpu_spec annotation as written, e.g. "V100M16|V100M32"; "" = any

    @property
    def total_milli(self) -> int:
        return self.num_gpu * self.gpu_milli

    @property
    def types(self) -> frozenset[str]:
        return frozenset(t for t in self.gpu_type.split("|") if t)


@dataclass(frozen=True, slots=True)
class TypicalPod:
    cpu_milli: int
    gpu_milli: int
    num_gpu: int
    gpu_type: str
    weight: float


def typical_pods(pods: Sequence[PaperPod], threshold: float = POPULARITY_THRESHOLD) -> tuple[TypicalPod, ...]:
    """``GetTypicalPods`` with the experiments' settings (CPU pods in, 95%, step 1, no GPU weight).

    Shapes sorted by count, ties by (CPU, milli, count, type) descending; shapes are added until their
    pods reach the threshold (the one crossing it included), then weights renormalised to sum to 1.
    """
    counts: dict[tuple[int, int, int, str], float] = {}
    for p in pods:
        key = (p.cpu_milli or DEFAULT_CPU_REQUEST, p.gpu_milli, p.num_gpu, p.gpu_type)
        counts[key] = counts.get(key, 0.0) + 1.0
    total = float(len(pods))
    ordered = sorted(counts.items(), key=lambda kv: (kv[1], kv[0]), reverse=True)
    expected = threshold * 100 * total / 100.0
    chosen: list[tuple[tuple[int, int, int, str], float]] = []
    cum = 0.0
    while cum < expected and len(chosen) < len(ordered):
        key, n = ordered[len(chosen)]
        cum += n
        chosen.append((key, n / total))
    if len(chosen) >= len(ordered):
        return tuple(TypicalPod(k[0], k[1], k[2], k[3], w) for k, w in chosen)
    return tuple(TypicalPod(k[0], k[1], k[2], k[3], w / (cum / total)) for k, w in chosen)


@dataclass
class FragMemo:
    """``NodeGpuShareFragAmountScore`` of node states for one typical-pod list, memoised.

    A state is (GPU type, CPU level, free milli of each GPU sorted): only which typical CPU requests
    the free CPU clears matters, so CPU is kept as that level.
    """

    typical: tuple[TypicalPod, ...]
    type_names: tuple[str, ...]
    _cpu_levels: list[int] = field(init=False)
    _access: list[list[bool]] = field(init=False)  # [type id][typical index]
    _cache: dict[tuple[int, int, tuple[int, ...]], float] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self._cpu_levels = sorted({t.cpu_milli for t in self.typical})
        self._access = [[accessible(name, t.gpu_type) for t in self.typical] for name in self.type_names]

    def level(self, cpu_left: int) -> int:
        lo, hi = 0, len(self._cpu_levels)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._cpu_levels[mid] <= cpu_left:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def frag(self, type_id: int, cpu_left: int, free: tuple[int, ...]) -> float:
        key = (type_id, self.level(cpu_left), free)
        value = self._cache.get(key)
        if value is None:
            value = self._compute(type_id, cpu_left, free)
            self._cache[key] = value
        return value

    def _compute(self, type_id: int, cpu_left: int, free: tuple[int, ...]) -> float:
        # Bins summed in the simulator's order so the floats (and so FGD's integer scores) are its own.
        data = [0.0] * 7
        total = sum(free)
        access = self._access[type_id]
        for j, t in enumerate(self.typical):
            cpu_ok = cpu_left >= t.cpu_milli
            if t.gpu_milli == 0:
                data[XL if cpu_ok else XR] += t.weight * float(total)
                continue
            if not access[j]:
                data[NA] += t.weight * float(total)
                continue
            fits = sum(1 for f in free if f >= t.gpu_milli) >= t.num_gpu
            if fits and cpu_ok:
                small = sum(f for f in free if f < t.gpu_milli)
                data[Q2] += t.weight * float(small)
                data[Q3] += t.weight * float(total - small)
            elif fits:
                data[Q4] += t.weight * float(total)
            else:
                data[Q2 if cpu_ok else Q1] += t.weight * float(total)
        out = 0.0
        for i in range(7):
            if i != Q3:
                out += data[i]
        return out


def accessible(node_type: str, pod_type: str) -> bool:
    """``IsNodeAccessibleToPodByType``: an empty request accepts any GPU, a CPU node accepts none."""
    wanted = [t for t in pod_type.split("|") if t]
    if not wanted:
        return True
    return bool(node_type) and node_type in wanted


def tune_workload(pods: Sequence[PaperPod], capacity_milli: int, rng: np.random.Generator) -> list[int]:
    """Arrival order as indices into ``pods``: shuffled, then tuned to ``TUNE_RATIO`` × capacity.

    ``SortClusterPods`` (shuffle), then ``TunePodsByNodeTotalResource``. The stop test of tuneUpPods
    compares the next pod's per-GPU milli, not its total, and so does this.
    """
    order = [int(i) for i in rng.permutation(len(pods))]
    total = sum(p.total_milli for p in pods)
    target = TUNE_RATIO * capacity_milli
    if total > target:
        while total > target and order:
            total -= pods[order.pop(int(rng.integers(len(order))))].total_milli
        return order
    while True:
        idx = int(rng.integers(len(pods)))
        if total + pods[idx].gpu_milli > target:
            return order
        total += pods[idx].total_milli
        order.append(idx)


def unallocated_curve(arrived: np.ndarray, used: np.ndarray, total_gpus: int) -> dict[int, float]:
    """``merge_alloc_discrete.py``: per arrived percent X, 100 − mean allocation of its events.

    Where no event's arrived share lies within X ± 1 (a small fleet, where one pod is several percent)
    the simulator's script has no value; here the last event that arrived at or below X stands in, and
    X is left out only before the first event.
    """
    arrive = np.round(arrived / total_gpus / 10, 0)
    alloc = np.round(used / total_gpus / 10, 2)
    out: dict[int, float] = {}
    for x in range(0, 131):
        vals = alloc[arrive == x]
        if len(vals) == 0:
            vals = alloc[(arrive >= x - 1) & (arrive <= x + 1)]
        if len(vals) == 0:
            below = np.flatnonzero(arrived * 100 <= x * total_gpus * 1000)
            if len(below) == 0:
                continue
            vals = alloc[below[-1:]]
        out[x] = round(100 - round(float(vals.mean()), 2), 2)
    return out
