"""A plan directory as the deploy step reads it: ``plan.json`` plus ``manifests/*.yaml``.

The planner writes ``<dir>/plan.json`` (``plan_id``, ``deployment_name``, ``model``, ``replicas``,
``placements: [{"replica", "node", "gpu_ids"}]``, ...) and ``<dir>/manifests/*.yaml`` (multi-document
YAML, applied in file-name order, no Namespace objects). Everything is checked here, before any API
call, so a bad plan fails with the file and field named and nothing applied.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpuplace.errors import InvalidInput

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
PLAN_LABEL = "gpuplace.io/plan-id"
RUN_LABEL = "gpuplace.io/run-id"
REPLICA_LABEL = "gpuplace.io/replica"
MANAGER = "gpuplace"
# Kinds whose pods the deploy step waits for and records.
WORKLOAD_KINDS = frozenset({"Deployment"})


@dataclass(frozen=True, slots=True)
class PlannedReplica:
    replica: int
    node: str
    gpu_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PlanBundle:
    path: Path
    plan_id: str
    deployment_name: str
    model: str
    replicas: int
    placements: tuple[PlannedReplica, ...]
    manifests: tuple[Mapping[str, Any], ...]  # in apply order

    def workloads(self) -> list[Mapping[str, Any]]:
        return [m for m in self.manifests if m.get("kind") in WORKLOAD_KINDS]

    def planned_gpus(self) -> int:
        return sum(len(p.gpu_ids) for p in self.placements)


def _fail(field: str, value: object, problem: str, fix: str = "") -> InvalidInput:
    return InvalidInput(
        field, value, problem, fix or "Regenerate the plan with `gpuplace plan` (docs/deploy.md)"
    )


def _check_manifest(doc: object, where: str) -> Mapping[str, Any]:
    if not isinstance(doc, Mapping):
        raise _fail(where, doc, "a manifest must be a mapping")
    for key in ("apiVersion", "kind"):
        if not isinstance(doc.get(key), str) or not doc.get(key):
            raise _fail(f"{where}.{key}", doc.get(key), "missing")
    meta = doc.get("metadata")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str) or not meta.get("name"):
        raise _fail(
            f"{where}.metadata.name",
            (meta or {}).get("name") if isinstance(meta, Mapping) else meta,
            "missing",
        )
    if doc["kind"] == "Namespace":
        raise _fail(
            f"{where}.kind",
            "Namespace",
            "plans are namespaced and may not create namespaces",
            "Pass --namespace instead",
        )
    return doc


def load_manifests(directory: Path) -> tuple[Mapping[str, Any], ...]:
    files = sorted(list(directory.glob("*.yaml")) + list(directory.glob("*.yml")))
    if not files:
        raise _fail("manifests", str(directory), "no *.yaml files")
    docs: list[Mapping[str, Any]] = []
    for f in files:
        try:
            loaded = list(yaml.safe_load_all(f.read_text()))
        except yaml.YAMLError as e:
            raise _fail(str(f), f.name, f"not valid YAML ({e})") from e
        for i, doc in enumerate(d for d in loaded if d is not None):
            docs.append(_check_manifest(doc, f"{f.name}[{i}]"))
    return tuple(docs)


def load_plan_dir(path: str | Path) -> PlanBundle:
    """Read and check a plan directory; raises :class:`InvalidInput` naming the first problem."""
    root = Path(path)
    plan_file = root / "plan.json"
    if not root.is_dir():
        raise _fail(
            "plan_dir", str(root), "not a directory", "Pass the directory `gpuplace plan --out DIR` wrote"
        )
    if not plan_file.is_file():
        raise _fail(
            "plan_dir", str(root), "has no plan.json", "Pass the directory `gpuplace plan --out DIR` wrote"
        )
    try:
        plan = json.loads(plan_file.read_text())
    except ValueError as e:
        raise _fail(str(plan_file), "", f"not valid JSON ({e})") from e
    if not isinstance(plan, Mapping):
        raise _fail(str(plan_file), type(plan).__name__, "must be a JSON object")
    for key in ("plan_id", "deployment_name"):
        if not isinstance(plan.get(key), str) or not plan[key]:
            raise _fail(f"plan.json:{key}", plan.get(key), "missing or not a string")
    placements = []
    for i, p in enumerate(plan.get("placements") or []):
        if not isinstance(p, Mapping) or not isinstance(p.get("node"), str):
            raise _fail(f"plan.json:placements[{i}]", p, "needs a node name")
        placements.append(
            PlannedReplica(
                replica=int(p.get("replica", i)),
                node=str(p["node"]),
                gpu_ids=tuple(str(g) for g in p.get("gpu_ids") or ()),
            )
        )
    manifests = load_manifests(root / "manifests")
    return PlanBundle(
        path=root,
        plan_id=str(plan["plan_id"]),
        deployment_name=str(plan["deployment_name"]),
        model=str(plan.get("model", "")),
        replicas=int(plan.get("replicas", len(placements))),
        placements=tuple(placements),
        manifests=manifests,
    )


def labelled(obj: Mapping[str, Any], plan_id: str, run_id: str = "") -> dict[str, Any]:
    """``obj`` with the labels tying it to its plan and pipeline run (pod templates get the plan's)."""
    out: dict[str, Any] = json.loads(json.dumps(obj))  # deep copy of plain YAML data
    tie = {MANAGED_BY_LABEL: MANAGER, PLAN_LABEL: plan_id}
    meta = out.setdefault("metadata", {})
    meta.pop("namespace", None)
    meta["labels"] = {**(meta.get("labels") or {}), **tie, **({RUN_LABEL: run_id} if run_id else {})}
    template = (out.get("spec") or {}).get("template")
    if out.get("kind") in WORKLOAD_KINDS and isinstance(template, dict):
        # Not the run id: a new pipeline run of an unchanged plan must not roll the pods.
        tmeta = template.setdefault("metadata", {})
        tmeta["labels"] = {**(tmeta.get("labels") or {}), **tie}
    return out
