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

from gpuplace.types.latency import CHECKED_PERCENTILES, METRICS, PredictedVsMeasured
from gpuplace.types.plan import PlacementPlan, Slo
from gpuplace.types.stats import Distribution, json_clean, json_num
from gpuplace.units import WEEKS_PER_QUARTER

PATHS: tuple[str, ...] = ("native", "kubeflow")


@dataclass(frozen=True, slots=True)
class PathMetrics:
    """The measured figures of one orchestration path (docs/comparison.md defines each).

    Every figure is computed from what was measured (the placement read back from the API, the load
    test, the clock); a figure the measurement cannot give is NaN, with a note saying why — never the
    plan's. ``*_source`` fields say how a figure was computed. ``latency`` holds the measured TTFT and
    TPOT beside the plan's prediction for ``prediction_for`` (the planned GPU); its errors apply only when
    the requests were served by that GPU (``served_on``). :meth:`figures` is the flat view by figure name
    (``ttft_p99_s``, ...) that the score, MLflow and the report read.
    """

    path: str
    serving_target: str  # the deploy target: "kubernetes" or "local"
    provisioning_s: float  # first pod created → last pod ready to serve (first successful request)
    provisioning: Distribution  # per pod: created → ready to serve
    latency: PredictedVsMeasured  # TTFT and TPOT measured, beside the plan's prediction
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
    misplaced_pods: int = 0
    cost_source: str = ""
    fragmentation_source: str = ""
    notes: tuple[str, ...] = ()
    placement_level: str = ""  # "device" (DRA), "node" (device plugin), "none"
    nodes: tuple[str, ...] = ()  # measured: spec.nodeName of each pod
    gpu_ids: tuple[str, ...] = ()  # measured: DRA-allocated devices; () at node level
    served_on: str = ""  # the device that served the load test
    prediction_for: str = ""  # the planned unit the prediction is for

    @property
    def ttft(self) -> Distribution:
        return self.latency.ttft.measured

    @property
    def tpot(self) -> Distribution:
        return self.latency.tpot.measured

    @property
    def prediction_error(self) -> float:
        """Mean |measured − predicted| / predicted over p99 TTFT and TPOT; NaN when it does not apply."""
        return self.latency.mean_abs_p99_error()

    @property
    def latency_predictability(self) -> float:
        """Mean of p50/p99 over TTFT and TPOT: 1 when the tail equals the median, towards 0 as it grows."""
        ratios = [d.p50 / d.p99 for d in (self.ttft, self.tpot) if d.count and d.p99 > 0]
        return sum(ratios) / len(ratios) if ratios else math.nan

    def figures(self) -> dict[str, float]:
        """Every scalar figure by name: the number fields, the checked percentiles of TTFT and TPOT as
        measured (``ttft_p99_s``), as predicted (``predicted_ttft_p99_s``) and their relative errors
        (``ttft_p99_error``), the median provisioning, the prediction error and the predictability."""
        out = {
            name: float(getattr(self, name))
            for name, f in PathMetrics.__dataclass_fields__.items()
            if f.type in ("float", "int")
        }
        out["provisioning_p50_s"] = self.provisioning.p50
        for m in METRICS:
            checked = self.latency.metric(m)
            for q in CHECKED_PERCENTILES:
                out[f"{m}_p{q}_s"] = getattr(checked.measured, f"p{q}")
                out[f"predicted_{m}_p{q}_s"] = getattr(checked.predicted, f"p{q}")
                out[f"{m}_p{q}_error"] = self.latency.error(m, q)
        out["prediction_error"] = self.prediction_error
        out["latency_predictability"] = self.latency_predictability
        return out

    def figure(self, name: str) -> float:
        return self.figures()[name]

    def to_json_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if isinstance(value, Distribution | PredictedVsMeasured):
                value = value.to_json_dict()
            elif isinstance(value, tuple):
                value = list(value)
            data[name] = value
        return dict(json_clean(data))

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> PathMetrics:
        known: dict[str, Any] = {}
        for name, f in cls.__dataclass_fields__.items():
            if name not in data:
                continue
            value = data[name]
            if f.type == "float":
                value = json_num(value)
            elif f.type == "Distribution":
                value = Distribution.from_json_dict(value)
            elif f.type == "PredictedVsMeasured":
                value = PredictedVsMeasured.from_json_dict(value)
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


# ScoreCard.margin_method when the margin's interval comes from the runs (gpuplace.compare.noise.RUNS)
MARGIN_OVER_RUNS = "the runs in time order, a linear drift removed (t-interval)"


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
    # The noise (gpuplace.compare.noise): the path ahead on points (even when ``winner`` is "" because
    # its margin is within the noise), the interval of its margin, each criterion's figure interval per
    # path and how it was obtained, and the criteria scored as ties because their intervals overlap.
    leader: str = ""
    margin_interval: tuple[float, float] = (math.nan, math.nan)
    intervals: Mapping[str, Mapping[str, tuple[float, float]]] = field(default_factory=dict)
    interval_method: Mapping[str, str] = field(default_factory=dict)
    tied: tuple[str, ...] = ()
    confidence: float = math.nan
    resamples: int = 0
    noise_assessed: bool = False
    runs: Mapping[str, int] = field(default_factory=dict)  # path → load-test runs pooled (repeats)
    # how the margin's interval was obtained (gpuplace.compare.noise: REQUESTS, REPEATS or RUNS), and why
    # no winner is named although it excludes zero (too few runs per path to tell drift from the paths)
    margin_method: str = ""
    cannot_conclude: str = ""
    # the smallest margin (score points) the verdict names a winner for (gpuplace.compare.noise.MIN_EFFECT)
    min_effect: float = 0.0

    @property
    def under_min_effect(self) -> bool:
        """Whether the leader's margin is beyond the noise (its interval excludes zero) but under
        ``min_effect``, so no winner is named: "no difference worth acting on"."""
        return (
            self.noise_assessed
            and not self.winner
            and not self.cannot_conclude
            and 0 < self.margin < self.min_effect
            and self.margin_interval[0] > 0
        )

    @property
    def beyond_noise(self) -> bool:
        """Whether the winner's margin is beyond the noise (False when noise was not assessed)."""
        return self.noise_assessed and bool(self.winner)

    def to_json_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["flips"] = [asdict(f) for f in self.flips]
        data["margin_interval"] = list(self.margin_interval)
        data["intervals"] = {c: {p: list(iv) for p, iv in v.items()} for c, v in self.intervals.items()}
        data["tied"] = list(self.tied)
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
            leader=str(data.get("leader") or data["winner"]),
            margin_interval=_pair(data.get("margin_interval")),
            intervals={
                str(c): {str(p): _pair(iv) for p, iv in v.items()}
                for c, v in (data.get("intervals") or {}).items()
            },
            interval_method={str(k): str(v) for k, v in (data.get("interval_method") or {}).items()},
            tied=tuple(data.get("tied") or ()),
            confidence=json_num(data.get("confidence")),
            resamples=int(data.get("resamples") or 0),
            noise_assessed=bool(data.get("noise_assessed")),
            runs={str(k): int(v) for k, v in (data.get("runs") or {}).items()},
            margin_method=str(data.get("margin_method") or ""),
            cannot_conclude=str(data.get("cannot_conclude") or ""),
            min_effect=json_num(data.get("min_effect") or 0.0),
        )


def _pair(value: Any) -> tuple[float, float]:
    if not value:
        return math.nan, math.nan
    return json_num(value[0]), json_num(value[1])


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
    slo: Slo  # the SLO the load tests judged by (the first path's report)
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
                    "slo": self.slo.to_json_dict(),
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
            slo=Slo.from_json_dict(data.get("slo") or {}),
            assessed={k: dict(v) for k, v in (data.get("assessed") or {}).items()},
            notes=tuple(data.get("notes") or ()),
        )
