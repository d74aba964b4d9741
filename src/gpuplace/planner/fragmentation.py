"""GPU fragmentation as FGD defines it (Weng et al., "Beware of Fragmentation", USENIX ATC'23).

A node's GPU resources are *fragmented for a task* when the task cannot use them: if the task cannot
run on the node at all (it asks for no GPU, the node's GPU type is not one it accepts, too few GPUs
have enough free share, or too little CPU is left), every unallocated GPU share on the node is a
fragment; if it can run, the free shares of the GPUs that are individually too small for it are
fragments. A node's fragmentation for a *workload* is the expectation over the workload's task mix
(task classes weighted by popularity): ``F_n(M) = Σ_m p_m · F_n(m)``; a fleet's is the sum over nodes.
FGD places each task where the fleet's fragmentation grows least. Shares are in milli-GPU (1000 = one
GPU) as in the trace; the planner reports GPUs. Pure functions, memoised per node state.
"""

from __future__ import annotations

import bisect
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

MILLI = 1000
NO_CPU_LIMIT = 1 << 62


@dataclass(frozen=True, slots=True)
class TaskClass:
    """One kind of task in the workload mix, with its popularity ``weight``."""

    num_gpu: int  # 0 = asks for no GPU
    gpu_milli: int  # share of each GPU, 1..1000 (1000 for whole GPUs); 0 without GPUs
    cpu_milli: int = 0
    gpu_types: frozenset[str] = frozenset()  # GPU types it accepts; empty = any
    weight: float = 1.0

    @property
    def key(self) -> tuple[int, int, int, frozenset[str]]:
        return (self.num_gpu, self.gpu_milli, self.cpu_milli, self.gpu_types)


def typical_mix(
    tasks: Iterable[tuple[int, int, int, frozenset[str]]], *, popularity_threshold: float = 0.95
) -> tuple[TaskClass, ...]:
    """The most popular task shapes ``(num_gpu, gpu_milli, cpu_milli, gpu_types)`` covering the threshold.

    As the paper's simulator does (95% by default, CPU-only tasks included), weights renormalised to 1.
    """
    counts = Counter(tasks)
    total = sum(counts.values())
    if total == 0:
        return ()
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0][0], kv[0][1], kv[0][2], sorted(kv[0][3])))
    chosen: list[tuple[tuple[int, int, int, frozenset[str]], int]] = []
    covered = 0
    for shape, n in ordered:
        if covered >= popularity_threshold * total:
            break
        chosen.append((shape, n))
        covered += n
    return tuple(TaskClass(s[0], s[1], s[2], s[3], n / covered) for s, n in chosen)


# The default mix the planner measures an inference fleet against when none is given: whole-GPU servers
# of 1/2/4/8 GPUs and half-GPU shared tasks (docs/placement.md).
DEFAULT_LLM_MIX: tuple[TaskClass, ...] = (
    TaskClass(1, MILLI, weight=0.4),
    TaskClass(2, MILLI, weight=0.2),
    TaskClass(4, MILLI, weight=0.15),
    TaskClass(8, MILLI, weight=0.1),
    TaskClass(1, 500, weight=0.15),
)


@dataclass(frozen=True, slots=True)
class FleetWorkload:
    """The task mix fragmentation is measured against, and where it came from.

    ``source`` is ``"cluster pods"`` (the GPU pods running in the live cluster), ``"trace"`` (the pod
    list of a trace inventory), ``"given"`` (``--task-mix``) or ``"default mix"`` (:data:`DEFAULT_LLM_MIX`,
    the fallback when the fleet shows no GPU workload); ``tasks`` counts the pods the mix was built from.
    """

    source: str
    mix: tuple[TaskClass, ...]
    tasks: int = 0
    detail: str = ""


def mix_to_json(mix: Iterable[TaskClass]) -> list[dict[str, object]]:
    """Task classes as plan.json lists them."""
    return [
        {
            "num_gpu": t.num_gpu,
            "gpu_milli": t.gpu_milli,
            "cpu_milli": t.cpu_milli,
            "gpu_types": sorted(t.gpu_types),
            "weight": round(t.weight, 6),
        }
        for t in mix
    ]


def fleet_workload(
    tasks: Iterable[tuple[int, int, int, frozenset[str]]], source: str, *, detail: str = ""
) -> FleetWorkload:
    """The typical mix of the given task shapes, or the default mix (saying why) when none asks a GPU."""
    shapes = list(tasks)
    if not any(num_gpu for num_gpu, *_ in shapes):
        why = f"{source}: no GPU task" + (f" ({detail})" if detail else "")
        return FleetWorkload("default mix", DEFAULT_LLM_MIX, 0, why)
    return FleetWorkload(source, typical_mix(shapes), len(shapes), detail)


def parse_mix(text: str) -> tuple[TaskClass, ...]:
    """``"1:0.4,2:0.2,0.5:0.15"``: GPUs per task (a fraction for a shared GPU) and weight."""
    from gpuplace.errors import InvalidInput

    classes = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        try:
            gpus_text, weight_text = part.split(":")
            gpus, weight = float(gpus_text), float(weight_text)
        except ValueError:
            raise InvalidInput(
                "task_mix", text, f"{part!r} is not GPUS:WEIGHT", "e.g. 1:0.5,2:0.3,0.5:0.2"
            ) from None
        if gpus <= 0 or weight <= 0 or (gpus > 1 and gpus != int(gpus)):
            raise InvalidInput(
                "task_mix", text, f"{part!r}: GPUs must be a fraction ≤ 1 or a whole number, weight > 0"
            )
        classes.append(
            TaskClass(1, round(gpus * MILLI), weight=weight)
            if gpus <= 1
            else TaskClass(int(gpus), MILLI, weight=weight)
        )
    total = sum(c.weight for c in classes)
    if not classes:
        raise InvalidInput("task_mix", text, "is empty", "e.g. 1:0.5,2:0.3,0.5:0.2")
    return tuple(
        TaskClass(c.num_gpu, c.gpu_milli, c.cpu_milli, c.gpu_types, c.weight / total) for c in classes
    )


def task_fragment(free: Sequence[int], cpu_left: int, gpu_type: str, task: TaskClass) -> int:
    """``F_n(m)``: milli-GPU on a node that ``task`` cannot use."""
    total = sum(free)
    if total == 0:
        return 0
    if task.num_gpu == 0 or (task.gpu_types and gpu_type not in task.gpu_types):
        return total
    fitting = sum(1 for f in free if f >= task.gpu_milli)
    if fitting < task.num_gpu or cpu_left < task.cpu_milli:
        return total
    return sum(f for f in free if f < task.gpu_milli)


@dataclass
class FragmentationModel:
    """``F_n(M)`` for one task mix, memoised on (GPU type, CPU level, sorted free shares)."""

    mix: tuple[TaskClass, ...]
    _cpu_levels: list[int] = field(init=False)
    _cache: dict[tuple[str, int, tuple[int, ...]], float] = field(init=False, default_factory=dict)
    cpu_per_gpu_milli: float = field(init=False)  # milli-CPU the mix's GPU tasks ask per milli-GPU

    def __post_init__(self) -> None:
        # Only which CPU thresholds a node clears matters, so nodes are memoised by that level.
        self._cpu_levels = sorted({t.cpu_milli for t in self.mix})
        gpu_tasks = [t for t in self.mix if t.num_gpu]
        self.cpu_per_gpu_milli = sum(t.weight * t.cpu_milli for t in gpu_tasks) / max(
            sum(t.weight * t.num_gpu * t.gpu_milli for t in gpu_tasks), 1e-9
        )

    def node(self, free: Sequence[int], cpu_left: int = NO_CPU_LIMIT, gpu_type: str = "") -> float:
        key = (gpu_type, bisect.bisect_right(self._cpu_levels, cpu_left), tuple(sorted(free)))
        value = self._cache.get(key)
        if value is None:
            value = sum(t.weight * task_fragment(key[2], cpu_left, gpu_type, t) for t in self.mix)
            self._cache[key] = value
        return value


def fgd_score(frag_decrease_milli: float) -> int:
    """FGD's node score in the paper's simulator: ``int64(100 · sigmoid(ΔF / 1000))``, ΔF = before − after.

    ``pkg/simulator/plugin/fgd_score.go`` (calculateGpuShareFragExtendScore). The integer truncation is
    part of the policy: placements within a few tens of milli-GPU of each other score alike, and the
    scheduler's node order then packs them (docs/placement.md).
    """
    x = -frag_decrease_milli / MILLI
    # 1/(1+e^x) computed without overflow for large |x|.
    s = 1.0 / (1.0 + math.exp(x)) if x < 700 else 0.0
    return int(s * 100)


def gpuplace_key(frag_increase_milli: float, *, cpu_only: bool, spare_cpu: float) -> tuple[float, float]:
    """gpuplace's preference among placements of one task (smaller is better), with node order last.

    First FGD's score of the fragmentation increase (:func:`fgd_score`). Then, for a task that asks
    no GPU, the CPU the node keeps beyond what its free GPUs will want (``spare_cpu``, milli-CPU: free
    CPU − free milli-GPU × the workload's CPU per milli-GPU): such a task goes where CPU is plentiful
    instead of taking the CPU a GPU node's free GPUs need. GPU tasks keep FGD's order, because
    spreading them by any finer criterion leaves more GPUs stranded (docs/placement.md, figures).
    """
    return (-float(fgd_score(-frag_increase_milli)), -spare_cpu if cpu_only else 0.0)
