"""What to plan for, beyond the profile and the fleet: the model, the SLO, the traffic, the shapes and
GPUs allowed, the precision served in, prices, the fragmentation workload and the fit threshold, as typed
values, validated. The plan step (:func:`gpuplace.steps.plan.plan_request`) builds it from the edges'
spelling (``gpuplace plan`` flags and the ``plan_placement`` component's parameters).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from gpuplace.errors import InvalidInput
from gpuplace.labels import GPU_TAINT_KEY
from gpuplace.planner.fragmentation import DEFAULT_LLM_MIX, TaskClass
from gpuplace.types.plan import (
    DEFAULT_FIT_THRESHOLD,
    DEFAULT_MAX_LOAD_SHARE,
    KINDS,
    MARGINS,
    Slo,
)
from gpuplace.types.precision import BF16, Precision
from gpuplace.types.workload import Traffic

__all__ = ["DEFAULT_MAX_LOAD_SHARE", "KINDS", "MARGINS", "PlanRequest"]
DEFAULT_TOLERATED: tuple[str, ...] = (GPU_TAINT_KEY,)
PLAN_SLO_FIX = "A plan needs p99 TPOT, p99 TTFT and a request rate (0 ms means no bound: give a positive one)"


@dataclass(frozen=True, slots=True)
class PlanRequest:
    """What to plan for, beyond the profile and the fleet."""

    model: str
    slo: Slo
    traffic: Traffic = field(default_factory=Traffic)
    deployment_name: str = ""
    fit_threshold: float = DEFAULT_FIT_THRESHOLD
    prices_usd_per_hour: Mapping[str, float] = field(default_factory=dict)  # overrides by catalog name
    kinds: tuple[str, ...] = KINDS
    gpus: tuple[str, ...] = ()  # catalog names allowed; empty = any
    tolerated_taints: tuple[str, ...] = DEFAULT_TOLERATED
    task_mix: tuple[TaskClass, ...] = DEFAULT_LLM_MIX
    task_mix_source: str = "default mix"  # "cluster pods" | "trace" | "given" | "default mix"
    task_mix_tasks: int = 0  # pods the mix was built from
    max_tp: int = 8
    max_replicas: int = 512
    breach_penalty_usd: float = 0.0
    # (prompt, output) tokens of the rows of ``traffic.trace``, read at the edge (the planner reads no
    # file; the plan step reads them into the request, so a request may be built before they are read,
    # and the planner refuses a trace whose rows never came); the serving model draws its lengths from them
    trace_lengths: tuple[tuple[int, int], ...] = ()
    simulated_requests: int = 2000  # requests per simulation of one replica (docs/serving-model.md)
    max_load_share: float | None = None  # local plans only; None: by the engine's device
    # "band": judge the SLO on the error band's slow edge (``latency_margin``: GPU class -> (TTFT, TPOT)
    # factors, read from the band file at the edge); "none": on the prediction itself
    margin: str = "none"
    latency_margin: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    precision: Precision = BF16  # weights and KV cache of every shape (--dtype, --kv-cache-dtype)

    def __post_init__(self) -> None:
        self.slo.require("tpot_p99_s", "ttft_p99_s", "rate_rps", fix=PLAN_SLO_FIX)
        if not 0 <= self.fit_threshold <= 1:
            raise InvalidInput(
                "fit_threshold",
                self.fit_threshold,
                "must be in [0, 1]",
                f"The default is {DEFAULT_FIT_THRESHOLD}",
            )
        bad = [k for k in self.kinds if k not in KINDS]
        if bad or not self.kinds:
            raise InvalidInput(
                "kinds", list(self.kinds), "unknown or empty", f"Use some of {', '.join(KINDS)}"
            )
        if self.max_tp < 1 or self.max_replicas < 1:
            raise InvalidInput("max_tp/max_replicas", (self.max_tp, self.max_replicas), "must be at least 1")
        if self.max_load_share is not None and not 0 < self.max_load_share <= 1:
            raise InvalidInput(
                "max_load_share",
                self.max_load_share,
                "must be in (0, 1]: a share of the local engine's fluid capacity",
                f"Leave it out: a CPU engine is planned up to {DEFAULT_MAX_LOAD_SHARE}, a GPU engine up to 1",
            )
        if self.simulated_requests < 50:
            raise InvalidInput(
                "simulated_requests", self.simulated_requests, "must be at least 50", "The default is 2000"
            )
        if self.margin not in MARGINS:
            raise InvalidInput("margin", self.margin, f"must be one of {', '.join(MARGINS)}", "")
        if self.breach_penalty_usd < 0:
            raise InvalidInput("breach_penalty_usd", self.breach_penalty_usd, "must not be negative")
        for name, price in self.prices_usd_per_hour.items():
            if not math.isfinite(price) or price < 0:
                raise InvalidInput(f"price[{name}]", price, "must be a non-negative number")
