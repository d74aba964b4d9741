"""The ROI view: engineering cost of adopting a placement mechanism against SLA penalties avoided.

Build cost = engineering weeks × rate per week; the saving is either given (``saved_usd_per_quarter``)
or the difference of the two paths' expected SLA-breach cost over a quarter. The multiple is saving per
quarter ÷ build cost ($15k to build, $120k saved per quarter → 8×) and the payback is in weeks.
"""

from __future__ import annotations

import math

from gpuplace.errors import InvalidInput
from gpuplace.types.compare import PathMetrics, Roi
from gpuplace.units import MONTHS_PER_QUARTER


def roi(
    adopt: PathMetrics,
    baseline: PathMetrics,
    *,
    engineering_weeks: float,
    rate_usd_per_week: float,
    saved_usd_per_quarter: float | None = None,
) -> Roi:
    """ROI of adopting ``adopt`` instead of staying on ``baseline``."""
    for name, value in (("engineering_weeks", engineering_weeks), ("rate_usd_per_week", rate_usd_per_week)):
        if not (value >= 0 and math.isfinite(value)):
            raise InvalidInput(name, value, "must be a non-negative number", "e.g. 3 weeks at 5000 USD/week")
    if saved_usd_per_quarter is not None:
        if not math.isfinite(saved_usd_per_quarter):
            raise InvalidInput("saved_usd_per_quarter", saved_usd_per_quarter, "must be a finite number", "")
        saved, source = saved_usd_per_quarter, "given"
    else:
        diff = baseline.sla_breach_cost_usd_per_month - adopt.sla_breach_cost_usd_per_month
        saved = diff * MONTHS_PER_QUARTER if math.isfinite(diff) else math.nan
        source = "breach cost difference"
    return Roi(
        adopt=adopt.path,
        baseline=baseline.path,
        engineering_weeks=engineering_weeks,
        rate_usd_per_week=rate_usd_per_week,
        saved_usd_per_quarter=saved,
        saved_source=source,
    )
