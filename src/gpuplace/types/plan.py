"""The plan: the SLO asked for, the shapes considered, where each replica goes, and why.

``Slo`` is the input; ``Candidate`` is one shape (GPU model × whole/MIG/shared × tensor-parallel degree
× replicas) with its predicted latency, memory, cost and verdict; ``Placement`` puts one replica on a
concrete GPU set; ``PlacementPlan`` is the planner's answer, written as ``plan.json``. Times are seconds;
``to_json_dict`` adds nothing the dataclasses do not hold, so ``from_json_dict`` round-trips.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from gpuplace.errors import GpuplaceError, InvalidInput
from gpuplace.types.fleet import is_local_inventory
from gpuplace.types.serving import EngineParams, ServingSpec
from gpuplace.types.stats import Distribution, json_clean, json_num
from gpuplace.types.workload import Traffic
from gpuplace.units import HOURS_PER_MONTH, seconds, to_ms

_SLO_FIX = "e.g. p99 TTFT 2 s, p99 TPOT 0.05 s, 5 req/s"
# A placement whose GPU-fit score is lower is rejected; the one default (the plan_placement component
# spells it in its signature, and a test holds it equal).
DEFAULT_FIT_THRESHOLD = 0.85
# The shape kinds a plan may choose from, and how it may judge the SLO (gpuplace.planner.request).
KINDS: tuple[str, ...] = ("whole", "mig", "shared")
MARGINS: tuple[str, ...] = ("none", "band")
# local plans on a CPU: the highest rate, as a share of the local engine's measured fluid capacity, to plan
# (transformers serve admits without a cap and on this shared CPU collapsed above it: docs/placement.md
# "Headroom"). No such collapse was measured on a GPU, so a CUDA engine is planned up to its capacity
# (a request's None: the share by the engine's device; gpuplace.planner.local.load_share_limit).
DEFAULT_MAX_LOAD_SHARE = 0.5


@dataclass(frozen=True, slots=True, kw_only=True)
class Slo:
    """Latency targets at a request rate: p99 TTFT and p99 TPOT in seconds; each may be unset (None).

    The one SLO type of gpuplace. The planner needs all three (:meth:`require`); a load test judges
    goodput by the bounds that are set: a request is *good* when its own TTFT and TPOT are within them
    (vLLM's ``--goodput``), and the run meets the SLO when its p99s are too. Milliseconds exist only at
    the edges (CLI flags, component parameters, reports): :meth:`from_ms` converts them once.
    """

    ttft_p99_s: float | None = None
    tpot_p99_s: float | None = None
    rate_rps: float | None = None

    def __post_init__(self) -> None:
        for name in ("ttft_p99_s", "tpot_p99_s", "rate_rps"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
                raise InvalidInput(name, value, "must be a positive number", _SLO_FIX)
            if value <= 0:
                raise InvalidInput(name, value, "must be positive", _SLO_FIX)

    @classmethod
    def from_ms(
        cls, *, ttft_ms: float | None = None, tpot_ms: float | None = None, rate_rps: float | None = None
    ) -> Slo:
        """From the edges' spelling: milliseconds, and 0 or None for "no bound" (KFP has no None). The one
        reading of an SLO given in milliseconds: every flag and component parameter comes through here."""
        return cls(
            ttft_p99_s=seconds(ttft_ms) if ttft_ms else None,
            tpot_p99_s=seconds(tpot_ms) if tpot_ms else None,
            rate_rps=rate_rps or None,
        )

    @property
    def bounded(self) -> bool:
        return self.ttft_p99_s is not None or self.tpot_p99_s is not None

    def require(self, *names: str, fix: str = _SLO_FIX) -> None:
        """Raise :class:`InvalidInput` naming the first of ``names`` that is unset."""
        for name in names:
            if getattr(self, name) is None:
                raise InvalidInput(name, None, "is required here", fix)

    def bound(self, name: str) -> float:
        """The value of a bound the caller needs set (``ttft_p99_s``, ``tpot_p99_s`` or ``rate_rps``)."""
        self.require(name)
        value: float = getattr(self, name)
        return value

    def good(self, ttft_s: float, tpot_s: float) -> bool:
        """Whether one request meets the SLO; a request with one output token has no TPOT to miss."""
        if self.ttft_p99_s is not None and not ttft_s <= self.ttft_p99_s:
            return False
        return self.tpot_p99_s is None or math.isnan(tpot_s) or tpot_s <= self.tpot_p99_s

    def with_rate(self, rate_rps: float | None) -> Slo:
        return Slo(ttft_p99_s=self.ttft_p99_s, tpot_p99_s=self.tpot_p99_s, rate_rps=rate_rps)

    def describe(self) -> str:
        """``p99 TTFT ≤ 2000 ms, p99 TPOT ≤ 50 ms at 5 req/s`` (milliseconds: this is an edge)."""
        parts = [
            f"p99 {label} ≤ {to_ms(value):g} ms"
            for label, value in (("TTFT", self.ttft_p99_s), ("TPOT", self.tpot_p99_s))
            if value is not None
        ]
        text = ", ".join(parts) or "no latency bound"
        return text + (f" at {self.rate_rps:g} req/s" if self.rate_rps is not None else "")

    def to_json_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> Slo:
        def num(key: str) -> float | None:
            value = data.get(key)
            return None if value is None else float(value)

        return cls(ttft_p99_s=num("ttft_p99_s"), tpot_p99_s=num("tpot_p99_s"), rate_rps=num("rate_rps"))


@dataclass(frozen=True, slots=True)
class Prediction:
    """Predicted latency of one replica at its share of the rate; ``stable`` False when it cannot keep up
    (its latencies are then infinite). TTFT and TPOT are the simulation's distributions (seconds), so a
    prediction compares with a load test's figure by figure
    (:class:`~gpuplace.types.latency.PredictedVsMeasured`)."""

    ttft: Distribution
    tpot: Distribution
    concurrency: float  # mean requests in flight per replica (Little's law)
    max_batch: int  # planned concurrency per replica (its 99th percentile), what memory is sized for
    memory_per_gpu_gib: float
    stable: bool = True


@dataclass(frozen=True, slots=True)
class Candidate:
    """One shape and what the planner thinks of it."""

    gpu: str  # catalog name
    kind: str  # "whole" | "mig" | "shared"
    tp: int
    replicas: int
    mig_profile: str = ""
    share: float = 1.0  # fraction of one GPU for kind "shared"
    interconnect: str = "single"  # best interconnect assumed for the prediction
    prediction: Prediction | None = None
    memory_available_gib: float = 0.0
    cost_usd_per_hour: float = 0.0
    verdict: str = "rejected"  # "chosen" | "feasible" | "rejected"
    reason: str = ""
    miss: float = math.nan  # worst predicted/target ratio (p99 TPOT, p99 TTFT, memory); ≤ 1 meets all
    fit_score: float = math.nan

    @property
    def label(self) -> str:
        if self.kind == "mig":
            unit = f"{self.gpu} MIG {self.mig_profile}"
        elif self.kind == "shared":
            unit = f"{self.share:g}×{self.gpu} (shared)"
        else:
            unit = f"{self.tp}×{self.gpu}" if self.tp > 1 else self.gpu
        return f"{self.replicas}× {unit}" if self.replicas else unit

    @property
    def gpus_per_replica(self) -> int:
        return self.tp if self.kind == "whole" else 1

    @property
    def unit(self) -> str:
        """The device one GPU of this shape is: the catalog GPU, with its MIG profile or share. A latency
        prediction is checked only against a measurement served by this unit."""
        if self.kind == "mig":
            return f"{self.gpu} MIG {self.mig_profile}"
        if self.kind == "shared":
            return f"{self.gpu} ({self.share:g} share)"
        return self.gpu

    @property
    def cost_usd_per_month(self) -> float:
        return self.cost_usd_per_hour * HOURS_PER_MONTH


@dataclass(frozen=True, slots=True)
class Placement:
    """One replica on a concrete GPU set: of one node, or of several nodes of one multi-node NVLink domain
    (``gpu_ids`` are ``<node>/gpu<i>``; ``node`` is the first of :attr:`nodes`)."""

    replica: int
    node: str
    gpu_ids: tuple[str, ...]
    interconnect: str  # "single" | "nvlink" | "pcie-switch" | "numa" | "cross-numa" | "mig" | "shared"
    numa_node: int | None  # the NUMA node when all GPUs share one, else None
    fit_score: float
    fragmentation_delta: float  # change of the fleet's FGD fragmentation (GPUs) this replica caused
    prediction: Prediction | None = None

    @property
    def nodes(self) -> tuple[str, ...]:
        """The nodes the replica's GPUs are on, in the order ``gpu_ids`` lists them."""
        nodes: list[str] = []
        for g in self.gpu_ids:
            node = g.split("/", 1)[0] if "/" in g else self.node
            if node not in nodes:
                nodes.append(node)
        return tuple(nodes) or (self.node,)


@dataclass(frozen=True, slots=True)
class PlacementPlan:
    """The planner's answer, written as ``plan.json`` by :mod:`gpuplace.plandir` (its only reader too).

    ``traffic`` is the request stream the prediction is for and the load test's default; ``engine`` the
    engine parameters the prediction assumed; ``serving`` is what every orchestration path runs, those
    parameters included (attached by the plan step once the manifests' options are known).
    """

    plan_id: str
    deployment_name: str
    model: str
    slo: Slo
    chosen: Candidate
    placements: tuple[Placement, ...]
    candidates: tuple[Candidate, ...]
    fragmentation_before: float
    fragmentation_after: float
    fit_threshold: float
    inventory_source: str = ""
    profile_device: str = ""
    notes: tuple[str, ...] = ()
    sla_breach_cost_usd_per_month: float = 0.0
    tradeoff: tuple[Mapping[str, Any], ...] = field(default_factory=tuple)
    traffic: Traffic = field(default_factory=Traffic)
    serving: ServingSpec | None = None
    # the engine parameters the chosen shape's prediction assumed (one replica); the serving spec runs them
    engine: EngineParams | None = None
    # What fragmentation was measured against and what FGD changed (docs/placement.md): ``source``
    # ("cluster pods" | "trace" | "given" | "default mix"), ``tasks``, ``classes``, ``effect``.
    fragmentation_workload: Mapping[str, Any] = field(default_factory=dict)

    @property
    def replicas(self) -> int:
        return len(self.placements)

    @property
    def cost_usd_per_month(self) -> float:
        return self.chosen.cost_usd_per_month

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(sorted({n for p in self.placements for n in p.nodes}))

    @property
    def gpu_count(self) -> int:
        """Physical or fractional GPUs the plan holds: whole GPUs count 1, MIG slices and shares 1 each."""
        return sum(len(p.gpu_ids) for p in self.placements)

    @property
    def prediction(self) -> Prediction | None:
        return self.chosen.prediction

    @property
    def is_local(self) -> bool:
        """A plan of this machine: served by the local engine, no manifests, no fleet cost."""
        return is_local_inventory(self.inventory_source)

    def prediction_for(self, served_on: str) -> Prediction | None:
        """The prediction, if the requests were served on the device it is for (``served_on``, a
        catalog unit; "" when not known): a prediction is only ever checked against a measurement on
        its own device."""
        return self.prediction if served_on and served_on == self.chosen.unit else None

    def to_json_dict(self) -> dict[str, Any]:
        pred = self.chosen.prediction
        data: dict[str, Any] = {
            "plan_id": self.plan_id,
            "deployment_name": self.deployment_name,
            "model": self.model,
            "slo": self.slo.to_json_dict(),
            "traffic": self.traffic.to_json_dict(),
            "serving": self.serving.to_json_dict() if self.serving else None,
            "engine": self.engine.to_json_dict() if self.engine else None,
            "chosen": json_clean(asdict(self.chosen)) | {"label": self.chosen.label},
            "replicas": self.replicas,
            "placements": [json_clean(asdict(p)) for p in self.placements],
            "predicted": {  # the chosen shape's checked percentiles, for a reader of the file
                f"{m}_p{q}_s": json_clean(getattr(getattr(pred, m), f"p{q}")) if pred else None
                for m in ("ttft", "tpot")
                for q in (50, 99)
            },
            "cost_usd_per_month": self.cost_usd_per_month,
            "sla_breach_cost_usd_per_month": self.sla_breach_cost_usd_per_month,
            "fragmentation_before": self.fragmentation_before,
            "fragmentation_after": self.fragmentation_after,
            "fit_threshold": self.fit_threshold,
            "candidates": [json_clean(asdict(c)) | {"label": c.label} for c in self.candidates],
            "tradeoff": [dict(t) for t in self.tradeoff],
            "inventory_source": self.inventory_source,
            "profile_device": self.profile_device,
            "notes": list(self.notes),
            "fragmentation_workload": dict(self.fragmentation_workload),
        }
        return data

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> PlacementPlan:
        return cls(
            plan_id=str(data["plan_id"]),
            deployment_name=str(data["deployment_name"]),
            model=str(data["model"]),
            slo=Slo.from_json_dict(data["slo"]),
            chosen=_candidate(data["chosen"]),
            placements=tuple(_placement(p) for p in data["placements"]),
            candidates=tuple(_candidate(c) for c in data.get("candidates") or ()),
            fragmentation_before=float(data["fragmentation_before"]),
            fragmentation_after=float(data["fragmentation_after"]),
            fit_threshold=float(data.get("fit_threshold", DEFAULT_FIT_THRESHOLD)),
            inventory_source=str(data.get("inventory_source", "")),
            profile_device=str(data.get("profile_device", "")),
            notes=tuple(data.get("notes") or ()),
            sla_breach_cost_usd_per_month=float(data.get("sla_breach_cost_usd_per_month") or 0.0),
            tradeoff=tuple(data.get("tradeoff") or ()),
            traffic=Traffic.from_json_dict(data.get("traffic") or {}),
            serving=ServingSpec.from_json_dict(data["serving"]) if data.get("serving") else None,
            engine=EngineParams.from_json_dict(data["engine"]) if data.get("engine") else None,
            fragmentation_workload=dict(data.get("fragmentation_workload") or {}),
        )


def _prediction(data: Mapping[str, Any] | None) -> Prediction | None:
    if not data:
        return None
    known = {k: data[k] for k in Prediction.__dataclass_fields__ if k in data}
    for m in ("ttft", "tpot"):
        if isinstance(data.get(m), Mapping):
            known[m] = Distribution.from_json_dict(data[m])
        else:  # a plan.json written when a prediction held its percentiles as flat fields
            known[m] = Distribution.from_percentiles(
                p50=json_num(data.get(f"{m}_p50_s")), p99=json_num(data.get(f"{m}_p99_s"))
            )
    for k in ("concurrency", "memory_per_gpu_gib"):
        known[k] = json_num(known.get(k))
    return Prediction(**known)


def _candidate(data: Mapping[str, Any]) -> Candidate:
    known = {k: data[k] for k in Candidate.__dataclass_fields__ if k in data}
    known["prediction"] = _prediction(data.get("prediction"))
    for k in ("miss", "fit_score"):
        known[k] = json_num(known.get(k))
    return Candidate(**known)


def _placement(data: Mapping[str, Any]) -> Placement:
    known = {k: data[k] for k in Placement.__dataclass_fields__ if k in data}
    known["gpu_ids"] = tuple(known.get("gpu_ids") or ())
    known["prediction"] = _prediction(data.get("prediction"))
    known["fit_score"] = json_num(known.get("fit_score"))
    known["fragmentation_delta"] = json_num(known.get("fragmentation_delta"))
    return Placement(**known)


class NoFeasiblePlacement(GpuplaceError):
    """No shape meets the SLO and fits the fleet; lists every rejected shape, the closest miss and a fix."""

    def __init__(self, slo: Slo, rejected: tuple[Candidate, ...], fix: str) -> None:
        self.slo = slo
        self.rejected = rejected
        self.fix = fix
        misses = [c for c in rejected if math.isfinite(c.miss)]
        self.closest = min(misses, key=lambda c: (c.miss, c.cost_usd_per_hour, c.label)) if misses else None
        head = f"no GPU shape meets {slo.describe()}"
        if self.closest is not None and self.closest.prediction is not None:
            p = self.closest.prediction
            # miss is the worst predicted/target ratio, so "by how much" is its excess over 1
            head += (
                f"; closest: {self.closest.label}, which misses it by {self.closest.miss - 1:.0%}, at "
                f"p99 TPOT {to_ms(p.tpot.p99):.1f} ms, p99 TTFT {to_ms(p.ttft.p99):.0f} ms "
                f"({self.closest.reason})"
            )
        lines = [head + "."]
        lines += [f"  - {c.label}: {c.reason}" for c in rejected]
        lines.append(f"To fix: {fix}")
        super().__init__("\n".join(lines))
