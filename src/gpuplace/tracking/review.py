"""What a reviewer meets first in MLflow's UI: the parent run's params, its description, and run spans.

Pure functions from gpuplace's records (docs/tracking.md#what-a-reviewer-finds-where):
:func:`pipeline_params` are the inputs of the pipeline run — model, fleet, SLO, rate, lengths, the kinds
of shape the planner considered, the chosen shape, the plan id, gpuplace's version and the KFP run id —
so the runs table can filter and compare runs by them; :func:`description` is the Markdown of the
parent run's Description (``mlflow.note.content``): the chosen shape, predicted against measured, and the
verdict; :func:`spans` are the start and end of each run as the steps recorded them (the profile's
start and finish, the deployment's creation, the load test's wall clock), so a run's Duration is its
step's, not the logging's.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpuplace import __version__
from gpuplace.tracking.naming import slo_params
from gpuplace.types import DeploymentRecord, LatencyProfile
from gpuplace.types.compare import Comparison, PathMetrics
from gpuplace.types.loadtest import LatencyReport
from gpuplace.types.plan import PlacementPlan, Slo
from gpuplace.units import ms

Span = tuple[float, float]  # epoch seconds


def epoch_s(iso: str) -> float:
    """An ISO 8601 time as epoch seconds; NaN when empty or unreadable (a naive time is UTC)."""
    try:
        t = dt.datetime.fromisoformat(iso)
    except (TypeError, ValueError):
        return math.nan
    return (t if t.tzinfo else t.replace(tzinfo=dt.UTC)).timestamp()


@dataclass(frozen=True, slots=True)
class PathRecords:
    """One path's records as its steps wrote them (either may be missing)."""

    path: str
    deployment: DeploymentRecord | None = None
    report: LatencyReport | None = None


def _span(start: float, end: float) -> Span | None:
    return (start, end) if math.isfinite(start) and math.isfinite(end) and end >= start else None


def path_span(p: PathRecords) -> Span | None:
    """Deployment created → load test finished (the deploy step's start when the pods' times are missing)."""
    if p.deployment is None or p.report is None:
        return None
    created = [pod.created_at_s for pod in p.deployment.pods if math.isfinite(pod.created_at_s)]
    start = epoch_s(p.deployment.created_at)
    if created and not math.isfinite(start):
        start = min(created)
    return _span(start, p.report.finished_at_s)


def spans(profile: LatencyProfile | None, paths: Sequence[PathRecords]) -> dict[str, Span]:
    """Spans by run: ``profile``, ``path: <name>``, ``plan`` (between the profile's end and the first
    deployment: the plan step records no times of its own) and ``pipeline`` (first start → last end)."""
    out: dict[str, Span] = {}
    if profile is not None and (s := _span(epoch_s(profile.started_at), epoch_s(profile.created_at))):
        out["profile"] = s
    for p in paths:
        if (s := path_span(p)) is not None:
            out[f"path: {p.path}"] = s
    path_starts = [s[0] for k, s in out.items() if k.startswith("path: ")]
    if "profile" in out and path_starts and (s := _span(out["profile"][1], min(path_starts))):
        out["plan"] = s
    if out:
        out["pipeline"] = (min(s[0] for s in out.values()), max(s[1] for s in out.values()))
    return out


def pipeline_params(
    plan: PlacementPlan | None,
    kfp_run_id: str,
    workload: Mapping[str, object] | None = None,
    slo: Slo | None = None,
) -> dict[str, str]:
    """The pipeline run's inputs as MLflow params (strings; a value not known is left out). The SLO is the
    plan's, else ``slo`` (a comparison's): one spelling, in milliseconds, logged once."""
    out = {"gpuplace_version": __version__, "kfp_run_id": kfp_run_id or "none (not run by KFP)"}
    if plan is None and slo is not None:
        out.update(slo_params(slo))
    if plan is not None:
        slo, traffic, chosen = plan.slo, plan.traffic, plan.chosen
        out.update(
            {
                "model": plan.model,
                "inventory": plan.inventory_source or "unknown",
                "plan_id": plan.plan_id,
                **slo_params(slo),
                "arrival": traffic.arrival,
                "prompt_tokens": traffic.prompt_tokens.describe(),
                "output_tokens": traffic.output_tokens.describe(),
                "trace": traffic.trace or "none",
                "kinds_considered": ",".join(sorted({c.kind for c in plan.candidates} | {chosen.kind})),
                "chosen_shape": chosen.label,
                "chosen_gpu": chosen.gpu,
                "chosen_kind": chosen.kind + (f" {chosen.mig_profile}" if chosen.mig_profile else ""),
                "chosen_tp": str(chosen.tp),
                "chosen_replicas": str(plan.replicas),
            }
        )
    for key in ("concurrency", "max_requests"):
        value = (workload or {}).get(key)
        if value is not None:
            out[f"loadtest_{key}"] = str(value)
    return out


def loadtest_params(report: LatencyReport) -> dict[str, str]:
    """A path run's load-test params: how the load was generated (``loadtest_<key>``)."""
    return {
        f"loadtest_{k}": str(v)[:6000]
        for k, v in report.workload.items()
        if isinstance(v, str | int | float | bool) and k not in ("tokenizer",)
    }


def description(
    plan: PlacementPlan | None, measured: Sequence[PathMetrics], comparison: Comparison | None, verdict: str
) -> str:
    """The parent run's Description: the chosen shape, predicted against measured, and the verdict."""
    lines = ["### gpuplace pipeline run", ""]
    if plan is not None:
        lines += [
            f"**Chosen shape** {plan.chosen.label} for `{plan.model}` (plan `{plan.plan_id}`, "
            f"{plan.slo.describe()}).",
            "",
        ]
    if measured:
        lines += ["| | predicted | " + " | ".join(f"measured ({m.path})" for m in measured) + " |"]
        lines += ["|---|---:|" + "---:|" * len(measured)]
        for label, key in (("p99 TTFT (ms)", "ttft"), ("p99 TPOT (ms)", "tpot")):
            pred = getattr(plan.prediction, key).p99 if plan is not None and plan.prediction else None
            cells = " | ".join(ms(getattr(m, key).p99, 2) for m in measured)
            lines.append(f"| {label} | {ms(pred, 2)} | {cells} |")
        elsewhere = sorted(
            {m.served_on or "an unknown device" for m in measured if m.served_on != m.prediction_for}
        )
        if plan is not None and elsewhere:
            lines += [
                "",
                f"The prediction is for {plan.chosen.unit}; the requests were served on "
                f"{', '.join(elsewhere)}: not comparable.",
            ]
        lines.append("")
    if comparison is not None:
        lines += [f"**Verdict** {verdict}", ""]
    lines.append("Params hold the inputs; the `path: …` child runs line up in Compare (docs/tracking.md).")
    return "\n".join(lines)
