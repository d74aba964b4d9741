"""The record of a deployment, shared by every target (``kubernetes`` and ``local``).

The deploy step writes it as ``deployment.json``; the load tester reads its ``endpoint``; the
comparison reads the pods' provisioning times. Times are epoch seconds (``time.time()``), NaN when a
pod never reached that state.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from gpuplace.types.stats import Distribution


@dataclass(frozen=True, slots=True)
class PodRecord:
    """One serving replica: where it landed, where the plan wanted it, and when it got there."""

    name: str
    node: str = ""  # "" while unscheduled
    planned_node: str = ""  # "" when the plan named no node (e.g. the local target)
    phase: str = ""
    created_at_s: float = math.nan
    scheduled_at_s: float = math.nan
    ready_at_s: float = math.nan
    gpu_ids: tuple[str, ...] = ()

    @property
    def provisioning_s(self) -> float:
        """created → ready; NaN if not ready."""
        return self.ready_at_s - self.created_at_s

    @property
    def scheduling_s(self) -> float:
        return self.scheduled_at_s - self.created_at_s

    @property
    def misplaced(self) -> bool:
        return bool(self.planned_node) and bool(self.node) and self.node != self.planned_node


@dataclass(frozen=True, slots=True)
class DeploymentRecord:
    """What the deploy step did, for either target."""

    target: str  # "kubernetes" or "local"
    name: str
    namespace: str
    endpoint: str  # base URL of the OpenAI-compatible API, e.g. http://127.0.0.1:8000
    model: str
    ready: bool
    pods: tuple[PodRecord, ...] = ()
    created_at: str = ""  # ISO 8601
    plan_id: str = ""
    pid: int | None = None  # local target: the server process
    served_model_name: str = ""  # the `model` field requests must carry
    notes: tuple[str, ...] = ()

    def provisioning(self) -> Distribution:
        return Distribution.of(p.provisioning_s for p in self.pods if not math.isnan(p.provisioning_s))

    def mismatches(self) -> tuple[str, ...]:
        return tuple(f"{p.name}: on {p.node}, planned {p.planned_node}" for p in self.pods if p.misplaced)

    def to_json_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["pods"] = [
            {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(p).items()}
            for p in self.pods
        ]
        data["notes"] = list(self.notes)
        return data

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> DeploymentRecord:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        pods = []
        for p in known.get("pods") or ():
            fields = {k: v for k, v in p.items() if k in PodRecord.__dataclass_fields__}
            for t in ("created_at_s", "scheduled_at_s", "ready_at_s"):
                fields[t] = math.nan if fields.get(t) is None else float(fields[t])
            fields["gpu_ids"] = tuple(fields.get("gpu_ids") or ())
            pods.append(PodRecord(**fields))
        known["pods"] = tuple(pods)
        known["notes"] = tuple(known.get("notes") or ())
        return cls(**known)
