"""The plan directory: the one module that writes and reads what ``gpuplace plan`` hands to later steps.

Layout (docs/placement.md#the-plan-directory)::

    <dir>/plan.json            the PlacementPlan: model, SLO, traffic, prediction, serving spec, placements
    <dir>/manifests/*.yaml     applied in file-name order (multi-document YAML, no Namespace objects)
    <dir>/alternatives/*.yaml  the plan's other forms, one file each (``<form>.yaml``: DRA, KServe,
                               LLMInferenceService, llm-d, Kueue, LeaderWorkerSet), not applied by default
    <dir>/kfp/*.json           kfp-kubernetes placement JSON (also inside plan.json under "kfp")
    <dir>/candidates.md        every shape considered, with its verdict

Every step that needs the plan (deploy, load test, comparison, tracking, the main job) calls
:func:`read_plan_dir` once, in :mod:`gpuplace.steps`, and passes the typed :class:`PlanDir` on; nothing
else opens ``plan.json``. A plan is
given as its directory or as the ``plan.json`` inside it (the one place that rule is coded). Everything
is checked here, before any step acts, so a bad plan fails naming the file and field, and nothing is
half-applied. ``plan.json`` is written last and atomically: a directory without it is not a plan.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpuplace.errors import InvalidInput
from gpuplace.types.plan import PlacementPlan
from gpuplace.types.serving import ServingSpec

PLAN_FILE = "plan.json"
MANIFESTS_DIR = "manifests"
ALTERNATIVES_DIR = "alternatives"
KFP_DIR = "kfp"
CANDIDATES_FILE = "candidates.md"
MANIFESTS_FORM = "manifests"  # the form written to manifests/; every other form is alternatives/<form>.yaml
WORKLOAD_KINDS = frozenset({"Deployment"})  # kinds whose pods a deploy waits for and records
_REGENERATE = "Regenerate it with `gpuplace plan --out DIR` and pass DIR"

Manifests = Mapping[str, Sequence[Mapping[str, Any]]]  # file name → objects


@dataclass(frozen=True, slots=True)
class PlanDir:
    """A plan directory, read and checked: the typed plan, its manifests in apply order, the KFP JSON."""

    path: Path
    plan: PlacementPlan
    manifests: tuple[Mapping[str, Any], ...]
    kfp: Mapping[str, Any]
    forms: tuple[str, ...] = ()  # the forms ``gpuplace plan --emit`` wrote ("" for plans before --emit)

    def alternative(self, form: str) -> tuple[Mapping[str, Any], ...]:
        """The objects of form ``form`` (``alternatives/<form>.yaml``), checked like the manifests."""
        if form == MANIFESTS_FORM:  # one file per object, in manifests/
            raise InvalidInput(
                "form", form, "is the plan's own manifests, not an alternative", "Read PlanDir.manifests"
            )
        path = self.form_path(form)
        if not path.is_file():
            raise InvalidInput(
                "form", form, f"was not emitted ({path} missing)", f"Re-plan with --emit {form}"
            )
        return _load_file(path)

    @property
    def plan_file(self) -> Path:
        """The ``plan.json`` file (to keep as an artifact: read the plan from :attr:`plan`)."""
        return self.path / PLAN_FILE

    @property
    def manifests_dir(self) -> Path:
        """The ``manifests/`` folder (to keep as artifacts: read them from :attr:`manifests`)."""
        return self.path / MANIFESTS_DIR

    @property
    def kfp_dir(self) -> Path:
        return self.path / KFP_DIR

    @property
    def candidates_file(self) -> Path:
        return self.path / CANDIDATES_FILE

    def form_path(self, form: str) -> Path:
        """Where form ``form`` is written: the ``manifests/`` folder, or ``alternatives/<form>.yaml``."""
        return self.manifests_dir if form == MANIFESTS_FORM else self.path / ALTERNATIVES_DIR / f"{form}.yaml"

    @property
    def serving(self) -> ServingSpec:
        assert self.plan.serving is not None  # read_plan_dir refuses a plan without one
        return self.plan.serving

    def workloads(self) -> list[Mapping[str, Any]]:
        return [m for m in self.manifests if m.get("kind") in WORKLOAD_KINDS]


def to_yaml(objects: Sequence[Mapping[str, Any]]) -> str:
    """A multi-document YAML stream, keys in the order built (kubectl-style)."""
    return "".join("---\n" + yaml.safe_dump(dict(o), sort_keys=False) for o in objects)


def write_plan_dir(
    out: str | Path,
    plan: PlacementPlan,
    *,
    manifests: Manifests,
    alternatives: Manifests,
    kfp: Mapping[str, Any],
    candidates_md: str,
    forms: Sequence[str] = (),
) -> PlanDir:
    """Write the plan directory; ``plan.json`` last, by atomic rename, so a reader never sees half."""
    if plan.serving is None:
        raise InvalidInput("plan.serving", None, "a plan is written with its serving spec", "")
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    for sub, files in ((MANIFESTS_DIR, manifests), (ALTERNATIVES_DIR, alternatives)):
        folder = root / sub
        for stale in folder.glob("*.yaml"):
            stale.unlink()
        if files:
            folder.mkdir(exist_ok=True)
        for name, objects in files.items():
            (folder / name).write_text(to_yaml(objects))
    (root / KFP_DIR).mkdir(exist_ok=True)
    for key, value in kfp.items():
        (root / KFP_DIR / f"{key}.json").write_text(json.dumps(value, indent=2) + "\n")
    (root / CANDIDATES_FILE).write_text(candidates_md)
    data = plan.to_json_dict() | {"kfp": dict(kfp)}
    if forms:
        data["emit"] = list(forms)
    tmp = root / (PLAN_FILE + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, allow_nan=False) + "\n")
    os.replace(tmp, root / PLAN_FILE)
    ordered = tuple(o for name in sorted(manifests) for o in manifests[name])
    return PlanDir(root, plan, ordered, dict(kfp), tuple(forms))


def plan_root(path: str | Path, field: str = "plan") -> Path:
    """The plan directory of ``path``: the directory itself, or the folder of a ``plan.json``."""
    p = Path(path)
    if p.is_file() and p.name == PLAN_FILE:
        return p.parent
    if not p.is_dir():
        raise InvalidInput(field, str(path), "no such directory", _REGENERATE)
    if not (p / PLAN_FILE).is_file():
        raise InvalidInput(field, str(path), f"has no {PLAN_FILE}", _REGENERATE)
    return p


def read_plan_dir(path: str | Path, *, field: str = "plan") -> PlanDir:
    """Read and check a plan directory (or its ``plan.json``); :class:`InvalidInput` names the problem."""
    root = plan_root(path, field)
    plan_file = root / PLAN_FILE
    try:
        data = json.loads(plan_file.read_text())
    except ValueError as e:
        raise InvalidInput(str(plan_file), "", f"is not valid JSON ({e})", _REGENERATE) from None
    if not isinstance(data, Mapping):
        raise InvalidInput(str(plan_file), type(data).__name__, "must be a JSON object", _REGENERATE)
    for key in ("plan_id", "deployment_name", "model", "slo", "chosen", "placements"):
        if key not in data:
            raise InvalidInput(f"{plan_file}:{key}", None, "is missing", _REGENERATE)
    try:
        plan = PlacementPlan.from_json_dict(data)
    except InvalidInput:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise InvalidInput(
            str(plan_file), "", f"is not a gpuplace plan ({type(e).__name__}: {e})", _REGENERATE
        ) from None
    if plan.serving is None:
        raise InvalidInput(f"{plan_file}:serving", None, "is missing", _REGENERATE)
    kfp = data.get("kfp") or {}
    if not isinstance(kfp, Mapping):
        raise InvalidInput(f"{plan_file}:kfp", kfp, "must be an object", _REGENERATE)
    forms = data.get("emit") or []
    if not isinstance(forms, list) or not all(isinstance(f, str) for f in forms):
        raise InvalidInput(f"{plan_file}:emit", forms, "must be a list of form names", _REGENERATE)
    # A plan of this machine (its engine runs here: the local target starts a process) has manifests only
    # for a cluster node named like this machine (the testenv's real node), and plans written before had
    # none; a plan emitted without the manifests form has none (its deploy refuses it, naming --emit).
    local = plan.is_local and not any((root / MANIFESTS_DIR).glob("*.yaml"))
    skipped = bool(forms) and MANIFESTS_FORM not in forms
    manifests = () if local or skipped else load_manifests(root / MANIFESTS_DIR)
    return PlanDir(root, plan, manifests, dict(kfp), tuple(forms))


def load_manifests(directory: Path) -> tuple[Mapping[str, Any], ...]:
    """The objects of ``directory/*.yaml`` in file-name order, each checked to be applicable."""
    files = sorted(list(directory.glob("*.yaml")) + list(directory.glob("*.yml")))
    if not files:
        raise InvalidInput(MANIFESTS_DIR, str(directory), "no *.yaml files", _REGENERATE)
    return tuple(doc for f in files for doc in _load_file(f))


def _load_file(f: Path) -> tuple[Mapping[str, Any], ...]:
    try:
        loaded = list(yaml.safe_load_all(f.read_text()))
    except yaml.YAMLError as e:
        raise InvalidInput(str(f), f.name, f"not valid YAML ({e})", _REGENERATE) from e
    return tuple(
        _check_manifest(doc, f"{f.name}[{i}]") for i, doc in enumerate(d for d in loaded if d is not None)
    )


def _check_manifest(doc: object, where: str) -> Mapping[str, Any]:
    if not isinstance(doc, Mapping):
        raise InvalidInput(where, doc, "a manifest must be a mapping", _REGENERATE)
    for key in ("apiVersion", "kind"):
        if not isinstance(doc.get(key), str) or not doc.get(key):
            raise InvalidInput(f"{where}.{key}", doc.get(key), "missing", _REGENERATE)
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else meta
    if not isinstance(name, str) or not name:
        raise InvalidInput(f"{where}.metadata.name", name, "missing", _REGENERATE)
    if doc["kind"] == "Namespace":
        raise InvalidInput(
            f"{where}.kind",
            "Namespace",
            "plans are namespaced and may not create namespaces",
            "Pass --namespace",
        )
    return doc
