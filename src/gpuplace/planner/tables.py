"""The plan as tables for people: every candidate shape with its prediction, cost, fit and verdict.

Written to ``candidates.md`` in the plan directory, printed by ``gpuplace plan`` and shown by the
``plan_placement`` component. Milliseconds here (an edge), seconds everywhere else.
"""

from __future__ import annotations

import math

from gpuplace.types.plan import PlacementPlan
from gpuplace.units import ms


def candidates_table(plan: PlacementPlan) -> str:
    """Markdown: every candidate with predicted p99 latency, cost per month, fit score and verdict."""
    rows = [
        "| shape | interconnect | p99 TPOT ms | p99 TTFT ms | $/month | fit | verdict | reason |",
        "|---|---|---:|---:|---:|---:|---|---|",
    ]
    for c in plan.candidates:
        p = c.prediction
        fit = "" if not math.isfinite(c.fit_score) else f"{c.fit_score:.2f}"
        rows.append(
            f"| {c.label} | {c.interconnect} | {ms(p.tpot_p99_s if p else None, 2, '—')} "
            f"| {ms(p.ttft_p99_s if p else None, 2, '—')} "
            f"| {c.cost_usd_per_month:,.0f} | {fit} | {c.verdict} | {c.reason} |"
        )
    rows += ["", "| option | shape | p99 TPOT ms | $/month | meets SLO |", "|---|---|---:|---:|---|"]
    for t in plan.tradeoff:
        rows.append(
            f"| {t['kind']} | {t['shape']} | {ms(t['tpot_p99_s'], 2, '—')} "
            f"| {t['cost_usd_per_month']:,.0f} | {t['meets_slo']} |"
        )
    return "\n".join(rows) + "\n"
