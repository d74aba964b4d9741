"""What to plan for, beyond the profile and the fleet: the model, the SLO, the traffic, the shapes and
GPUs allowed, prices, the fragmentation workload and the fit threshold. Parsed once from the edges'
spelling (``gpuplace plan`` flags and the ``plan_placement`` component's parameters share the names).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuplace.catalog import GpuCatalog
from gpuplace.errors import InvalidInput
from gpuplace.planner.fragmentation import DEFAULT_LLM_MIX, TaskClass, parse_mix
from gpuplace.types.plan import Slo
from gpuplace.types.workload import Traffic

KINDS: tuple[str, ...] = ("whole", "mig", "shared")
DEFAULT_TOLERATED: tuple[str, ...] = ("nvidia.com/gpu",)
# local plans: the highest rate, as a share of the local engine's measured fluid capacity, to plan
# (transformers serve admits without a cap and collapsed above it: docs/placement.md "Headroom")
DEFAULT_MAX_LOAD_SHARE = 0.5


@dataclass(frozen=True, slots=True)
class PlanRequest:
    """What to plan for, beyond the profile and the fleet."""

    model: str
    slo: Slo
    traffic: Traffic = field(default_factory=Traffic)
    deployment_name: str = ""
    fit_threshold: float = 0.85
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
    # file); the serving model draws its lengths from them
    trace_lengths: tuple[tuple[int, int], ...] = ()
    simulated_requests: int = 2000  # requests per simulation of one replica (docs/serving-model.md)
    max_load_share: float = DEFAULT_MAX_LOAD_SHARE  # local plans only

    def __post_init__(self) -> None:
        self.slo.require(
            "tpot_p99_s", "ttft_p99_s", "rate_rps", fix="A plan needs p99 TPOT, p99 TTFT and a request rate"
        )
        if not 0 <= self.fit_threshold <= 1:
            raise InvalidInput(
                "fit_threshold", self.fit_threshold, "must be in [0, 1]", "The default is 0.85"
            )
        bad = [k for k in self.kinds if k not in KINDS]
        if bad or not self.kinds:
            raise InvalidInput(
                "kinds", list(self.kinds), "unknown or empty", f"Use some of {', '.join(KINDS)}"
            )
        if self.max_tp < 1 or self.max_replicas < 1:
            raise InvalidInput("max_tp/max_replicas", (self.max_tp, self.max_replicas), "must be at least 1")
        if not 0 < self.max_load_share <= 1:
            raise InvalidInput(
                "max_load_share",
                self.max_load_share,
                "must be in (0, 1]: a share of the local engine's fluid capacity",
                f"The default is {DEFAULT_MAX_LOAD_SHARE}",
            )
        if self.simulated_requests < 50:
            raise InvalidInput(
                "simulated_requests", self.simulated_requests, "must be at least 50", "The default is 2000"
            )
        if self.traffic.trace and not self.trace_lengths:
            raise InvalidInput(
                "trace", self.traffic.trace, "was not read", "Pass its rows' lengths as trace_lengths"
            )
        if self.breach_penalty_usd < 0:
            raise InvalidInput("breach_penalty_usd", self.breach_penalty_usd, "must not be negative")
        for name, price in self.prices_usd_per_hour.items():
            if not math.isfinite(price) or price < 0:
                raise InvalidInput(f"price[{name}]", price, "must be a non-negative number")

    @classmethod
    def from_params(
        cls,
        params: Mapping[str, Any],
        catalog: GpuCatalog,
        trace_lengths: Sequence[tuple[int, int]] = (),
    ) -> PlanRequest:
        """From the edges' spelling (``gpuplace plan`` flags and the ``plan_placement`` component's
        parameters share these names): SLO in milliseconds, comma lists, ``GPU=USD`` prices; a ``trace``
        comes with its rows' (prompt, output) lengths, read by the caller."""
        prices = params.get("prices") or {}
        if not isinstance(prices, Mapping):
            prices = _parse_prices(prices)
        mix = str(params.get("task_mix") or "")
        return cls(
            model=str(params["model"]),
            # A plan needs every bound: 0 is an error here, not "unset" as it is for a load test.
            slo=Slo(
                ttft_p99_s=_seconds(params.get("slo_ttft_ms")),
                tpot_p99_s=_seconds(params.get("slo_tpot_ms")),
                rate_rps=None if params.get("rate") is None else float(params["rate"]),
            ),
            traffic=Traffic.parse(
                params.get("prompt_tokens") or 512,
                params.get("output_tokens") or 128,
                trace=str(params.get("trace") or ""),
            ),
            trace_lengths=tuple(trace_lengths),
            deployment_name=str(params.get("name") or ""),
            fit_threshold=float(params.get("fit_threshold", 0.85)),
            prices_usd_per_hour={catalog.get(n, field="prices").name: float(v) for n, v in prices.items()},
            kinds=tuple(
                k.strip() for k in str(params.get("kinds") or ",".join(KINDS)).split(",") if k.strip()
            ),
            gpus=tuple(
                catalog.get(g.strip(), field="gpus").name
                for g in str(params.get("gpus") or "").split(",")
                if g.strip()
            ),
            task_mix=parse_mix(mix) if mix else DEFAULT_LLM_MIX,
            task_mix_source="given" if mix else "default mix",
            breach_penalty_usd=float(params.get("breach_penalty_usd") or 0.0),
            max_load_share=float(
                DEFAULT_MAX_LOAD_SHARE if params.get("max_load_share") is None else params["max_load_share"]
            ),
        )


def _seconds(ms: Any) -> float | None:
    return None if ms is None else float(ms) / 1000


def _parse_prices(items: Sequence[str]) -> dict[str, float]:
    """``["H100-SXM5-80GB=4.5", ...]`` → ``{"H100-SXM5-80GB": 4.5}``."""
    prices = {}
    for item in items:
        name, _, value = str(item).partition("=")
        try:
            prices[name.strip()] = float(value)
        except ValueError:
            raise InvalidInput(
                "price", item, "is not GPU=USD_PER_HOUR", "e.g. --price H100-SXM5-80GB=4.5"
            ) from None
    return prices
