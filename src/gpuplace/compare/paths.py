"""The comparison of the two paths: :func:`compare_paths` on values (each path's deployment records and
load-test reports, the plan, the fleet; the FGD fragmentation function passed in), the check that both
served one spec, and the resampled intervals of the figures the verdict weighs."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from gpuplace.catalog import GpuCatalog
from gpuplace.compare.metrics import FragmentationFn, PathResult, path_metrics, provisioning_s
from gpuplace.compare.noise import RESAMPLES, MeasuredRun, path_replicates, pooled, run_figures, run_slots
from gpuplace.compare.roi import roi
from gpuplace.compare.score import DEFAULT_WEIGHTS, score
from gpuplace.errors import CheckFailed, InvalidInput, UnknownName
from gpuplace.types import Inventory
from gpuplace.types.compare import PATHS, Comparison, PathMetrics, Roi
from gpuplace.types.plan import PlacementPlan


class IncomparablePaths(CheckFailed):
    """The two paths did not serve the same thing, so no verdict on orchestration can be drawn."""


def check_same_serving(results: Sequence[PathResult]) -> None:
    """Raise :class:`IncomparablePaths` unless every path's deployment record holds the same serving spec."""
    missing = [r.path for r in results if r.deployment.serving is None]
    if missing:
        raise IncomparablePaths(
            f"no verdict: the deployment record of the {' and '.join(missing)} path does not say which "
            "serving spec ran, so the paths cannot be shown to serve the same thing. Re-deploy with this "
            "gpuplace (docs/comparison.md#same-spec)."
        )
    first = results[0]
    for other in results[1:]:
        assert first.deployment.serving is not None and other.deployment.serving is not None
        diff = first.deployment.serving.differences(other.deployment.serving)
        if diff:
            raise IncomparablePaths(
                f"no verdict: the {first.path} and {other.path} paths ran different serving specs "
                f"({first.path} ≠ {other.path}), so a difference in their figures would not be the "
                "orchestration's:\n  "
                + "\n  ".join(diff)
                + "\nRun both from one plan with one engine and image (docs/comparison.md#same-spec)."
            )


def compare_paths(
    results: Sequence[PathResult],
    *,
    plan: PlacementPlan | None = None,
    fleet: Inventory | None = None,
    catalog: GpuCatalog | None = None,
    fragmentation: FragmentationFn | None = None,
    weights: Mapping[str, float] | None = None,
    assessed: Mapping[str, Mapping[str, float]] | None = None,
    penalty_usd_per_breach: float = 0.0,
    engineering_weeks: float = 0.0,
    rate_usd_per_week: float = 0.0,
    saved_usd_per_quarter: float | None = None,
    adopt: str = "",
    required_paths: Sequence[str] = PATHS,
    repeats: Mapping[str, Sequence[PathResult]] | None = None,
    resamples: int = RESAMPLES,
) -> Comparison:
    """Compare the orchestration paths' results: metrics, weighted score, sensitivity and ROI.

    ``required_paths`` must all be present (the native and the Kubeflow path by default); the ROI is
    computed when ``engineering_weeks`` or ``saved_usd_per_quarter`` is given, for adopting ``adopt``
    (default: the winner) instead of the other path.

    When every path has its per-request records, every scored figure gets a bootstrap interval
    (:mod:`gpuplace.compare.noise`) and the verdict names a winner only beyond the noise; ``repeats``
    (path → more runs of the same workload, records included) are pooled with the first run and
    resampled run by run.
    """
    _check_inputs(results, required_paths, penalty_usd_per_breach)
    metrics = tuple(
        path_metrics(
            r,
            plan=plan,
            fleet=fleet,
            catalog=catalog,
            fragmentation=fragmentation,
            penalty_usd_per_breach=penalty_usd_per_breach,
        )
        for r in results
    )
    metrics, replicates, runs, each_run = _resampled(
        results, metrics, repeats or {}, penalty_usd_per_breach, resamples
    )
    started = {
        r.path: [x.report.started_at_s for x in (r, *(repeats or {}).get(r.path, ()))] for r in results
    }
    card = score(
        metrics,
        weights if weights is not None else DEFAULT_WEIGHTS,
        assessed,
        replicates=replicates,
        runs=runs,
        run_figures=each_run,
        run_slots=run_slots(started),
    )
    roi_view = None
    if engineering_weeks > 0 or saved_usd_per_quarter is not None:
        roi_view = _adoption_roi(
            metrics,
            [r.path for r in results],
            adopt=adopt,
            winner=card.winner,
            engineering_weeks=engineering_weeks,
            rate_usd_per_week=rate_usd_per_week,
            saved_usd_per_quarter=saved_usd_per_quarter,
        )
    return Comparison(
        paths=metrics,
        score=card,
        roi=roi_view,
        plan=plan,
        penalty_usd_per_breach=penalty_usd_per_breach,
        slo=results[0].report.slo,
        assessed={k: dict(v) for k, v in (assessed or {}).items()},
        notes=_report_notes(results, metrics, replicates is not None),
    )


def _check_inputs(
    results: Sequence[PathResult], required_paths: Sequence[str], penalty_usd_per_breach: float
) -> None:
    """Raise unless the paths are distinct, complete and of one serving spec, and the penalty is valid."""
    names = [r.path for r in results]
    if len(set(names)) != len(names):
        raise InvalidInput("paths", names, "a path appears twice", "Give each path's results once")
    missing = [p for p in required_paths if p not in names]
    if missing:
        raise InvalidInput(
            "paths",
            names,
            f"no results for the {' and '.join(missing)} path",
            "Give each path's deployment record and load-test report (docs/comparison.md#inputs)",
        )
    check_same_serving(results)
    if not (penalty_usd_per_breach >= 0 and math.isfinite(penalty_usd_per_breach)):
        raise InvalidInput(
            "penalty_usd_per_breach", penalty_usd_per_breach, "must be a non-negative number", ""
        )


def _adoption_roi(
    metrics: Sequence[PathMetrics],
    names: Sequence[str],
    *,
    adopt: str,
    winner: str,
    engineering_weeks: float,
    rate_usd_per_week: float,
    saved_usd_per_quarter: float | None,
) -> Roi:
    """The ROI of adopting ``adopt`` (default: the winner, else the last path) instead of the other path."""
    chosen = adopt or winner or names[-1]
    if chosen not in names:
        raise UnknownName("adopt", chosen, names)
    by_name = {m.path: m for m in metrics}
    baseline = next(n for n in names if n != chosen)
    return roi(
        by_name[chosen],
        by_name[baseline],
        engineering_weeks=engineering_weeks,
        rate_usd_per_week=rate_usd_per_week,
        saved_usd_per_quarter=saved_usd_per_quarter,
    )


def _report_notes(
    results: Sequence[PathResult], metrics: Sequence[PathMetrics], has_intervals: bool
) -> tuple[str, ...]:
    """The report's caveats: synthetic inputs, a local serving target on both sides, no intervals."""
    # inputs that say they are made up (the sample of docs/comparison.md) make the whole report say so
    synthetic = sorted({n for r in results for n in r.deployment.notes if "synthetic" in n.lower()})
    notes = []
    if synthetic:
        notes.append(f"Synthetic inputs ({'; '.join(synthetic)}): no figure here was measured.")
    targets = {m.serving_target for m in metrics}
    if targets == {"local"}:
        notes.append(
            "Both paths used the local serving target (one inference process on this machine): the "
            "latency and provisioning figures compare the orchestration code paths, not a GPU cluster."
        )
    if not has_intervals:
        notes.append(
            "No per-request records for every path: the figures carry no interval and the verdict does "
            "not say whether it is beyond the noise (give each path's load-test folder)."
        )
    return tuple(notes)


def _resampled(
    results: Sequence[PathResult],
    metrics: tuple[PathMetrics, ...],
    repeats: Mapping[str, Sequence[PathResult]],
    penalty_usd_per_breach: float,
    resamples: int,
) -> tuple[
    tuple[PathMetrics, ...],
    dict[str, list[dict[str, float]]] | None,
    dict[str, int],
    dict[str, list[dict[str, float]]] | None,
]:
    """Each path's figures pooled over its runs, their bootstrap replicates, the runs per path, and each
    run's own figures (None without records)."""
    for path, more in repeats.items():
        if path not in {r.path for r in results}:
            raise UnknownName("repeats", path, [r.path for r in results])
        if any(not r.records for r in more):
            raise InvalidInput(
                f"{path}_repeat",
                len(more),
                "a repeated run has no per-request records",
                "Give its load-test folder",
            )
    if not all(r.records for r in results):
        return metrics, None, {}, None
    out, replicates, runs, each_run = [], {}, {}, {}
    for r, m in zip(results, metrics, strict=True):
        measured = [
            MeasuredRun(x.report, x.records, provisioning_s(x.deployment))
            for x in (r, *repeats.get(r.path, ()))
        ]
        point, replicates[r.path] = path_replicates(
            m, measured, penalty_usd_per_breach=penalty_usd_per_breach, resamples=resamples
        )
        runs[r.path] = len(measured)
        each_run[r.path] = run_figures(m, measured, penalty_usd_per_breach=penalty_usd_per_breach)
        out.append(pooled(m, measured, point) if len(measured) > 1 else m)
    return tuple(out), replicates, runs, each_run
