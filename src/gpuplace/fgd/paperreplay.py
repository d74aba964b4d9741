"""The FGD paper's evaluation protocol, replayed as its simulator does it (``--protocol paper``).

Weng et al., "Beware of Fragmentation", USENIX ATC'23, evaluated policies with a Kubernetes scheduling
simulator (github.com/hkust-adsl/kubernetes-scheduler-simulator). This module replays a trace the way
that simulator does, with the definitions taken from its source (file names below are in that repository):

* **Workload** (``pkg/simulator/core.go``, ``simulator.go``): the pod list, shuffled with the seed
  (``SortClusterPods``), then *tuned* to 1.3× the cluster's GPU capacity (``tuneUpPods``: pods drawn
  with replacement from the list are appended until the next one's per-GPU milli would overshoot; or
  ``tuneDownPods``: random pods removed). Arrivals only; a pod that fits nowhere fails and is dropped.
* **Filter**: the pod's CPU and memory fit (kube-scheduler's NodeResourcesFit), its GPU type is
  accepted, and enough GPUs have the share it asks (``open_gpu_share.go``, ``gpunodeinfo.go``).
* **Scores**, integers 0–100, the highest wins and ties are broken uniformly at random
  (kube-scheduler's ``selectHost``): FGD ``int(100·sigmoid(ΔF/1000))`` over the typical pods
  (``fgd_score.go``, ``pkg/utils/frag.go``); BestFit, DotProd (``-dimext merge -norm max``),
  GpuPacking, GpuClustering and Random as their plugins define them (``*_score.go``).
* **GPU choice** on the chosen node: FGD's own for FGD, a random fitting GPU for Random, the tightest
  fitting GPU otherwise; whole GPUs are the lowest-indexed free ones (``AllocateExclusiveGpuId``).
* **Target workload of FGD** (``GetTypicalPods``): the pod shapes (CPU, GPU milli, GPU count, GPU type)
  covering 95% of the *original* pod list, CPU-only pods included, weights renormalised.
* **Metric** (``analysis.go``, ``experiments/analysis/merge_alloc_discrete.py``): after every pod event
  the allocated and the arrived GPU milli (failed pods count as arrived); the value at X% is the mean
  allocation share over the events whose arrived share rounds to X (±1 when none does). Unallocated is
  100 − that.

What cannot be the same: the random streams (Go's ``math/rand`` here is numpy's PCG64 seeded with the
same seeds), so single runs differ and 10-seed means are what to compare (docs/placement.md).

``gpuplace`` is the planner's own policy (:func:`gpuplace.planner.fragmentation.gpuplace_key`) replayed
under the same protocol. Vectorised with numpy over nodes; a node's scores are recomputed only after
the node changed, and fragmentation is memoised per node state, so the full protocol takes minutes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from gpuplace.fgd.paperworkload import (
    FragMemo,
    PaperNode,
    PaperPod,
    TypicalPod,
    accessible,
    tune_workload,
    typical_pods,
    unallocated_curve,
)
from gpuplace.planner.fragmentation import MILLI, fgd_score, gpuplace_key

PAPER_POLICIES: tuple[str, ...] = ("gpuplace", "fgd", "bestfit", "packing", "clustering", "dotprod", "random")
PAPER_SEEDS: tuple[int, ...] = tuple(range(42, 52))  # the paper's experiment script: 42..51
MAX_SPEC_CPU = 128000  # gpushareutils.MaxSpecCpu: the normalisers of BestFit and DotProd
MAX_SPEC_GPU = 8000  # gpushareutils.MaxSpecGpu
MAX_SCORE = 100


@dataclass(frozen=True, slots=True)
class PaperRun:
    """One replay: unallocated GPU share (percent of capacity) at each arrived demand 0..130%."""

    policy: str
    seed: int
    capacity_gpus: int
    unallocated_pct: Mapping[int, float]
    arrived_pods: int
    failed_pods: int


@dataclass(frozen=True, slots=True)
class _Classes:
    """The distinct pod shapes of a workload, as arrays indexed by class id."""

    pods: tuple[PaperPod, ...]
    cpu: np.ndarray
    mem: np.ndarray
    num: np.ndarray
    milli: np.ndarray
    type_ok: np.ndarray  # [class, node] GPU type accepted


class PaperReplay:
    """The fleet and pod list of one trace variant; :meth:`run` replays it under a policy and seed."""

    def __init__(
        self,
        nodes: Sequence[PaperNode],
        pods: Sequence[PaperPod],
        *,
        typical: Sequence[TypicalPod] | None = None,
    ) -> None:
        """``typical``: FGD's target workload; by default :func:`typical_pods` of ``pods``, as the paper."""
        if not nodes or not pods:
            from gpuplace.errors import InvalidInput

            raise InvalidInput(
                "nodes/pods",
                (len(nodes), len(pods)),
                "the replay needs nodes and pods",
                "Check the trace files",
            )
        self.nodes = tuple(nodes)
        self.pods = tuple(pods)
        self.type_names = tuple(sorted({n.gpu_type for n in nodes}))
        self.n = len(nodes)
        self.g = max(1, max(n.gpus for n in nodes))
        self.cpu_cap = np.array([n.cpu_milli for n in nodes], dtype=np.int64)
        self.mem_cap = np.array([n.memory_mib for n in nodes], dtype=np.int64)
        self.ngpu = np.array([n.gpus for n in nodes], dtype=np.int64)
        self.type_id = np.array([self.type_names.index(n.gpu_type) for n in nodes], dtype=np.int64)
        self.capacity_milli = int(self.ngpu.sum()) * MILLI
        shapes: dict[PaperPod, int] = {}
        self.pod_class = [shapes.setdefault(p, len(shapes)) for p in pods]
        cls = tuple(shapes)
        type_ok = np.array(
            [[accessible(n.gpu_type, p.gpu_type) or p.num_gpu == 0 for n in nodes] for p in cls], dtype=bool
        )
        self.classes = _Classes(
            cls,
            np.array([p.cpu_milli for p in cls], dtype=np.int64),
            np.array([p.memory_mib for p in cls], dtype=np.int64),
            np.array([p.num_gpu for p in cls], dtype=np.int64),
            np.array([p.gpu_milli for p in cls], dtype=np.int64),
            type_ok,
        )
        self.typical = tuple(typical) if typical is not None else typical_pods(pods)
        self.memo = FragMemo(self.typical, self.type_names)
        gpu_typical = [t for t in self.typical if t.num_gpu]
        # CPU the workload asks per milli-GPU: what a node's free GPUs will want of its free CPU.
        self.cpu_per_gpu_milli = sum(t.weight * t.cpu_milli for t in gpu_typical) / max(
            sum(t.weight * t.gpu_milli * t.num_gpu for t in gpu_typical), 1e-9
        )

    def run(self, policy: str, seed: int, *, on_event: Callable[[int], None] | None = None) -> PaperRun:
        if policy not in PAPER_POLICIES:
            from gpuplace.errors import InvalidInput

            raise InvalidInput("policy", policy, "unknown", f"Use one of {', '.join(PAPER_POLICIES)}")
        rng = np.random.default_rng(seed)
        order = tune_workload(self.pods, self.capacity_milli, rng)
        # syncClusterResourceList prefixes node names with a random permutation ("%04d-"), and the
        # simulator's kube-scheduler breaks score ties by the smallest name: a fixed random node order.
        rank = rng.permutation(self.n)
        sim = _Sim(self, policy, rng, rank)
        arrived = np.zeros(len(order), dtype=np.int64)
        used = np.zeros(len(order), dtype=np.int64)
        got = 0
        failed = 0
        for e, idx in enumerate(order):
            c = self.pod_class[idx]
            got += self.classes.pods[c].total_milli
            if not sim.place(c):
                failed += 1
            arrived[e] = got
            used[e] = sim.allocated
            if on_event is not None:
                on_event(e)
        total_gpus = self.capacity_milli // MILLI
        return PaperRun(
            policy, seed, total_gpus, unallocated_curve(arrived, used, total_gpus), len(order), failed
        )


class _Sim:
    """Mutable cluster state of one run, and one step per pod."""

    def __init__(self, rp: PaperReplay, policy: str, rng: np.random.Generator, rank: np.ndarray) -> None:
        self.rp = rp
        self.policy = policy
        self.rng = rng
        self.rank = rank
        n, g = rp.n, rp.g
        self.cpu_left = rp.cpu_cap.copy()
        self.mem_left = rp.mem_cap.copy()
        self.gpu = np.zeros((n, g), dtype=np.int64)
        for i, k in enumerate(rp.ngpu):
            self.gpu[i, :k] = MILLI
        self.fullfree = rp.ngpu.copy()
        self.maxfree = np.where(rp.ngpu > 0, MILLI, 0).astype(np.int64)
        self.sumfree = rp.ngpu * MILLI
        self.aff = np.zeros((n, 9), dtype=np.int64)  # GpuClustering: pods per tag (share, 1..8 GPUs)
        self.ndist = np.zeros(n, dtype=np.int64)
        self.allocated = 0
        # Per-node state keys for the fragmentation memo, and which classes' scores are stale.
        self.free_sorted: list[tuple[int, ...]] = [tuple([MILLI] * int(k)) for k in rp.ngpu]
        self.version = np.zeros(n, dtype=np.int64)
        self.scores: dict[int, tuple[np.ndarray, np.ndarray, list[object]]] = {}

    # --- one pod -----------------------------------------------------------------------------------
    def place(self, c: int) -> bool:
        cl = self.rp.classes
        pod = cl.pods[c]
        ok = (self.cpu_left >= pod.cpu_milli) & (self.mem_left >= pod.memory_mib) & cl.type_ok[c]
        if pod.num_gpu:
            if pod.gpu_milli < MILLI:
                ok &= self.maxfree >= pod.gpu_milli
            else:
                ok &= self.fullfree >= pod.num_gpu
        cand = np.flatnonzero(ok)
        if len(cand) == 0:
            return False
        node, choice = self._choose(c, pod, cand)
        self._take(node, pod, choice)
        return True

    def _choose(self, c: int, pod: PaperPod, cand: np.ndarray) -> tuple[int, object]:
        p = self.policy
        if p == "random":
            return int(cand[self.rng.integers(len(cand))]), None
        if p in ("fgd", "gpuplace"):
            keys, extra = self._memo_scores(c, pod, cand)
            if p == "fgd":
                sc = keys[cand]
                best = cand[sc == sc.max()]
            else:
                best = _lexmin(cand, keys[cand])
            node = self._first(best)
            return node, extra[node]
        score = self._vector_score(pod)[cand]
        return self._first(cand[score == score.max()]), None

    def _first(self, best: np.ndarray) -> int:
        """selectHost of the simulator's kube-scheduler fork: among the top scores, the smallest name."""
        return int(best[0]) if len(best) == 1 else int(best[np.argmin(self.rank[best])])

    def _vector_score(self, pod: PaperPod) -> np.ndarray:
        p = self.policy
        total = pod.total_milli
        if p == "bestfit":
            s = (self.cpu_left - pod.cpu_milli) / float(MAX_SPEC_CPU) * 0.5
            s = s + (self.sumfree - total) / float(MAX_SPEC_GPU) * 0.5
            return ((1.0 - s) * float(MAX_SCORE)).astype(np.int64)
        if p == "dotprod":
            inner = (self.cpu_left / float(MAX_SPEC_CPU)) * (pod.cpu_milli / float(MAX_SPEC_CPU))
            inner = inner + (self.sumfree / float(MAX_SPEC_GPU)) * (total / float(MAX_SPEC_GPU))
            return (float(MAX_SCORE) * (1 - inner / 2)).astype(np.int64)
        if p == "packing":
            if pod.gpu_milli <= 0:
                return np.zeros(self.rp.n, dtype=np.int64)
            fresh = self.fullfree == self.rp.ngpu
            case3 = np.maximum(MAX_SCORE // 3 - self.fullfree, self.fullfree)
            if pod.gpu_milli < MILLI:
                fit = np.where(self.gpu >= pod.gpu_milli, self.gpu, MILLI + 1).min(axis=1)
                case1 = np.maximum(MAX_SCORE - (fit * 100 // MILLI) // 10, MAX_SCORE // 2)
                used = np.where(fit == MILLI, max(MAX_SCORE // 2 - 1, MAX_SCORE // 3), case1)
            else:
                used = np.full(self.rp.n, max(MAX_SCORE // 2 - pod.num_gpu, MAX_SCORE // 3), dtype=np.int64)
            return np.where(fresh, case3, used)
        if p == "clustering":
            if pod.gpu_milli <= 0:
                return np.zeros(self.rp.n, dtype=np.int64)
            base = MAX_SCORE // 4 * (MAX_SPEC_GPU - self.sumfree) // MAX_SPEC_GPU
            has = self.aff[:, _tag(pod)] > 0
            only = self.ndist == 1
            bonus = np.where(has, np.where(only, 75, 50), np.where(self.ndist == 0, 25, 0))
            return base + bonus
        raise AssertionError(p)

    def _memo_scores(self, c: int, pod: PaperPod, cand: np.ndarray) -> tuple[np.ndarray, list[object]]:
        """FGD-style scores of the candidates, recomputed only for nodes changed since last asked."""
        entry = self.scores.get(c)
        if entry is None:
            width = () if self.policy == "fgd" else (len(gpuplace_key(0.0, cpu_only=False, spare_cpu=0.0)),)
            keys = np.zeros((self.rp.n, *width), dtype=np.float64 if width else np.int64)
            entry = (keys, np.full(self.rp.n, -1, dtype=np.int64), [None] * self.rp.n)
            self.scores[c] = entry
        keys, seen, extra = entry
        stale = cand[seen[cand] != self.version[cand]]
        score = self._fgd_node if self.policy == "fgd" else self._gpuplace_node
        for i in stale.tolist():
            keys[i], extra[i] = score(i, pod)
            seen[i] = self.version[i]
        return keys, extra

    def _after(self, i: int, pod: PaperPod) -> tuple[int, ...]:
        """``NodeResource.Sub``: the pod's GPUs taken from the least sufficient ones."""
        free = list(self.free_sorted[i])  # ascending
        need = pod.num_gpu
        for j, f in enumerate(free):
            if need and f >= pod.gpu_milli:
                free[j] = f - pod.gpu_milli
                need -= 1
        return tuple(sorted(free))

    def _fgd_node(self, i: int, pod: PaperPod) -> tuple[int, object]:
        memo = self.rp.memo
        t = int(self.rp.type_id[i])
        cpu = int(self.cpu_left[i])
        now = self.free_sorted[i]
        before = memo.frag(t, cpu, now)
        if pod.num_gpu == 1 and pod.gpu_milli < MILLI:
            best, values = -1, set()
            for v in sorted(set(now)):
                if v < pod.gpu_milli:
                    continue
                after = list(now)
                after[after.index(v)] = v - pod.gpu_milli
                s = fgd_score(before - memo.frag(t, cpu - pod.cpu_milli, tuple(sorted(after))))
                if s > best:
                    best, values = s, {v}
                elif s == best:
                    values.add(v)
            return best, frozenset(values)
        return fgd_score(before - memo.frag(t, cpu - pod.cpu_milli, self._after(i, pod))), None

    def _gpuplace_node(self, i: int, pod: PaperPod) -> tuple[tuple[float, ...], object]:
        memo = self.rp.memo
        t = int(self.rp.type_id[i])
        cpu = int(self.cpu_left[i])
        now = self.free_sorted[i]
        before = memo.frag(t, cpu, now)
        cpu_after = cpu - pod.cpu_milli

        def key(after: tuple[int, ...]) -> tuple[float, ...]:
            spare = cpu_after - sum(after) * self.rp.cpu_per_gpu_milli
            return gpuplace_key(
                memo.frag(t, cpu_after, after) - before, cpu_only=not pod.num_gpu, spare_cpu=spare
            )

        if pod.num_gpu == 1 and pod.gpu_milli < MILLI:
            best: tuple[float, ...] | None = None
            value = 0
            for v in sorted(set(now)):  # ascending: equal keys go to the tightest GPU
                if v < pod.gpu_milli:
                    continue
                after = list(now)
                after[after.index(v)] = v - pod.gpu_milli
                k = key(tuple(sorted(after)))
                if best is None or k < best:
                    best, value = k, v
            assert best is not None
            return best, frozenset({value})
        return key(self._after(i, pod)), None

    def _take(self, i: int, pod: PaperPod, choice: object) -> None:
        row = self.gpu[i]
        k = int(self.rp.ngpu[i])
        if pod.num_gpu == 1 and pod.gpu_milli < MILLI:
            if self.policy in ("fgd", "gpuplace"):
                values = choice
                assert isinstance(values, frozenset)
                j = next(j for j in range(k) if int(row[j]) in values)
            elif self.policy == "random":
                fits = [j for j in range(k) if row[j] >= pod.gpu_milli]
                j = fits[int(self.rng.integers(len(fits)))]
            else:
                j = min((j for j in range(k) if row[j] >= pod.gpu_milli), key=lambda j: (int(row[j]), j))
            row[j] -= pod.gpu_milli
        elif pod.num_gpu:
            need = pod.num_gpu
            for j in range(k):
                if need and row[j] == MILLI:
                    row[j] = 0
                    need -= 1
        self.cpu_left[i] -= pod.cpu_milli
        self.mem_left[i] -= pod.memory_mib
        if pod.num_gpu:
            live = row[:k]
            self.fullfree[i] = int((live == MILLI).sum())
            self.maxfree[i] = int(live.max())
            self.sumfree[i] = int(live.sum())
            self.free_sorted[i] = tuple(sorted(int(x) for x in live))
            tag = _tag(pod)
            if self.aff[i, tag] == 0:
                self.ndist[i] += 1
            self.aff[i, tag] += 1
            self.allocated += pod.total_milli
        self.version[i] += 1


def _lexmin(cand: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """The candidates whose key rows are lexicographically smallest."""
    for col in range(keys.shape[1]):
        column = keys[:, col]
        keep = column == column.min()
        cand, keys = cand[keep], keys[keep]
        if len(cand) == 1:
            break
    return cand


def _tag(pod: PaperPod) -> int:
    """GpuClustering's affinity tag: 0 for a shared GPU, else the GPU count."""
    return 0 if pod.gpu_milli < MILLI else min(pod.num_gpu, 8)
