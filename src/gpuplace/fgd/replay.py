"""Replaying a task trace onto a fleet under a scheduling policy, as the FGD paper evaluates policies.

Tasks (``num_gpu`` whole GPUs, or a ``gpu_milli`` share of one GPU, with CPU and an optional GPU-type
constraint) arrive one by one, in an order shuffled with a seed, and never leave. Each is placed on a
node (and GPU) by the policy or fails. The trace is re-shuffled and replayed again once exhausted until
the GPUs requested by arrived tasks reach ``until`` × the fleet's GPU capacity (1.3 in the paper).
Recorded: the share of GPU capacity left unallocated when arrivals pass each checkpoint (1.0 = the
demand equals the capacity). Policies (the paper's §6.1 baselines, and gpuplace's scoring):

* ``random``  — a random node that fits; ``bestfit`` — the node with the least CPU and GPU left after
  placement (normalised sum); ``dotprod`` — the smallest dot product of the node's free (CPU, GPU)
  vector and the task's demand, both normalised by the node's capacity; ``packing`` — GPU packing:
  a partially used GPU first, then a free GPU of a node already in use, then an empty node;
* ``fgd`` — the node and GPU whose placement increases the node's fragmentation ``F_n(M)`` least
  (:mod:`gpuplace.planner.fragmentation`), ties at random;
* ``gpuplace`` — the planner's scoring (:func:`gpuplace.planner.fragmentation.gpuplace_key`), then random.

Non-FGD policies put a shared task on the GPU with the least sufficient free share (the simulator's
default). Nodes with equal state and capacity are scored once (their scores are equal), which makes a
1,213-node replay take seconds per policy. The FGD paper's own protocol is
:mod:`gpuplace.fgd.paperreplay`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from gpuplace.planner.fragmentation import MILLI, FragmentationModel, TaskClass, gpuplace_key

POLICIES: tuple[str, ...] = ("gpuplace", "fgd", "bestfit", "packing", "dotprod", "random")


@dataclass(frozen=True, slots=True)
class SimNode:
    name: str
    cpu_milli: int
    gpus: int
    gpu_type: str


@dataclass
class _State:
    cpu_left: list[int]
    free: list[list[int]]
    groups: dict[_Key, list[int]] = field(default_factory=dict)
    # (node state, task class) → best score and choices: states recur, so most lookups hit.
    scores: dict[tuple[object, object], tuple[tuple[float, ...] | None, list[tuple[int, ...]]]] = field(
        default_factory=dict
    )


@dataclass(frozen=True, slots=True)
class ReplayResult:
    policy: str
    seed: int
    capacity_gpus: int
    checkpoints: dict[float, float]  # arrived demand / capacity → unallocated share of capacity
    arrived_tasks: int
    failed_tasks: int
    # the fleet when the replay stopped, per node: free milli-GPU of each GPU, and free milli-CPU
    free_milli: tuple[tuple[int, ...], ...] = ()
    cpu_left_milli: tuple[int, ...] = ()


# (GPU type, free CPU, sorted free shares, CPU capacity): the capacity is part of the state because
# best-fit and dot-product scores divide by it; grouping without it scored every member of a group with
# the first member's capacity.
_Key = tuple[str, int, tuple[int, ...], int]


def _key(nodes: Sequence[SimNode], st: _State, i: int) -> _Key:
    return (nodes[i].gpu_type, st.cpu_left[i], tuple(sorted(st.free[i])), nodes[i].cpu_milli)


def _gpu_choices(free: Sequence[int], task: TaskClass) -> list[tuple[int, ...]]:
    """Distinct ways to place the task's GPUs on a node (indices); equal free shares are interchangeable."""
    if task.num_gpu == 0:
        return [()]
    if task.gpu_milli < MILLI:
        seen: dict[int, int] = {}
        for idx, f in enumerate(free):
            if f >= task.gpu_milli and f not in seen:
                seen[f] = idx
        return [(idx,) for _, idx in sorted(seen.items())]
    full = [idx for idx, f in enumerate(free) if f >= MILLI]
    return [tuple(full[: task.num_gpu])] if len(full) >= task.num_gpu else []


def _after(free: Sequence[int], choice: Sequence[int], milli: int) -> list[int]:
    out = list(free)
    for idx in choice:
        out[idx] -= milli
    return out


def replay(
    nodes: Sequence[SimNode],
    tasks: Sequence[TaskClass],
    policy: str,
    mix: Sequence[TaskClass],
    *,
    seed: int,
    until: float = 1.3,
    checkpoints: Iterable[float] = (0.5, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3),
    on_progress: Callable[[float], None] | None = None,
) -> ReplayResult:
    """Replay ``tasks`` onto ``nodes`` with ``policy``; pure apart from the seeded random generator."""
    if policy not in POLICIES:
        raise ValueError(policy)
    rng = random.Random(seed)
    frag = FragmentationModel(tuple(mix))
    capacity = sum(n.gpus for n in nodes) * MILLI
    st = _State([n.cpu_milli for n in nodes], [[MILLI] * n.gpus for n in nodes])
    for i in range(len(nodes)):
        st.groups.setdefault(_key(nodes, st, i), []).append(i)
    marks = sorted(c for c in checkpoints if c <= until + 1e-9)
    result: dict[float, float] = {}
    arrived = allocated = n_arrived = n_failed = 0
    order: list[int] = []
    while arrived < until * capacity:
        if not order:
            order = list(range(len(tasks)))
            rng.shuffle(order)
        task = tasks[order.pop()]
        n_arrived += 1
        demand = task.num_gpu * task.gpu_milli
        placed = _place(nodes, st, task, policy, frag, rng)
        if placed:
            allocated += demand
        else:
            n_failed += 1
        arrived += demand
        while marks and arrived >= marks[0] * capacity:
            result[marks.pop(0)] = (capacity - allocated) / capacity
            if on_progress is not None:
                on_progress(arrived / capacity)
    free = tuple(tuple(f) for f in st.free)
    return ReplayResult(
        policy, seed, capacity // MILLI, result, n_arrived, n_failed, free, tuple(st.cpu_left)
    )


def _place(
    nodes: Sequence[SimNode],
    st: _State,
    task: TaskClass,
    policy: str,
    frag: FragmentationModel,
    rng: random.Random,
) -> bool:
    best: list[tuple[int, tuple[int, ...]]] = []
    best_score: tuple[float, ...] | None = None
    cache = st.scores
    for key, members in st.groups.items():
        ck = (key, task.key)
        hit = cache.get(ck)
        if hit is None:
            hit = _group_best(nodes[members[0]], key, task, policy, frag)
            cache[ck] = hit
        score, choices = hit
        if score is None:
            continue
        if best_score is None or score < best_score:
            best_score, best = score, [(m, c) for m in members for c in choices]
        elif score == best_score:
            best.extend((m, c) for m in members for c in choices)
    if not best:
        return False
    node_index, sorted_choice = best[rng.randrange(len(best))] if len(best) > 1 else best[0]
    # The choice indexes the sorted free list; map it to this node's GPU indices with those shares.
    old_key = _key(nodes, st, node_index)
    free_now = st.free[node_index]
    wanted = [old_key[2][i] for i in sorted_choice]
    used: set[int] = set()
    for share in wanted:
        idx = next(i for i, f in enumerate(free_now) if f == share and i not in used)
        used.add(idx)
        free_now[idx] -= task.gpu_milli
    st.cpu_left[node_index] -= task.cpu_milli
    members = st.groups[old_key]
    members.remove(node_index)
    if not members:
        del st.groups[old_key]
    st.groups.setdefault(_key(nodes, st, node_index), []).append(node_index)
    return True


def _group_best(
    node: SimNode,
    key: _Key,
    task: TaskClass,
    policy: str,
    frag: FragmentationModel,
) -> tuple[tuple[float, ...] | None, list[tuple[int, ...]]]:
    """The best score of a node state for a task, and the GPU choices reaching it (None: does not fit)."""
    gpu_type, cpu_left, free, _ = key
    if cpu_left < task.cpu_milli or (task.gpu_types and gpu_type not in task.gpu_types):
        return None, []
    if task.num_gpu and node.gpus < task.num_gpu:
        return None, []
    best: tuple[float, ...] | None = None
    chosen: list[tuple[int, ...]] = []
    for choice in _gpu_choices(free, task):
        score = _score(policy, node, key, choice, task, frag)
        if best is None or score < best:
            best, chosen = score, [choice]
        elif score == best:
            chosen.append(choice)
    return best, chosen


def _score(
    policy: str,
    node: SimNode,
    key: _Key,
    choice: tuple[int, ...],
    task: TaskClass,
    frag: FragmentationModel,
) -> tuple[float, ...]:
    gpu_type, cpu_left, free, _ = key
    after = _after(free, choice, task.gpu_milli)
    if policy == "random":
        return (0.0,)
    if policy in ("fgd", "gpuplace"):
        delta = frag.node(after, cpu_left - task.cpu_milli, gpu_type) - frag.node(free, cpu_left, gpu_type)
        if policy == "fgd":
            return (round(delta, 6),)
        spare = cpu_left - task.cpu_milli - sum(after) * frag.cpu_per_gpu_milli
        return gpuplace_key(delta, cpu_only=not task.num_gpu, spare_cpu=spare)
    # Baselines place a share on the least sufficient GPU: only that choice is theirs.
    if task.num_gpu and task.gpu_milli < MILLI and choice != _gpu_choices(free, task)[0]:
        return (float("inf"),)
    cpu_cap = max(node.cpu_milli, 1)
    gpu_cap = max(node.gpus * MILLI, 1)
    if policy == "bestfit":
        return ((cpu_left - task.cpu_milli) / cpu_cap + sum(after) / gpu_cap,)
    if policy == "dotprod":
        return (
            (cpu_left / cpu_cap) * (task.cpu_milli / cpu_cap)
            + (sum(free) / gpu_cap) * (task.num_gpu * task.gpu_milli / gpu_cap),
        )
    return (_packing_tier(free, choice, task), sum(after))


def _packing_tier(free: Sequence[int], choice: Sequence[int], task: TaskClass) -> int:
    """0: onto a partially used GPU; 1: onto free GPUs of a node in use; 2: onto an empty node."""
    if task.num_gpu and any(0 < free[i] < MILLI for i in choice):
        return 0
    return 1 if any(f < MILLI for f in free) else 2
