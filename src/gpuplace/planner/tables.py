"""The plan as tables for people: every candidate shape with its prediction, cost, fit and verdict.

Written to ``candidates.md`` in the plan directory, printed by ``gpuplace plan`` and shown by the
``plan_placement`` component. Milliseconds here (an edge), seconds everywhere else.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from typing import Any

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
            f"| {c.label} | {c.interconnect} | {ms(p.tpot.p99 if p else None, 2, '—')} "
            f"| {ms(p.ttft.p99 if p else None, 2, '—')} "
            f"| {c.cost_usd_per_month:,.0f} | {fit} | {c.verdict} | {c.reason} |"
        )
    if plan.tradeoff:
        rows += ["", "| option | shape | p99 TPOT ms | $/month | meets SLO |", "|---|---|---:|---:|---|"]
    for t in plan.tradeoff:
        rows.append(
            f"| {t['kind']} | {t['shape']} | {ms(t['tpot_p99_s'], 2, '—')} "
            f"| {t['cost_usd_per_month']:,.0f} | {t['meets_slo']} |"
        )
    return "\n".join(rows) + "\n"


def fragmentation_effect_text(plan: PlacementPlan) -> str:
    """What the fragmentation criterion changed in a plan, as ``gpuplace plan`` prints it."""
    fw = plan.fragmentation_workload
    if not fw:
        return ""  # a plan of this machine: no fleet to fragment
    effect = fw.get("effect") or {}
    lines = [
        f"fragmentation measured against: {fw.get('source', '?')} "
        f"({len(fw.get('classes') or ())} task classes)"
    ]
    with_ = [_held(r) for r in effect.get("with_fragmentation") or ()]
    without = [_held(r) for r in effect.get("without_fragmentation") or ()]
    same = sorted(map(str, effect.get("with_fragmentation") or ())) == sorted(
        map(str, effect.get("without_fragmentation") or ())
    )
    lines.append(f"  with FGD:    {' '.join(with_)}")
    lines.append(f"  without FGD: {' '.join(without) or effect.get('without_fragmentation_note', '')}")
    after_without = effect.get("usable_gpus_after_without")
    lines.append(
        f"  GPUs usable by that workload: {effect.get('usable_gpus_before', 0):.2f} before, "
        f"{effect.get('usable_gpus_after_with', 0):.2f} after with FGD, "
        + (f"{after_without:.2f} without" if after_without is not None else "— without")
        + (" (same placement)" if same else "")
    )
    return "\n".join(lines)


def _held(row: Mapping[str, Any]) -> str:
    """``node:GPUs`` of one replica, ``+``-joined when its GPUs (``<node>/gpu<i>``) span nodes."""
    counts = Counter(g.split("/", 1)[0] if "/" in g else row["node"] for g in row["gpu_ids"])
    return "+".join(f"{n}:{c}" for n, c in counts.items()) or f"{row['node']}:0"
