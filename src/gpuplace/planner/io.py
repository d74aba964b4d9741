"""Reading and writing a plan: ``plan.json``, the manifests folders and the candidate table.

The one module of the planner package that touches files. ``write_plan_dir`` lays out
``<dir>/plan.json``, ``<dir>/manifests/*.yaml`` (applied in name order), ``<dir>/alternatives/*.yaml``
(DRA and KServe, not applied by default), ``<dir>/kfp/*.json`` and ``<dir>/candidates.md``.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from gpuplace.errors import InvalidInput
from gpuplace.types import Inventory
from gpuplace.types.plan import PlacementPlan

PLAN_FILE = "plan.json"


def plan_json(plan: PlacementPlan, inventory: Inventory) -> dict[str, Any]:
    from gpuplace.manifests import kfp_fragments

    return plan.to_json_dict() | {"kfp": kfp_fragments(plan, inventory)}


def _ms(value: float | None) -> str:
    return "—" if value is None or not math.isfinite(value) else f"{value * 1000:.2f}"


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
            f"| {c.label} | {c.interconnect} | {_ms(p.tpot_p99_s if p else None)} "
            f"| {_ms(p.ttft_p99_s if p else None)} "
            f"| {c.cost_usd_per_month:,.0f} | {fit} | {c.verdict} | {c.reason} |"
        )
    rows += ["", "| option | shape | p99 TPOT ms | $/month | meets SLO |", "|---|---|---:|---:|---|"]
    for t in plan.tradeoff:
        rows.append(
            f"| {t['kind']} | {t['shape']} | {_ms(t['tpot_p99_s'])} "
            f"| {t['cost_usd_per_month']:,.0f} | {t['meets_slo']} |"
        )
    return "\n".join(rows) + "\n"


def write_plan_dir(plan: PlacementPlan, inventory: Inventory, out: Path, manifests: Any = None) -> Path:
    """Write the plan folder; ``manifests`` is a :class:`~gpuplace.manifests.ManifestSet` (built if None)."""
    from gpuplace.manifests import build_manifests, kfp_fragments, to_yaml

    manifests = manifests or build_manifests(plan, inventory)
    out.mkdir(parents=True, exist_ok=True)
    data = plan_json(plan, inventory)
    for sub, files in (("manifests", manifests.apply), ("alternatives", manifests.alternatives)):
        folder = out / sub
        folder.mkdir(exist_ok=True)
        for stale in folder.glob("*.yaml"):
            stale.unlink()
        for name, objects in files.items():
            (folder / name).write_text(to_yaml(objects))
    kfp = out / "kfp"
    kfp.mkdir(exist_ok=True)
    for key, value in kfp_fragments(plan, inventory).items():
        (kfp / f"{key}.json").write_text(json.dumps(value, indent=2) + "\n")
    (out / "candidates.md").write_text(candidates_table(plan))
    tmp = out / (PLAN_FILE + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, out / PLAN_FILE)
    return out / PLAN_FILE


def load_plan(path: str | os.PathLike[str]) -> PlacementPlan:
    """A plan from a ``plan.json`` or the folder holding one."""
    p = Path(path)
    if p.is_dir():
        p = p / PLAN_FILE
    if not p.is_file():
        raise InvalidInput(
            "plan",
            str(path),
            "no plan.json there",
            "Give the --out folder of `gpuplace plan` or its plan.json",
        )
    try:
        data = json.loads(p.read_text())
        return PlacementPlan.from_json_dict(data)
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise InvalidInput(
            "plan", str(p), f"is not a gpuplace plan ({type(e).__name__}: {e})", "Re-run gpuplace plan"
        ) from None


def load_plan_json(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The raw ``plan.json`` (with the ``kfp`` fragments), for consumers that want the JSON as written."""
    p = Path(path)
    p = p / PLAN_FILE if p.is_dir() else p
    data: dict[str, Any] = json.loads(p.read_text())
    return data
