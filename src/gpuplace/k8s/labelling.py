"""gpuplace's labels on the objects a plan creates: what ties an object to its plan and pipeline run, and
the selector of a plan's pods."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from gpuplace.labels import MANAGED_BY, MANAGER, PLAN_LABEL, RUN_LABEL
from gpuplace.plandir import WORKLOAD_KINDS


def pod_selector(plan_id: str) -> str:
    return f"{PLAN_LABEL}={plan_id}"


def labelled(obj: Mapping[str, Any], plan_id: str, run_id: str = "") -> dict[str, Any]:
    """``obj`` with the labels tying it to its plan and pipeline run (pod templates get the plan's)."""
    out: dict[str, Any] = json.loads(json.dumps(obj))  # deep copy of plain YAML data
    tie = {MANAGED_BY: MANAGER, PLAN_LABEL: plan_id}
    meta = out.setdefault("metadata", {})
    meta.pop("namespace", None)
    meta["labels"] = {**(meta.get("labels") or {}), **tie, **({RUN_LABEL: run_id} if run_id else {})}
    template = (out.get("spec") or {}).get("template")
    if out.get("kind") in WORKLOAD_KINDS and isinstance(template, dict):
        # Not the run id: a new pipeline run of an unchanged plan must not roll the pods.
        tmeta = template.setdefault("metadata", {})
        tmeta["labels"] = {**(tmeta.get("labels") or {}), **tie}
    return out
