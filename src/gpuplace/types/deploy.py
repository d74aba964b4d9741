"""The record of a deployment, shared by every target (``kubernetes`` and ``local``) and both paths.

The deploy step writes it as ``deployment.json``; the load tester reads its ``endpoint``; the
comparison reads the pods' provisioning times, where they landed and the serving spec that ran. Times
are epoch seconds (``time.time()``), NaN when a pod never reached that state.

Every field of a :class:`PodRecord` is read back from the thing it names (the API, the server, the local
clock) except those called ``planned_*``, which are the plan's and are there only to compare against.
GPU ids are measured only where the API names devices (DRA claim allocations); with the device plugin
the record says "node level" and carries none. Beside each GPU id the record keeps the allocation as the
API said it (:class:`DraDevice`: driver, pool, device), so the mapping to the inventory's id can be checked.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from gpuplace.types.serving import ServingSpec
from gpuplace.types.stats import Distribution

DEVICE_LEVEL = "device"  # GPU devices read from DRA claim allocations
NODE_LEVEL = "node"  # GPUs through the device plugin: the API says which node, not which devices
NO_GPU = "none"  # no GPU asked for (the local target on a CPU), or not scheduled
_TIMES = ("created_at_s", "scheduled_at_s", "ready_at_s", "serving_at_s", "running_at_s", "image_at_s")


@dataclass(frozen=True, slots=True)
class DraDevice:
    """One device of a ResourceClaim's allocation as the API names it, and the inventory GPU it maps to."""

    driver: str  # e.g. gpu.nvidia.com
    pool: str  # the ResourceSlice pool, e.g. h100-a-0
    device: str  # the driver's device name in that pool, e.g. gpu-0
    gpu_id: str = ""  # the inventory's id (h100-a-0/gpu0); "" when the slice's attributes do not say
    claim: str = ""  # the ResourceClaim
    request: str = ""  # the claim's request the device was allocated for


@dataclass(frozen=True, slots=True)
class PodRecord:
    """One serving replica: where it landed, where the plan wanted it, and when it got there."""

    name: str
    node: str = ""  # spec.nodeName; "" while unscheduled
    planned_node: str = ""  # the plan's; "" when the plan named none (e.g. the local target)
    phase: str = ""
    created_at_s: float = math.nan
    scheduled_at_s: float = math.nan
    ready_at_s: float = math.nan  # the Ready condition (on the local target: /health answered)
    serving_at_s: float = math.nan  # ready to serve: the first successful request
    gpu_ids: tuple[str, ...] = ()  # measured: inventory ids of the devices DRA allocated; () otherwise
    planned_gpu_ids: tuple[str, ...] = ()  # the plan's GPU set for this replica, for comparison only
    dra_devices: tuple[DraDevice, ...] = ()  # measured: the claims' allocations, each with its gpu_id
    placement_level: str = ""  # DEVICE_LEVEL | NODE_LEVEL | NO_GPU; "" when not read back
    gpu_resource: str = ""  # what the pod took its GPUs as: nvidia.com/gpu, nvidia.com/mig-<p>, a DRA class
    gpu_count: int = 0  # devices of gpu_resource the pod holds (DRA: allocated devices)
    endpoint: str = ""  # where this replica answered its first successful request
    timing: str = ""  # "watch" (local clock, sub-second), "api" (1 s timestamps), "process" (local target)
    mismatches: tuple[str, ...] = ()  # how the measured placement differs from the plan's
    running_at_s: float = math.nan  # phase Running (watch): the container started, or KWOK said so
    image_at_s: float = math.nan  # the kubelet's Pulled event (1 s resolution); NaN where no kubelet ran
    runtime: str = ""  # what ran this pod's server: containerd/runc, the KWOK stand-in, a local process

    @property
    def provisioning_s(self) -> float:
        """Created → ready to serve (the first successful request); NaN when that was not observed."""
        return self.serving_at_s - self.created_at_s

    @property
    def ready_s(self) -> float:
        """Created → Ready (the condition, not a request)."""
        return self.ready_at_s - self.created_at_s

    @property
    def scheduling_s(self) -> float:
        return self.scheduled_at_s - self.created_at_s

    @property
    def image_s(self) -> float:
        """Scheduled → the image is on the node (the Pulled event, 1 s resolution, so 0 when it rounds
        below the scheduling); NaN where no kubelet ran the pod."""
        took = self.image_at_s - self.scheduled_at_s
        return took if math.isnan(took) else max(0.0, took)

    @property
    def container_start_s(self) -> float:
        """The image on the node (else scheduled) → Running: sandbox, network and the container's start."""
        image = self.image_at_s
        since = self.scheduled_at_s if math.isnan(image) else max(image, self.scheduled_at_s)
        return self.running_at_s - since

    @property
    def server_start_s(self) -> float:
        """Running → ready to serve: the server builds and loads the model and answers its first request."""
        return self.serving_at_s - self.running_at_s

    @property
    def misplaced(self) -> bool:
        return bool(self.mismatches) or (
            bool(self.planned_node) and bool(self.node) and self.node != self.planned_node
        )


@dataclass(frozen=True, slots=True)
class DeploymentRecord:
    """What the deploy step did, for either target and either orchestration path."""

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
    serving: ServingSpec | None = None  # the serving spec that ran (docs/comparison.md#same-spec)
    path: str = ""  # "native" | "kubeflow" | "" (a plain deploy)
    gpu_api: str = ""  # "dra" | "device-plugin" | "" (no GPUs through Kubernetes)
    runtime: str = ""  # what ran the server: "kubelet", "local stand-in (KWOK)", "local process"
    served_on: str = ""  # the device that served the requests (catalog unit), "" when not known

    def provisioning(self) -> Distribution:
        """Per-pod created → ready to serve, over the pods where that was observed."""
        return Distribution.of(p.provisioning_s for p in self.pods if not math.isnan(p.provisioning_s))

    def mismatches(self) -> tuple[str, ...]:
        out: list[str] = []
        for p in self.pods:
            if p.mismatches:
                out.extend(p.mismatches)
            elif p.misplaced:
                out.append(f"pod {p.name} on {p.node}, planned {p.planned_node}")
        return tuple(out)

    @property
    def placement_level(self) -> str:
        """The coarsest level any pod's placement is known at ("" without pods)."""
        levels = {p.placement_level for p in self.pods}
        for level in ("", NODE_LEVEL, NO_GPU, DEVICE_LEVEL):
            if level in levels:
                return level
        return ""

    def to_json_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["pods"] = [
            {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(p).items()}
            for p in self.pods
        ]
        data["notes"] = list(self.notes)
        data["serving"] = self.serving.to_json_dict() if self.serving is not None else None
        return data

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> DeploymentRecord:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        pods = []
        for p in known.get("pods") or ():
            fields = {k: v for k, v in p.items() if k in PodRecord.__dataclass_fields__}
            for t in _TIMES:
                fields[t] = math.nan if fields.get(t) is None else float(fields[t])
            for t in ("gpu_ids", "planned_gpu_ids", "mismatches"):
                fields[t] = tuple(fields.get(t) or ())
            fields["dra_devices"] = tuple(DraDevice(**d) for d in fields.get("dra_devices") or ())
            pods.append(PodRecord(**fields))
        known["pods"] = tuple(pods)
        known["notes"] = tuple(known.get("notes") or ())
        serving = known.get("serving")
        known["serving"] = ServingSpec.from_json_dict(serving) if serving else None
        return cls(**known)
