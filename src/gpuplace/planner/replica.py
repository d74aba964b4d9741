"""Sizing a deployment with the serving simulation: a replica's capacity bound, the traffic it is
simulated with (:class:`TrafficShape`), and :class:`ReplicaModel`, which caches one replica's prediction
per rate (open loop) or per concurrency (closed loop) and finds the fewest replicas that meet the SLO
(searching up from the capacity bound).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpuplace.planner.engine_sim import simulate
from gpuplace.planner.steptime import StepTimeModel
from gpuplace.types.engine import EngineParams, ServingPrediction
from gpuplace.types.workload import Traffic
from gpuplace.workload import LengthDist, RequestSpec, arrival_times, synthetic


def fluid_capacity_rps(
    engine: EngineParams, model: StepTimeModel, prompt_tokens: float, output_tokens: float
) -> float:
    """The most requests per second one replica sustains, in a fluid approximation.

    With ``n`` requests always running, each step decodes ``n`` tokens and prefills ``n·P/O`` prompt
    tokens on average (each request is replaced after ``O`` tokens), so the replica completes
    ``n / (O · step(n))`` requests per second; ``n`` is bounded by ``max_num_seqs`` and by the KV
    cache (``n·(P + O)`` tokens). The best ``n`` gives the capacity; a simulation at that rate
    saturates, so it bounds the replica count from below.
    """
    p, o = float(prompt_tokens), max(float(output_tokens), 1.0)
    kv_limit = engine.kv_capacity_tokens / (p + o)
    top = max(1, int(min(engine.max_num_seqs, kv_limit)))
    best = 0.0
    n = 1
    while True:
        prefill = n * p / o
        chunk_pairs = (n / o) * p * p / 2
        t = (
            model.step_s(n + prefill, n + n / o, n, n * (p + o / 2), chunk_pairs, decodes=n)
            + n / o * model.request_work_s
        )
        best = max(best, n / (o * t))
        if n >= top:
            break
        n = min(top, max(n + 1, int(n * 1.25)))
    return best


@dataclass(frozen=True, slots=True)
class TrafficShape:
    """The traffic one replica sees, up to its rate: lengths, arrival process and sample size.

    Lengths come from the two distributions, or, when ``lengths`` holds (prompt, output) rows (a
    trace's length mix), from those rows drawn with replacement; arrivals are the process at the rate.
    """

    prompt_tokens: LengthDist
    output_tokens: LengthDist
    process: str = "poisson"
    burstiness: float = 1.0
    requests: int = 2000
    seed: int = 0
    lengths: tuple[tuple[int, int], ...] = ()

    @classmethod
    def of(
        cls, traffic: Traffic, lengths: Sequence[tuple[int, int]] = (), *, requests: int = 2000
    ) -> TrafficShape:
        """The plan's traffic (its length distributions, or ``lengths`` read from its trace)."""
        return cls(
            traffic.prompt_tokens,
            traffic.output_tokens,
            traffic.arrival,
            traffic.burstiness,
            requests=requests,
            lengths=tuple((int(p), int(o)) for p, o in lengths),
        )

    @property
    def max_context_tokens(self) -> int:
        """Prompt plus output tokens of the longest request this traffic makes."""
        if self.lengths:
            return max(p + o for p, o in self.lengths)
        return self.prompt_tokens.upper + self.output_tokens.upper

    def describe(self, closed_loop: bool = False) -> str:
        """Lengths and arrivals in words (``closed_loop``: sent at a fixed concurrency instead)."""
        if self.lengths:
            mean_p = sum(p for p, _ in self.lengths) / len(self.lengths)
            mean_o = sum(o for _, o in self.lengths) / len(self.lengths)
            what = f"a trace's length mix ({len(self.lengths)} rows, mean {mean_p:.0f}/{mean_o:.0f} tokens)"
        else:
            what = f"{self.prompt_tokens.describe()}/{self.output_tokens.describe()} tokens"
        return f"{what}, {'closed loop' if closed_loop else f'{self.process} arrivals'}"

    def at_rate(self, rate_rps: float) -> list[RequestSpec]:
        # The same seed at every rate: arrival gaps scale exactly with 1/rate (common random numbers),
        # so predictions are monotone in the rate and a search over replica counts is consistent.
        if not self.lengths:
            return synthetic(
                self.requests,
                self.prompt_tokens,
                self.output_tokens,
                rate=rate_rps,
                process=self.process,
                burstiness=self.burstiness,
                seed=self.seed,
            )
        times = arrival_times(
            self.requests, rate_rps, process=self.process, burstiness=self.burstiness, seed=self.seed
        )
        rng = random.Random(self.seed + 1)
        rows = [self.lengths[rng.randrange(len(self.lengths))] for _ in range(self.requests)]
        return [RequestSpec(i, t, p, o) for i, (t, (p, o)) in enumerate(zip(times, rows, strict=True))]


class ReplicaModel:
    """One shape's engine and step-time model under one traffic shape, with results cached per rate.

    The planner asks it for the prediction at ``rate / replicas`` for several replica counts; each
    distinct per-replica rate is simulated once.
    """

    def __init__(self, engine: EngineParams, model: StepTimeModel, traffic: TrafficShape) -> None:
        self.engine = engine
        self.model = model
        self.traffic = traffic
        self._cache: dict[float, ServingPrediction] = {}
        sample = traffic.at_rate(1.0)[:500]
        self.mean_prompt_tokens = sum(r.prompt_tokens for r in sample) / len(sample)
        self.mean_output_tokens = sum(r.output_tokens for r in sample) / len(sample)
        mean = (self.mean_prompt_tokens, self.mean_output_tokens)
        self.capacity_rps = fluid_capacity_rps(engine, model, *mean)
        self.simulations = 0

    def at_rate(self, rate_rps: float) -> ServingPrediction:
        key = round(rate_rps, 12)
        hit = self._cache.get(key)
        if hit is None:
            self.simulations += 1
            hit = simulate(self.traffic.at_rate(rate_rps), self.engine, self.model)
            self._cache[key] = hit
        return hit

    def at_concurrency(self, concurrency: int) -> ServingPrediction:
        """The prediction under a closed loop: ``concurrency`` users, each sending its next request
        when its last one ends (the traffic's lengths; its arrival times are not used)."""
        key = -float(concurrency)  # rates are positive: one cache for both
        hit = self._cache.get(key)
        if hit is None:
            self.simulations += 1
            hit = simulate(self.traffic.at_rate(1.0), self.engine, self.model, concurrency=concurrency)
            self._cache[key] = hit
        return hit

    def saturated_rps(self) -> float:
        """The completion rate when the engine is kept full: a closed loop of as many users as it runs at
        once (``max_num_seqs``, or what its KV cache holds at the traffic's mean lengths)."""
        per_request = self.mean_prompt_tokens + self.mean_output_tokens
        at_once = min(self.engine.max_num_seqs, int(self.engine.kv_capacity_tokens // max(per_request, 1)))
        return self.at_concurrency(max(1, at_once)).throughput_rps

    def fewest_replicas(
        self, rate_rps: float, meets: Callable[[ServingPrediction], bool], max_replicas: int
    ) -> tuple[int, ServingPrediction]:
        """The fewest replicas (≤ ``max_replicas``) whose prediction ``meets`` the SLO, searching up
        from the fluid capacity bound; ``(0, prediction at max_replicas)`` when none does."""
        lo = max(1, min(max_replicas, math.ceil(rate_rps / self.capacity_rps - 1e-9)))
        pred = self.at_rate(rate_rps / lo)
        if meets(pred):
            return lo, pred
        # exponential search up, then bisection between the last miss and the first hit
        step = 1
        miss = lo
        while True:
            hi = min(max_replicas, miss + step)
            pred = self.at_rate(rate_rps / hi)
            if meets(pred):
                break
            if hi >= max_replicas:
                return 0, pred
            miss, step = hi, step * 2
        while hi - miss > 1:
            mid = (miss + hi) // 2
            p = self.at_rate(rate_rps / mid)
            if meets(p):
                hi, pred = mid, p
            else:
                miss = mid
        return hi, pred
