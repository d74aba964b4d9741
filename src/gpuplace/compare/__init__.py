"""The native-vs-Kubeflow comparison: per-path metrics, the weighted score, its sensitivity, and ROI.

:func:`compare_paths` is a pure function of the two paths' deployment records and load-test
reports, the plan and the fleet (the FGD fragmentation function is passed in); :mod:`.inputs` reads
those records from files with clear errors, and :mod:`.step` runs the comparison step end to end.
docs/comparison.md defines every metric, each criterion's normalisation, and the ROI arithmetic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from gpuplace.catalog import GpuCatalog
from gpuplace.compare.metrics import FragmentationFn, PathResult, path_metrics
from gpuplace.compare.roi import roi
from gpuplace.compare.score import CRITERIA, DEFAULT_WEIGHTS, parse_assessed, parse_weights, score
from gpuplace.errors import InvalidInput, UnknownName
from gpuplace.types import Inventory
from gpuplace.types.compare import PATHS, Comparison
from gpuplace.types.plan import PlacementPlan

__all__ = [
    "CRITERIA",
    "DEFAULT_WEIGHTS",
    "PATHS",
    "FragmentationFn",
    "PathResult",
    "compare_paths",
    "parse_assessed",
    "parse_weights",
]


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
) -> Comparison:
    """Compare the orchestration paths' results: metrics, weighted score, sensitivity and ROI.

    ``required_paths`` must all be present (the native and the Kubeflow path by default); the ROI is
    computed when ``engineering_weeks`` or ``saved_usd_per_quarter`` is given, for adopting ``adopt``
    (default: the winner) instead of the other path.
    """
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
    if not (penalty_usd_per_breach >= 0 and math.isfinite(penalty_usd_per_breach)):
        raise InvalidInput(
            "penalty_usd_per_breach", penalty_usd_per_breach, "must be a non-negative number", ""
        )
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
    card = score(metrics, weights if weights is not None else DEFAULT_WEIGHTS, assessed)
    roi_view = None
    if engineering_weeks > 0 or saved_usd_per_quarter is not None:
        chosen = adopt or card.winner or names[-1]
        if chosen not in names:
            raise UnknownName("adopt", chosen, names)
        by_name = {m.path: m for m in metrics}
        baseline = next(n for n in names if n != chosen)
        roi_view = roi(
            by_name[chosen],
            by_name[baseline],
            engineering_weeks=engineering_weeks,
            rate_usd_per_week=rate_usd_per_week,
            saved_usd_per_quarter=saved_usd_per_quarter,
        )
    slo = results[0].report.slo.to_json_dict()
    notes = []
    targets = {m.serving_target for m in metrics}
    if targets == {"local"}:
        notes.append(
            "Both paths used the local serving target (one inference process on this machine): the "
            "latency and provisioning figures compare the orchestration code paths, not a GPU cluster."
        )
    return Comparison(
        paths=metrics,
        score=card,
        roi=roi_view,
        plan=plan,
        penalty_usd_per_breach=penalty_usd_per_breach,
        slo={k: (math.nan if v is None else float(v)) for k, v in slo.items()},
        assessed={k: dict(v) for k, v in (assessed or {}).items()},
        notes=tuple(notes),
    )
