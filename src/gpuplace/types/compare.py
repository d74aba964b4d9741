"""Comparison value types: per-path metrics, scores and ROI, and the comparison that holds the plan.

The comparison (:mod:`gpuplace.compare`) turns each orchestration path's deployment record and
load-test report, the plan and the fleet into :class:`PathMetrics`; scores them with
:class:`Weights` into a :class:`ScoreCard` (winner, margin, and the weight changes that flip the
verdict) and adds an :class:`Roi` view. All of it is plain data, written as ``comparison.json`` and
read by the report and the tracker. Times are seconds, money US dollars, fragmentation in GPUs (FGD, the
planner's unit) and as a ratio of the fleet's GPUs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from gpuplace.types.plan import PlacementPlan
from gpuplace.types.stats import json_clean, json_num
from gpuplace.units import WEEKS_PER_QUARTER

PATHS: tuple[str, ...] = ("native", "kubeflow")


@dataclass(frozen=True, slots=True)
class PathMetrics:
    """The measured figures of one orchestration path (docs/comparison.md defines each).

    Every figure is computed from what was measured (the placement read back from the API, the load
    test, the clock); a figure the measurement cannot give is NaN, with a note saying why — never the
    plan's. ``*_source`` fields say how a figure was computed; ``predicted_*`` are the plan's, for
    ``prediction_for`` (the planned GPU), and ``prediction_error`` is computed only when the requests were
    served by that GPU (``served_on``).
    """

    path: str
    serving_target: str  # the deploy target: "kubernetes" or "local"
    provisioning_s: float  # first pod created → last pod ready to serve (first successful request)
    provisioning_p50_s: float  # median per-pod created → ready to serve
    ttft_p50_s: float
    ttft_p99_s: float
    tpot_p50_s: float
    tpot_p99_s: float
    goodput_rps: float
    request_throughput_rps: float
    completed: int
    failed: int
    slo_attainment: float
    gpus: float  # GPUs held as measured; a time-sliced share counts its share; NaN without cluster GPUs
    gpu_hours_per_1k_requests: float
    cost_usd_per_month: float
    fragmentation_gpus: float  # FGD: expected GPUs the workload mix cannot use, fleet after placement
    fragmentation_ratio: float  # fragmentation_gpus / whole GPUs in the fleet; NaN without the fleet
    sla_breaches_per_month: float
    sla_breach_cost_usd_per_month: float
    prediction_error: float  # mean |measured − predicted| / predicted over p99 TTFT and TPOT
    latency_predictability: float  # mean of p50/p99 over TTFT and TPOT: 1 = no tail
    misplaced_pods: int = 0
    cost_source: str = ""
    fragmentation_source: str = ""
    notes: tuple[str, ...] = ()
    placement_level: str = ""  # "device" (DRA), "node" (device plugin), "none"
    nodes: tuple[str, ...] = ()  # measured: spec.nodeName of each pod
    gpu_ids: tuple[str, ...] = ()  # measured: DRA-allocated devices; () at node level
    served_on: str = ""  # the device that served the load test
    prediction_for: str = ""  # the planned unit the prediction is for
    predicted_ttft_p99_s: float = math.nan
    predicted_tpot_p99_s: float = math.nan
    ttft_p99_error: float = math.nan  # (measured − predicted) / predicted; NaN unless served_on matches
    tpot_p99_error: float = math.nan
    predicted_ttft_p50_s: float = math.nan
    predicted_tpot_p50_s: float = math.nan
    ttft_p50_error: float = math.nan  # likewise, at the median
    tpot_p50_error: float = math.nan

    def to_json_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("notes", "nodes", "gpu_ids"):
            data[key] = list(getattr(self, key))
        return dict(json_clean(data))

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> PathMetrics:
        known: dict[str, Any] = {}
        for name, f in cls.__dataclass_fields__.items():
            if name not in data:
                continue
            value = data[name]
            if f.type == "float":
                value = math.nan if value is None else float(value)
            known[name] = value
        for key in ("notes", "nodes", "gpu_ids"):
            known[key] = tuple(known.get(key) or ())
        return cls(**known)


@dataclass(frozen=True, slots=True)
class Flip:
    """The smallest change of one criterion's weight (others rescaled in proportion) that changes
    the winner; ``to_weight`` is NaN when no weight in [0, 1] does."""

    criterion: str
    weight: float
    to_weight: float
    new_winner: str

    @property
    def flips(self) -> bool:
        return not math.isnan(self.to_weight)


@dataclass(frozen=True, slots=True)
class ScoreCard:
    """Normalised criterion scores per path, the weighted totals and the verdict."""

    weights: Mapping[str, float]
    normalised: Mapping[str, Mapping[str, float]]  # criterion → path → score in [0, 1]
    raw: Mapping[str, Mapping[str, float]]  # criterion → path → the figure before normalising
    totals: Mapping[str, float]  # path → Σ weight × normalised
    winner: str  # "" on a tie
    runner_up: str
    margin: float  # winner's total − runner-up's, in score points (0–1)
    relative_margin: float  # margin / runner-up's total
    flips: tuple[Flip, ...] = ()
    normalisation: Mapping[str, str] = field(default_factory=dict)  # criterion → how it was scored
    # weighted criteria left out of the verdict because a path's figure is unknown → why
    excluded: Mapping[str, str] = field(default_factory=dict)

    def to_json_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["flips"] = [asdict(f) for f in self.flips]
        return dict(json_clean(data))

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> ScoreCard:
        def nums(m: Mapping[str, Any]) -> dict[str, float]:
            return {k: json_num(v) for k, v in m.items()}

        return cls(
            weights=nums(data["weights"]),
            normalised={c: nums(v) for c, v in data["normalised"].items()},
            raw={c: nums(v) for c, v in data["raw"].items()},
            totals=nums(data["totals"]),
            winner=str(data["winner"]),
            runner_up=str(data["runner_up"]),
            margin=json_num(data["margin"]),
            relative_margin=json_num(data["relative_margin"]),
            flips=tuple(
                Flip(
                    f["criterion"],
                    float(f["weight"]),
                    json_num(f["to_weight"]),
                    f["new_winner"],
                )
                for f in data.get("flips") or ()
            ),
            normalisation={str(k): str(v) for k, v in (data.get("normalisation") or {}).items()},
            excluded={str(k): str(v) for k, v in (data.get("excluded") or {}).items()},
        )


@dataclass(frozen=True, slots=True)
class Roi:
    """Engineering cost of adopting a placement mechanism against the SLA penalties it avoids."""

    adopt: str
    baseline: str
    engineering_weeks: float
    rate_usd_per_week: float
    saved_usd_per_quarter: float
    saved_source: str  # "given" or "breach cost difference"

    @property
    def build_cost_usd(self) -> float:
        return self.engineering_weeks * self.rate_usd_per_week

    @property
    def multiple(self) -> float:
        """Saved per quarter ÷ build cost: $120k saved on a $15k build is 8×."""
        if self.build_cost_usd == 0:
            return math.inf if self.saved_usd_per_quarter > 0 else math.nan
        return self.saved_usd_per_quarter / self.build_cost_usd

    @property
    def payback_weeks(self) -> float:
        per_week = self.saved_usd_per_quarter / WEEKS_PER_QUARTER
        return self.build_cost_usd / per_week if per_week > 0 else math.inf

    def to_json_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(
            build_cost_usd=self.build_cost_usd, multiple=self.multiple, payback_weeks=self.payback_weeks
        )
        return dict(json_clean(data))

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> Roi:
        return cls(
            adopt=data["adopt"],
            baseline=data["baseline"],
            engineering_weeks=float(data["engineering_weeks"]),
            rate_usd_per_week=float(data["rate_usd_per_week"]),
            saved_usd_per_quarter=json_num(data["saved_usd_per_quarter"]),
            saved_source=data["saved_source"],
        )


@dataclass(frozen=True, slots=True)
class Comparison:
    """Everything ``gpuplace compare`` produces; ``comparison.json`` holds ``to_json_dict()``."""

    paths: tuple[PathMetrics, ...]
    score: ScoreCard
    roi: Roi | None
    plan: PlacementPlan | None
    penalty_usd_per_breach: float
    slo: Mapping[str, float]
    assessed: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def path(self, name: str) -> PathMetrics:
        for p in self.paths:
            if p.path == name:
                return p
        raise KeyError(name)

    def to_json_dict(self) -> dict[str, Any]:
        return dict(
            json_clean(
                {
                    "paths": [p.to_json_dict() for p in self.paths],
                    "score": self.score.to_json_dict(),
                    "roi": self.roi.to_json_dict() if self.roi else None,
                    "plan": None if self.plan is None else self.plan.to_json_dict(),
                    "penalty_usd_per_breach": self.penalty_usd_per_breach,
                    "slo": dict(self.slo),
                    "assessed": {k: dict(v) for k, v in self.assessed.items()},
                    "notes": list(self.notes),
                }
            )
        )

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> Comparison:
        return cls(
            paths=tuple(PathMetrics.from_json_dict(p) for p in data["paths"]),
            score=ScoreCard.from_json_dict(data["score"]),
            roi=Roi.from_json_dict(data["roi"]) if data.get("roi") else None,
            plan=PlacementPlan.from_json_dict(data["plan"]) if data.get("plan") else None,
            penalty_usd_per_breach=float(data["penalty_usd_per_breach"]),
            slo={k: json_num(v) for k, v in (data.get("slo") or {}).items()},
            assessed={k: dict(v) for k, v in (data.get("assessed") or {}).items()},
            notes=tuple(data.get("notes") or ()),
        )
