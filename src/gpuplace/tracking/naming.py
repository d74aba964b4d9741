"""The MLflow naming scheme: run names, tags, param and metric keys, artifact paths (docs/tracking.md).

Pure functions from gpuplace's records to flat dictionaries, so the scheme is tested without a
server and the same keys appear in every run: metric keys carry their unit (``ttft_p99_ms``,
``provisioning_s``, ``cost_usd_per_month``); latencies go to MLflow in milliseconds (a report
surface), everything else in the unit its name says. Tags are ``gpuplace.*``; run kinds are
``pipeline`` (the parent), ``step``, ``path`` and ``sweep_point``.
"""

from __future__ import annotations

import math
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

from gpuplace import __version__
from gpuplace.tracking.config import TrackingConfig
from gpuplace.types import LatencyProfile, PointResult
from gpuplace.types.compare import Comparison, PathMetrics
from gpuplace.types.latency import CHECKED_PERCENTILES, METRICS
from gpuplace.types.plan import Candidate, PlacementPlan, Slo
from gpuplace.units import to_ms

KINDS: tuple[str, ...] = ("pipeline", "step", "path", "sweep_point")

TAG_KIND = "gpuplace.kind"
TAG_STEP = "gpuplace.step"
TAG_PATH = "gpuplace.path"
TAG_MODEL = "gpuplace.model"
TAG_GPU = "gpuplace.gpu_model"
TAG_SHAPE = "gpuplace.shape"
TAG_VERSION = "gpuplace.version"
TAG_COMMIT = "gpuplace.git_commit"
TAG_KFP_RUN = "gpuplace.kfp_run_id"
TAG_TARGET = "gpuplace.serving_target"
TAG_PLAN = "gpuplace.plan_id"
TAG_VERDICT = "gpuplace.verdict"
MLFLOW_PARENT = "mlflow.parentRunId"
MLFLOW_NOTE = "mlflow.note.content"  # the run's Description in MLflow's UI (Markdown)
# MLflow 3's UI opens an experiment by its kind: traces for GenAI, the runs table for model development.
EXPERIMENT_KIND = "mlflow.experimentKind"
MODEL_DEVELOPMENT = "custom_model_development"
MLFLOW_RUN_NAME = "mlflow.runName"
MLFLOW_GIT_COMMIT = "mlflow.source.git.commit"

# Artifact folders of a run (docs/tracking.md#artifacts).
ART_PROFILE = "profile"
ART_PLAN = "plan"
ART_MANIFESTS = "plan/manifests"
ART_DEPLOY = "deploy"
ART_LOADTEST = "loadtest"
ART_PLOTS = "plots"
ART_REPORT = "report"
ART_TABLES = "tables"


LOCAL_UI = "http://127.0.0.1:5000"  # where `mlflow ui` serves a local store by default


def ui_url(config: TrackingConfig, experiment_id: str, run_id: str = "") -> str:
    """The MLflow UI page of the experiment's runs (or of one run), in the "Model training" view.

    MLflow 3.17.2's UI picks an experiment's landing page from its GenAI / Model training switch alone (the
    ``workflowType`` URL parameter, else ``localStorage['mlflow.workflowType_v1']`` in the browser, else
    GenAI), because its build hard-wires that switch on; the ``mlflow.experimentKind`` tag is read only
    with the switch off. Nothing the server or the experiment holds changes it, so this link carries the
    parameter, and opens on the runs (docs/tracking.md#what-a-reviewer-finds-where)."""
    base = LOCAL_UI if config.local else config.uri.rstrip("/")
    page = f"#/experiments/{experiment_id}/runs" + (f"/{run_id}" if run_id else "")
    return f"{base}/{page}?workflowType=machine_learning"


def git_commit(start: Path | None = None) -> str:
    """The commit of the source tree gpuplace runs from; "" outside a git checkout."""
    where = start or Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def base_tags(
    kind: str, *, model: str = "", gpu_model: str = "", shape: str = "", commit: str = ""
) -> dict[str, str]:
    """The tags every gpuplace run carries; empty values are left out."""
    if kind not in KINDS:
        raise ValueError(f"run kind {kind!r} is not one of {KINDS}")
    tags = {
        TAG_KIND: kind,
        TAG_VERSION: __version__,
        TAG_MODEL: model,
        TAG_GPU: gpu_model,
        TAG_SHAPE: shape,
        TAG_COMMIT: commit,
        MLFLOW_GIT_COMMIT: commit,
    }
    return {k: v for k, v in tags.items() if v}


def finite(metrics: Mapping[str, float]) -> dict[str, float]:
    """MLflow stores NaN but its UI and comparisons do not handle it well: unknown figures are left out."""
    return {k: float(v) for k, v in metrics.items() if v is not None and math.isfinite(float(v))}


def path_metric_dict(m: PathMetrics) -> dict[str, float]:
    """A path run's metrics: the same keys in every path run, so MLflow's compare view lines them up."""
    f = m.figures()
    return finite(
        {
            "provisioning_s": m.provisioning_s,
            "provisioning_p50_s": m.provisioning.p50,
            "ttft_p50_ms": to_ms(m.ttft.p50),
            "ttft_p99_ms": to_ms(m.ttft.p99),
            "tpot_p50_ms": to_ms(m.tpot.p50),
            "tpot_p99_ms": to_ms(m.tpot.p99),
            "goodput_rps": m.goodput_rps,
            "request_throughput_rps": m.request_throughput_rps,
            "completed_requests": float(m.completed),
            "failed_requests": float(m.failed),
            "slo_attainment_ratio": m.slo_attainment,
            "gpus": float(m.gpus),
            "gpu_hours_per_1k_requests": m.gpu_hours_per_1k_requests,
            "cost_usd_per_month": m.cost_usd_per_month,
            "fragmentation_gpus": m.fragmentation_gpus,
            "fragmentation_ratio": m.fragmentation_ratio,
            "sla_breaches_per_month": m.sla_breaches_per_month,
            "sla_breach_cost_usd_per_month": m.sla_breach_cost_usd_per_month,
            "prediction_error_ratio": m.prediction_error,
            # the plan's prediction, for the planned GPU (param prediction_for); the errors exist only when
            # the requests were served by that GPU (param served_on)
            **{
                f"predicted_{x}_p{q}_ms": to_ms(f[f"predicted_{x}_p{q}_s"])
                for x in METRICS
                for q in CHECKED_PERCENTILES
            },
            **{f"{x}_p{q}_error_ratio": f[f"{x}_p{q}_error"] for x in METRICS for q in CHECKED_PERCENTILES},
            "latency_predictability_ratio": m.latency_predictability,
            "misplaced_pods": float(m.misplaced_pods),
        }
    )


def _same(value: float) -> float:
    return value


# A scored figure's PathMetrics field → its metric key in MLflow and the conversion to the key's unit.
_FIELD_KEYS: dict[str, tuple[str, Callable[[float], float]]] = {
    "ttft_p99_s": ("ttft_p99_ms", to_ms),
    "tpot_p99_s": ("tpot_p99_ms", to_ms),
    "slo_attainment": ("slo_attainment_ratio", _same),
    "prediction_error": ("prediction_error_ratio", _same),
    "latency_predictability": ("latency_predictability_ratio", _same),
}


def interval_metric_dict(c: Comparison, path: str) -> dict[str, float]:
    """The bounds of each scored figure's interval for one path: ``<metric>_ci_low`` / ``<metric>_ci_high``
    beside the metric they bound (a figure measured once, or with no sampling noise, has none)."""
    from gpuplace.compare.score import CRITERIA

    out: dict[str, float] = {}
    for crit, by_path in c.score.intervals.items():
        low, high = by_path.get(path, (math.nan, math.nan))
        if crit not in CRITERIA or low == high:
            continue
        field = CRITERIA[crit].field
        key, unit = _FIELD_KEYS.get(field, (field, _same))
        out[f"{key}_ci_low"], out[f"{key}_ci_high"] = unit(low), unit(high)
    return finite(out)


def path_params(m: PathMetrics) -> dict[str, str]:
    """A path run's params: where it ran and what the prediction is for (MLflow params are strings)."""
    return {
        "path": m.path,
        "serving_target": m.serving_target,
        "placement_level": m.placement_level,
        "nodes": ",".join(m.nodes)[:6000],
        "gpu_ids": ",".join(m.gpu_ids)[:6000],
        "served_on": m.served_on or "unknown",
        "prediction_for": m.prediction_for,
    }


def comparison_metric_dict(c: Comparison) -> dict[str, float]:
    """The parent run's headline metrics: per-path figures prefixed with the path, scores, ROI."""
    out: dict[str, float] = {}
    for m in c.paths:
        out.update({f"{m.path}.{k}": v for k, v in path_metric_dict(m).items()})
        out[f"score.{m.path}"] = c.score.totals[m.path]
        out[f"{m.path}.load_test_runs"] = float(c.score.runs.get(m.path, 1))
    out["score.margin"] = c.score.margin
    out["score.relative_margin"] = c.score.relative_margin
    if c.score.noise_assessed:
        out["score.margin_ci_low"], out["score.margin_ci_high"] = c.score.margin_interval
        out["score.beyond_noise"] = float(c.score.beyond_noise)
        for m in c.paths:
            out.update({f"{m.path}.{k}": v for k, v in interval_metric_dict(c, m.path).items()})
    for crit, by_path in c.score.normalised.items():
        for path, value in by_path.items():
            out[f"normalised.{crit}.{path}"] = value
    for f in c.score.flips:
        out[f"flip_weight.{f.criterion}"] = f.to_weight
    if c.roi is not None:
        out["roi.build_cost_usd"] = c.roi.build_cost_usd
        out["roi.saved_usd_per_quarter"] = c.roi.saved_usd_per_quarter
        out["roi.multiple"] = c.roi.multiple
        out["roi.payback_weeks"] = c.roi.payback_weeks
    return finite(out)


def slo_params(slo: Slo) -> dict[str, str]:
    """The SLO as MLflow params, the one spelling (milliseconds) every run that logs it uses."""
    return {
        "slo_ttft_p99_ms": _slo_ms(slo.ttft_p99_s),
        "slo_tpot_p99_ms": _slo_ms(slo.tpot_p99_s),
        "rate_rps": f"{slo.rate_rps:g}" if slo.rate_rps is not None else "none",
    }


def _slo_ms(seconds: float | None) -> str:
    return "none" if seconds is None else f"{to_ms(seconds):g}"


def comparison_params(c: Comparison) -> dict[str, str]:
    params = {f"weight.{k}": f"{v:g}" for k, v in c.score.weights.items()}
    params["penalty_usd_per_breach"] = f"{c.penalty_usd_per_breach:g}"
    params.update({f"runs.{p}": str(n) for p, n in c.score.runs.items()})  # load tests pooled per path
    # no SLO here: the parent logs the plan's (else this comparison's) once, in ms (review.pipeline_params)
    for name, scores in c.assessed.items():
        params.update({f"assessed.{name}.{p}": f"{v:g}" for p, v in scores.items()})
    if c.roi is not None:
        params.update(
            {
                "roi.adopt": c.roi.adopt,
                "roi.engineering_weeks": f"{c.roi.engineering_weeks:g}",
                "roi.rate_usd_per_week": f"{c.roi.rate_usd_per_week:g}",
            }
        )
    return params


def plan_metric_dict(plan: PlacementPlan) -> dict[str, float]:
    out = {
        "replicas": float(plan.replicas),
        "gpus": float(plan.gpu_count),
        "cost_usd_per_month": plan.cost_usd_per_month,
        "fragmentation_before_gpus": plan.fragmentation_before,
        "fragmentation_after_gpus": plan.fragmentation_after,
    }
    pred = plan.prediction
    if pred is not None:
        for m in METRICS:
            for q in CHECKED_PERCENTILES:
                out[f"predicted_{m}_p{q}_ms"] = to_ms(getattr(getattr(pred, m), f"p{q}"))
    return finite(out)


def candidate_row(c: Candidate) -> dict[str, object]:
    """One candidate as a flat table row (the prediction's fields prefixed ``predicted_``, its TTFT and TPOT
    by their checked percentiles: ``predicted_ttft_p99_s``)."""
    row: dict[str, object] = {k: getattr(c, k) for k in c.__dataclass_fields__ if k != "prediction"} | {
        "label": c.label
    }
    p = c.prediction
    if p is not None:
        row |= {
            f"predicted_{m}_p{q}_s": getattr(getattr(p, m), f"p{q}")
            for m in METRICS
            for q in CHECKED_PERCENTILES
        }
        row |= {f"predicted_{k}": getattr(p, k) for k in p.__dataclass_fields__ if k not in METRICS}
    return row


def plan_params(plan: PlacementPlan) -> dict[str, str]:
    placements = "; ".join(f"{p.replica}@{p.node}:{'+'.join(p.gpu_ids)}" for p in plan.placements)
    return {
        "plan_id": plan.plan_id,
        "deployment_name": plan.deployment_name,
        "model": plan.model,
        "chosen": plan.chosen.label,
        "placements": placements[:6000],  # MLflow's param value limit
    }


PLACEMENT_MODEL_TYPE = "llm-placement"  # the LoggedModel's type in MLflow's Models tab


def placement_model_name(plan: PlacementPlan) -> str:
    """The MLflow LoggedModel name of a plan's placement, e.g. ``llama-3_1-8b on 3× H100``: MLflow refuses
    ``/ : . % " '`` in a model name, so each becomes ``_``."""
    name = f"{plan.model} on {plan.chosen.label}"
    return "".join("_" if c in "/:.%\"'" else c for c in name)


def point_params(r: PointResult) -> dict[str, str]:
    p = r.point
    return {
        "batch_size": str(p.batch_size),
        "prompt_tokens": str(p.prompt_tokens),
        "output_tokens": str(p.output_tokens),
        "dtype": p.dtype,
        "mode": p.mode,
    }


def point_metric_dict(r: PointResult) -> dict[str, float]:
    return finite(
        {
            "ok": float(r.ok),
            "ttft_p50_ms": to_ms(r.prefill.p50),
            "ttft_p99_ms": to_ms(r.prefill.p99),
            "tpot_p50_ms": to_ms(r.decode_step.p50),
            "tpot_p99_ms": to_ms(r.decode_step.p99),
            "e2e_p50_ms": to_ms(r.e2e.p50),
            "decode_tokens_per_s": r.decode_tokens_per_s,
            "mbu_ratio": r.mbu,
            "mfu_ratio": r.mfu,
            "peak_memory_gib": r.peak_memory_gib,
        }
    )


def profile_params(profile: LatencyProfile) -> dict[str, str]:
    d = profile.device
    return {
        "model": profile.model.name,
        "device": d.name,
        "device_kind": d.kind,
        "bandwidth_source": profile.bandwidth_source,
        "points": str(len(profile.results)),
    }
