"""Reading a deployment back from the API: where each pod landed (``spec.nodeName``), which GPU devices
its DRA claims were given (node level only with the device plugin), the serving spec the pods run, and
the pods' provisioning times; then comparing all of it with the plan (:class:`PlacementMismatch`).
Nothing here is copied from the plan: a planned value is labelled planned.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gpuplace.errors import CheckFailed, GpuplaceError
from gpuplace.k8s.api import Api
from gpuplace.k8s.dra import (
    PodPlacement,
    device_mismatches,
    read_placements,
)
from gpuplace.k8s.errors import KubeError
from gpuplace.k8s.provisioning import PodTimer, PodTimes
from gpuplace.k8s.retry import Deadline
from gpuplace.k8s.runtime import PodRuntime
from gpuplace.labels import GPU_RESOURCE, MIG_RESOURCE_PREFIX, REPLICA_LABEL
from gpuplace.plandir import PlanDir
from gpuplace.types import DeploymentRecord, Inventory, PodRecord
from gpuplace.types.deploy import DEVICE_LEVEL, NODE_LEVEL, DraDevice
from gpuplace.types.engines import CLUSTER_ENGINE, engine_of_command
from gpuplace.types.plan import Placement, PlacementPlan
from gpuplace.types.serving import ServingSpec


def pair_with_plan(
    pods: Sequence[Mapping[str, Any]], placements: tuple[Placement, ...]
) -> dict[str, Placement]:
    """The planned placement each pod is checked against: by its ``gpuplace.io/replica`` label, else a
    placement on the pod's own node, else the remaining ones in order (pod name → placement).

    Only ``planned_*`` fields come from the pairing; a pod paired with a placement on another node is a
    mismatch, and nothing planned is ever written where the record says measured.
    """
    by_replica = {p.replica: p for p in placements}
    unused = list(placements)
    paired: dict[str, Placement] = {}
    names = sorted(str(p["metadata"]["name"]) for p in pods)
    objects = {str(p["metadata"]["name"]): p for p in pods}
    for name in names:
        value = ((objects[name].get("metadata") or {}).get("labels") or {}).get(REPLICA_LABEL)
        r = int(value) if value is not None and str(value).isdigit() else None
        if r is not None and r in by_replica and by_replica[r] in unused:
            paired[name] = by_replica[r]
            unused.remove(by_replica[r])
    for name in names:
        node = str((objects[name].get("spec") or {}).get("nodeName") or "")
        if name not in paired and (same := next((p for p in unused if p.node == node), None)):
            paired[name] = same
            unused.remove(same)
    for name in names:
        if name not in paired and unused:
            paired[name] = unused.pop(0)
    return paired


def gpu_taken(placement: PodPlacement, pod: Mapping[str, Any]) -> tuple[str, int]:
    """(resource, count) of the GPUs the pod holds as the API says: a DRA class and the allocated devices,
    or the device-plugin resource in its limits."""
    if placement.devices:
        kinds = {"mig" if d.mig_profile else "gpu" for d in placement.devices}
        return ("mig.nvidia.com" if kinds == {"mig"} else "gpu.nvidia.com"), len(placement.devices)
    for c in (pod.get("spec") or {}).get("containers") or ():
        for key, value in ((c.get("resources") or {}).get("limits") or {}).items():
            if key.startswith((GPU_RESOURCE, MIG_RESOURCE_PREFIX)) and str(value).isdigit():
                return key, int(str(value))
    return "", 0


def _device_plugin_name(placement: PodPlacement, plan_spec: ServingSpec, resource: str) -> str:
    """The GPU resource name of what a pod holds, in device-plugin terms, so a claim for one whole GPU and a
    limit of ``nvidia.com/gpu: 1`` compare equal (how the GPU was obtained is the record's ``gpu_api``)."""
    if not placement.devices:
        return resource
    profiles = {d.mig_profile for d in placement.devices}
    if profiles == {""}:
        return GPU_RESOURCE
    profile = profiles.pop() if len(profiles) == 1 else ""
    if profile and profile == plan_spec.mig_profile:
        return plan_spec.gpu_resource
    return f"{MIG_RESOURCE_PREFIX}{profile}" if profile else resource


def _engine_name(command: str, planned: str) -> str:
    """The engine a pod's container starts, by its command line. A container without a command runs its
    image's entry point, the cluster engine's (vllm/vllm-openai's is ``vllm serve``); a command no
    registered engine starts (gpuplace's serve script) keeps the plan's engine."""
    if not command:
        return CLUSTER_ENGINE.name
    started = engine_of_command(command)
    return started.name if started else planned


def _flag(args: Sequence[str], name: str) -> str:
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return str(args[i + 1])
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return ""


def spec_of_pods(
    plan_spec: ServingSpec,
    pods: Sequence[Mapping[str, Any]],
    placements: Mapping[str, PodPlacement],
) -> ServingSpec:
    """The serving spec the pods run, read back from them: image, arguments, port, the GPUs each holds
    and the replica count; what the API does not show (the engine's model id, a time-sliced share) is the
    plan's. Pods that differ from each other make the first pod's spec, with every pod counted."""
    if not pods:
        raise GpuplaceError("no pods to read a serving spec from")
    first = sorted(pods, key=lambda p: str(p["metadata"]["name"]))[0]
    container = ((first.get("spec") or {}).get("containers") or [{}])[0]
    args = tuple(str(a) for a in container.get("args") or ())
    command = " ".join(str(c) for c in container.get("command") or ())
    placement = placements.get(str(first["metadata"]["name"]))
    resource, count = gpu_taken(placement, first) if placement else ("", 0)
    tp = _flag(args, "--tensor-parallel-size")
    return replace(
        plan_spec,
        engine=_engine_name(command, plan_spec.engine),
        image=str(container.get("image", "")),
        args=args,
        model_source=args[0] if args and not args[0].startswith("-") else plan_spec.model_source,
        served_model_name=_flag(args, "--served-model-name") or plan_spec.served_model_name,
        tensor_parallel=int(tp) if tp.isdigit() else plan_spec.tensor_parallel,
        gpu_resource=_device_plugin_name(placement, plan_spec, resource) if placement else resource,
        gpus_per_replica=count,
        replicas=len(pods),
        port=int((container.get("ports") or [{}])[0].get("containerPort") or plan_spec.port),
    )


SpecReader = Callable[[ServingSpec, Sequence[Mapping[str, Any]], Mapping[str, PodPlacement]], ServingSpec]


def served_on(plan: PlacementPlan, pods: Sequence[PodRecord], runtime: PodRuntime) -> str:
    """The device that answered the requests: the runtime's own (the KWOK stand-in: this machine's), or the
    planned unit when every pod runs on its planned node and, at device level, on its planned GPUs; ""
    when that is not known."""
    own = runtime.served_on()
    if own:
        return own
    if not pods or any(p.misplaced or not p.node or p.node != p.planned_node for p in pods):
        return ""
    return plan.chosen.unit


def image_pulled_at(api: Api, namespace: str, *, deadline: Deadline) -> dict[str, float]:
    """Pod name → when the kubelet said its image was on the node (the ``Pulled`` event, "already present"
    or pulled; the event's own time, 1 s resolution). Pods no kubelet ran (KWOK's) have none."""
    from gpuplace.k8s.rollout import _epoch

    out: dict[str, float] = {}
    try:
        events = api.list("v1", "Event", namespace, field_selector="reason=Pulled", deadline=deadline)
    except KubeError:  # events not readable: the image's time is unknown, nothing else is
        return out
    for e in events:
        pod = str((e.get("involvedObject") or {}).get("name") or "")
        at = _epoch(e.get("eventTime") or e.get("firstTimestamp") or e.get("lastTimestamp"))
        if pod and not math.isnan(at):
            out[pod] = min(out.get(pod, at), at)
    return out


@dataclass(frozen=True, slots=True)
class Measured:
    """What a deploy read back about its pods: the records, the spec they run, and notes."""

    pods: tuple[PodRecord, ...]
    serving: ServingSpec
    notes: tuple[str, ...] = field(default=())
    request_model: str = ""  # the `model` requests must carry (the runtime's, or the spec's)


def _as_allocated(placed: PodPlacement) -> tuple[DraDevice, ...]:
    """The pod's DRA devices as the claims' allocations name them, each beside its inventory id."""
    devices = (DraDevice(d.driver, d.pool, d.device, d.gpu_id, d.claim, d.request) for d in placed.devices)
    return tuple(sorted(devices, key=lambda d: (d.gpu_id, d.driver, d.pool, d.device)))


def _deployment_notes(records: Sequence[PodRecord], plan: PlacementPlan, runtime: PodRuntime) -> list[str]:
    """Notes on all the pods: how their GPUs were read, a pod count other than planned, serving unobserved."""
    notes: list[str] = []
    levels = {r.placement_level for r in records}
    if NODE_LEVEL in levels:
        notes.append(
            "GPUs through the device plugin: the API says which node, not which devices (node level only)"
        )
    if DEVICE_LEVEL in levels:
        notes.append("GPU devices read from the pods' DRA claim allocations")
    if len(records) != len(plan.placements) and plan.placements:
        notes.append(f"plan has {len(plan.placements)} placements, {len(records)} pods run")
    if not runtime.observes_serving:
        notes.append("ready-to-serve was not observed (runtime none): provisioning is unknown")
    return notes


def measure_pods(
    api: Api,
    plan_dir: PlanDir,
    namespace: str,
    *,
    selector: str,
    times: Sequence[PodTimes],
    runtime: PodRuntime,
    deadline: Deadline,
    inventory: Inventory | None = None,
    spec_of: SpecReader | None = None,
) -> Measured:
    """Read back every live pod of ``selector``: node and GPU devices, times, endpoint, mismatches, and
    the serving spec they run (``spec_of``, default :func:`spec_of_pods`)."""
    plan = plan_dir.plan
    objects = [
        p
        for p in api.list("v1", "Pod", namespace, label_selector=selector, deadline=deadline)
        if not (p.get("metadata") or {}).get("deletionTimestamp")
    ]
    placements = {
        p.pod: p
        for p in read_placements(
            api, namespace, label_selector=selector, deadline=deadline, inventory=inventory
        )
    }
    paired = pair_with_plan(objects, plan.placements)
    pulled = image_pulled_at(api, namespace, deadline=deadline)
    by_name = {t.pod: t for t in times}
    records: list[PodRecord] = []
    notes: list[str] = []
    for obj in sorted(objects, key=lambda p: str(p["metadata"]["name"])):
        name = str(obj["metadata"]["name"])
        placed = placements.get(name) or PodPlacement(pod=name, node="", level="")
        planned = paired.get(name)
        t = by_name.get(name)
        resource, count = gpu_taken(placed, obj)
        mismatches = (
            device_mismatches(placed, planned.node, planned.gpu_ids)
            if planned is not None
            else (f"pod {name} has no placement in the plan ({len(plan.placements)} planned)",)
        )
        notes += [n for n in placed.notes if n not in notes and "node level only" not in n]
        records.append(
            PodRecord(
                name=name,
                node=placed.node,
                planned_node=planned.node if planned else "",
                phase=str((obj.get("status") or {}).get("phase") or ""),
                created_at_s=t.created_s if t else math.nan,
                scheduled_at_s=t.scheduled_s if t else math.nan,
                ready_at_s=t.ready_s if t else math.nan,
                serving_at_s=t.serving_s if t else math.nan,
                gpu_ids=placed.gpu_ids,
                planned_gpu_ids=planned.gpu_ids if planned else (),
                dra_devices=_as_allocated(placed),
                placement_level=placed.level,
                gpu_resource=resource,
                gpu_count=count,
                endpoint=runtime.endpoint_of(obj),
                timing="watch" if t is not None and t.seen_created else "api",
                mismatches=mismatches,
                running_at_s=t.running_s if t else math.nan,
                image_at_s=pulled.get(name, math.nan),
                runtime=runtime.runtime_of(obj),
            )
        )
    notes += _deployment_notes(records, plan, runtime)
    spec = (spec_of or spec_of_pods)(plan_dir.serving, objects, placements)
    first = sorted(objects, key=lambda p: str(p["metadata"]["name"]))[:1]
    model = (runtime.model_of(first[0]) if first else "") or spec.served_model_name
    return Measured(tuple(records), spec, tuple(notes), model)


def wait_and_measure(
    api: Api,
    plan_dir: PlanDir,
    namespace: str,
    *,
    timer: PodTimer,
    runtime: PodRuntime,
    count: int,
    deadline: Deadline,
    inventory: Inventory | None = None,
    spec_of: SpecReader | None = None,
    then: Callable[[], None] | None = None,
) -> Measured:
    """Wait until ``count`` of the timer's pods serve (or are Ready, when the runtime does not observe
    serving), run ``then``, and read them back (:func:`measure_pods`)."""
    timer.wait(
        count, deadline=deadline, serve_check=runtime.serve_check if runtime.observes_serving else None
    )
    if then is not None:
        then()
    return measure_pods(
        api,
        plan_dir,
        namespace,
        selector=timer.label_selector,
        times=timer.times(),
        runtime=runtime,
        deadline=Deadline(max(10.0, deadline.remaining())),
        inventory=inventory,
        spec_of=spec_of,
    )


class PlacementMismatch(CheckFailed):
    """The pods run, but not where the plan said; ``record`` is the measured deployment."""

    def __init__(self, message: str, *, record: DeploymentRecord, cleanup: str) -> None:
        super().__init__(f"{message}\n{cleanup}")
        self.record = record
        self.cleanup = cleanup
