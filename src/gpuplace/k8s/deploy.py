"""Deploying a plan to a cluster and taking it down again: the ``kubernetes`` target of the deploy step.

:func:`deploy_plan` labels every object with its plan and pipeline run, dry-runs all of them (so an
object the API server rejects means nothing was applied), server-side applies them in order, and times
each pod with a watch (:class:`~gpuplace.k8s.provisioning.PodTimer`) from its creation to *ready to serve*
(the first successful request, through a :class:`~gpuplace.k8s.runtime.PodRuntime`). Then it reads back
where every pod landed — the node from ``spec.nodeName``, the GPU devices from its DRA claims'
allocations (:mod:`gpuplace.k8s.dra`; with the device plugin, "node level only") — and the serving spec
the pods run, and compares that with the plan. A pod off its planned node or a claim outside the
planned GPU set fails the deploy (:class:`PlacementMismatch`) unless ``allow_misplacement``. When
applying, the rollout or the verification fails it tears down what it applied, or rolls back to what was
there before, or keeps it (``on_failure``), and says which in the error: never half a deployment without
a word. :func:`teardown_plan` deletes what a plan created (404 is success) and waits for its pods to go.

``gpu_api`` says how the pods get their GPUs: ``dra`` claims each replica's planned devices by UUID
(:mod:`gpuplace.manifests.pinned`), ``device-plugin`` applies the plan's manifests (``nvidia.com/gpu``),
``auto`` takes ``dra`` when the DRA driver publishes every planned device, else the device plugin.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gpuplace.errors import CheckFailed, GpuplaceError, InvalidInput
from gpuplace.k8s.api import Api, ref
from gpuplace.k8s.dra import (
    PodPlacement,
    device_mismatches,
    published_gpus,
    read_placements,
)
from gpuplace.k8s.errors import Conflict, Forbidden, KubeError, NotFound
from gpuplace.k8s.provisioning import PodTimer, PodTimes, ProvisioningTimeout
from gpuplace.k8s.retry import Deadline
from gpuplace.k8s.rollout import RolloutTimeout, wait_for_rollout
from gpuplace.k8s.runtime import KubeletRuntime, PodRuntime
from gpuplace.labels import MANAGED_BY, MANAGER, PLAN_LABEL, REPLICA_LABEL, RUN_LABEL
from gpuplace.plandir import WORKLOAD_KINDS, PlanDir
from gpuplace.types import DeploymentRecord, Inventory, PodRecord
from gpuplace.types.deploy import DEVICE_LEVEL, NODE_LEVEL
from gpuplace.types.plan import Placement, PlacementPlan
from gpuplace.types.serving import ServingSpec

ON_FAILURE = ("teardown", "rollback", "keep")
DEFAULT_TIMEOUT_S = 300.0
# Metadata the server owns; stripped before re-applying an object's previous state on rollback.
_SERVER_METADATA = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink")
_SERVER_ANNOTATIONS = (
    "deployment.kubernetes.io/revision",
    "kubectl.kubernetes.io/last-applied-configuration",
)


class DeployFailed(GpuplaceError):
    """Applying or rolling out a plan failed; ``cleanup`` says what was done about the objects applied."""

    def __init__(self, message: str, *, cleanup: str, cause: BaseException) -> None:
        super().__init__(f"{message}\n{cleanup}")
        self.cleanup = cleanup
        self.cause = cause


@dataclass(frozen=True, slots=True)
class TeardownResult:
    deleted: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()  # already gone (404): success too
    pods_left: tuple[str, ...] = field(default=())


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
            if key.startswith(("nvidia.com/gpu", "nvidia.com/mig-")) and str(value).isdigit():
                return key, int(str(value))
    return "", 0


def _device_plugin_name(placement: PodPlacement, plan_spec: ServingSpec, resource: str) -> str:
    """The GPU resource name of what a pod holds, in device-plugin terms, so a claim for one whole GPU and a
    limit of ``nvidia.com/gpu: 1`` compare equal (how the GPU was obtained is the record's ``gpu_api``)."""
    if not placement.devices:
        return resource
    profiles = {d.mig_profile for d in placement.devices}
    if profiles == {""}:
        return "nvidia.com/gpu"
    profile = profiles.pop() if len(profiles) == 1 else ""
    if profile and profile == plan_spec.mig_profile:
        return plan_spec.gpu_resource
    return f"nvidia.com/mig-{profile}" if profile else resource


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
        engine="vllm" if "vllm" in command or not command else plan_spec.engine,
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


@dataclass(frozen=True, slots=True)
class Measured:
    """What a deploy read back about its pods: the records, the spec they run, and notes."""

    pods: tuple[PodRecord, ...]
    serving: ServingSpec
    notes: tuple[str, ...] = field(default=())
    request_model: str = ""  # the `model` requests must carry (the runtime's, or the spec's)


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
                placement_level=placed.level,
                gpu_resource=resource,
                gpu_count=count,
                endpoint=runtime.endpoint_of(obj),
                timing="watch" if t is not None and t.seen_created else "api",
                mismatches=mismatches,
            )
        )
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


GPU_APIS = ("auto", "dra", "device-plugin")


def choose_gpu_api(
    api: Api, plan: PlacementPlan, requested: str, *, deadline: Deadline
) -> tuple[str, dict[str, tuple[str, str]], str]:
    """(the GPU API to deploy with, planned id → (uuid, kind) for DRA, a note on why not DRA)."""
    if requested not in GPU_APIS:
        raise InvalidInput("gpu_api", requested, f"must be one of {', '.join(GPU_APIS)}")
    if requested == "device-plugin":
        return "device-plugin", {}, "GPUs through the device plugin (--gpu-api device-plugin)"
    needed = [g for p in plan.placements for g in p.gpu_ids]
    reason = ""
    if plan.chosen.kind == "shared":
        reason = "a time-sliced share is not claimed through DRA"
    elif not needed:
        reason = "the plan names no GPU devices"
    else:
        try:
            published = published_gpus(api, deadline=deadline)
        except NotFound:
            reason = "the cluster serves no resource.k8s.io/v1"
        except Forbidden:
            reason = "this identity may not list ResourceSlices"
        else:
            missing = [g for g in needed if g not in published]
            if not missing:
                return "dra", {g: (published[g].uuid, published[g].kind) for g in needed}, ""
            reason = f"{len(missing)} planned GPU(s) are not published by the DRA driver, e.g. {missing[0]}"
    if requested == "dra":
        raise InvalidInput("gpu_api", "dra", reason, "Deploy with --gpu-api device-plugin")
    return "device-plugin", {}, f"GPUs through the device plugin: {reason}"


def ensure_namespace(api: Api, namespace: str, *, deadline: Deadline) -> bool:
    """Create ``namespace`` when it does not exist (``--create-namespace``); True when it was created."""
    try:
        api.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}, deadline=deadline
        )
    except Conflict:
        return False
    return True


def _endpoint(plan_dir: PlanDir, namespace: str) -> str:
    for m in plan_dir.manifests:
        if m.get("kind") == "Service":
            ports = (m.get("spec") or {}).get("ports") or [{}]
            port = ports[0].get("port", 80)
            return f"http://{m['metadata']['name']}.{namespace}.svc.cluster.local:{port}"
    return ""


def _restorable(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A previously stored object as an apply configuration that puts it back."""
    meta = dict(obj.get("metadata") or {})
    for k in _SERVER_METADATA:
        meta.pop(k, None)
    meta.pop("namespace", None)
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k not in _SERVER_ANNOTATIONS}
    meta["annotations"] = annotations
    return {k: v for k, v in obj.items() if k not in ("status",)} | {"metadata": meta}


def _expected_pods(objects: Sequence[Mapping[str, Any]]) -> int:
    return sum(
        int((o.get("spec") or {}).get("replicas", 1)) for o in objects if o.get("kind") in WORKLOAD_KINDS
    )


def deploy_plan(
    plan_dir: PlanDir,
    *,
    api: Api,
    namespace: str,
    run_id: str = "",
    timeout_s: float = DEFAULT_TIMEOUT_S,
    on_failure: str = "teardown",
    log: Callable[[str], None] | None = None,
    gpu_api: str = "auto",
    create_namespace: bool = False,
    allow_misplacement: bool = False,
    runtime: PodRuntime | None = None,
    inventory: Inventory | None = None,
    path: str = "",
) -> DeploymentRecord:
    """Apply ``plan_dir``'s manifests to ``namespace``, wait until every pod serves, read back where they
    are and check that against the plan; see the module docstring."""
    if on_failure not in ON_FAILURE:
        raise InvalidInput("on_failure", on_failure, f"must be one of {', '.join(ON_FAILURE)}")
    if timeout_s <= 0:
        raise InvalidInput("timeout_s", timeout_s, "must be positive")
    say = log or (lambda _m: None)
    deadline = Deadline(timeout_s)
    plan = plan_dir.plan
    if create_namespace and ensure_namespace(api, namespace, deadline=deadline):
        say(f"created namespace {namespace}")
    chosen_api, published, api_note = choose_gpu_api(api, plan, gpu_api, deadline=deadline)
    raw: list[Mapping[str, Any]] = list(plan_dir.manifests)
    if chosen_api == "dra":
        from gpuplace.manifests.pinned import pinned_dra_objects

        try:
            raw = list(pinned_dra_objects(plan, plan_dir.manifests, published))
        except InvalidInput as e:
            if gpu_api == "dra":
                raise
            chosen_api, api_note = "device-plugin", f"GPUs through the device plugin: {e.problem}"
    objects = [labelled(m, plan.plan_id, run_id) for m in raw]
    say(f"GPU API: {chosen_api}" + (f" ({api_note})" if api_note and chosen_api != "device-plugin" else ""))
    created_at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")

    try:
        for obj in objects:
            api.apply(obj, namespace, dry_run=True, deadline=deadline)
    except NotFound as e:
        if (e.details or {}).get("kind") == "namespaces":
            raise InvalidInput(
                "namespace",
                namespace,
                "does not exist",
                f"Create it first (kubectl create namespace {namespace}), or pass --create-namespace",
            ) from e
        raise
    say(f"dry run passed for {len(objects)} objects")

    previous = {
        ref(o): api.get_or_none(
            o["apiVersion"], o["kind"], o["metadata"]["name"], namespace, deadline=deadline
        )
        for o in objects
    }
    runtime = runtime or KubeletRuntime(api, plan_dir.serving.served_model_name)
    selector = pod_selector(plan.plan_id)
    applied: list[dict[str, Any]] = []
    timer = PodTimer(api, namespace, label_selector=selector)
    try:
        try:
            timer.start()
            t0 = time.monotonic()
            for obj in objects:
                api.apply(obj, namespace, deadline=deadline)
                applied.append(obj)
                say(f"applied {ref(obj)}")

            def rolled_out() -> None:
                for w in objects:
                    if w.get("kind") in WORKLOAD_KINDS:
                        wait_for_rollout(
                            api,
                            w["metadata"]["name"],
                            namespace,
                            pod_selector=selector,
                            deadline=deadline,
                            on_status=say,
                        )
                what = "serving" if runtime.observes_serving else "ready"
                say(f"{_expected_pods(objects)} pod(s) {what} in {time.monotonic() - t0:.1f} s")

            measured = wait_and_measure(
                api,
                plan_dir,
                namespace,
                timer=timer,
                runtime=runtime,
                count=_expected_pods(objects),
                deadline=deadline,
                inventory=inventory,
                then=rolled_out,
            )
        except (KubeError, RolloutTimeout, ProvisioningTimeout, GpuplaceError) as e:
            runtime.discard()
            cleanup = _clean_up(api, applied, previous, namespace, on_failure, plan.plan_id)
            raise DeployFailed(
                f"deploying plan {plan.plan_id} to namespace {namespace} failed: {e}",
                cleanup=cleanup,
                cause=e,
            ) from e
    finally:
        timer.close()
        runtime.close()

    notes = [n for n in (api_note,) if n] + list(measured.notes)
    endpoint = _endpoint(plan_dir, namespace)
    if runtime.serves_locally:  # the servers are on this machine: the load test drives them, not the Service
        endpoint = next((p.endpoint for p in measured.pods if p.endpoint), endpoint)
        if len(measured.pods) > 1:
            notes.append(
                f"the load test drives one pod's server ({endpoint}); the Service's balancing over "
                f"{len(measured.pods)} pods is not stood in for"
            )
    record = DeploymentRecord(
        target="kubernetes",
        name=plan.deployment_name,
        namespace=namespace,
        endpoint=endpoint,
        model=plan.model,
        ready=True,
        pods=measured.pods,
        created_at=created_at,
        plan_id=plan.plan_id,
        served_model_name=measured.request_model,
        serving=measured.serving,
        path=path,
        gpu_api=chosen_api,
        runtime=runtime.name,
    )
    record = replace(
        record,
        served_on=served_on(plan, measured.pods, runtime),
        notes=tuple(notes + [f"placement mismatch: {m}" for m in record.mismatches()]),
    )
    if record.mismatches() and not allow_misplacement:
        runtime.discard()
        cleanup = _clean_up(api, applied, previous, namespace, on_failure, plan.plan_id)
        raise PlacementMismatch(
            f"plan {plan.plan_id}: pods are not where the plan put them:\n  "
            + "\n  ".join(record.mismatches())
            + "\nPass --allow-misplacement to keep a deployment that differs from its plan.",
            record=replace(record, ready=False),
            cleanup=cleanup,
        )
    return record


def _clean_up(
    api: Api,
    applied: list[dict[str, Any]],
    previous: Mapping[str, dict[str, Any] | None],
    namespace: str,
    on_failure: str,
    plan_id: str,
) -> str:
    if not applied:
        return "Nothing was applied."
    names = ", ".join(ref(o) for o in applied)
    if on_failure == "keep":
        return f"Left in place as asked (on_failure=keep): {names}. Remove with `gpuplace teardown`."
    deadline = Deadline(60.0)
    try:
        if on_failure == "teardown":
            result = teardown_objects(api, applied, namespace, plan_id=plan_id, deadline=deadline)
            return f"Tore down what was applied: {', '.join(result.deleted + result.absent)}."
        restored, deleted = [], []
        for obj in reversed(applied):
            before = previous.get(ref(obj))
            if before is None:
                api.delete(obj, namespace, deadline=deadline)
                deleted.append(ref(obj))
            else:
                api.apply(_restorable(before), namespace, force=True, deadline=deadline)
                restored.append(ref(obj))
        return (
            "Rolled back: "
            + (f"restored {', '.join(restored)}" if restored else "")
            + ("; " if restored and deleted else "")
            + (f"deleted new {', '.join(deleted)}" if deleted else "")
            + "."
        )
    except KubeError as e:
        return (
            f"Clean-up ({on_failure}) FAILED: {e}. Objects that may remain: {names}. Run `gpuplace teardown`."
        )


def teardown_objects(
    api: Api,
    objects: list[dict[str, Any]],
    namespace: str,
    *,
    plan_id: str,
    deadline: Deadline,
    wait: bool = True,
) -> TeardownResult:
    deleted: list[str] = []
    absent: list[str] = []
    for obj in reversed(objects):
        (deleted if api.delete(obj, namespace, deadline=deadline) else absent).append(ref(obj))
    left: list[str] = []
    if wait:
        while True:
            pods = api.list("v1", "Pod", namespace, label_selector=pod_selector(plan_id), deadline=deadline)
            left = [p["metadata"]["name"] for p in pods]
            if not left or deadline.remaining() <= 0.5:
                break
            time.sleep(0.25)
    return TeardownResult(deleted=tuple(deleted), absent=tuple(absent), pods_left=tuple(left))


def teardown_plan(
    plan_dir: PlanDir, *, api: Api, namespace: str, timeout_s: float = 120.0, wait: bool = True
) -> TeardownResult:
    """Delete every object of the plan in reverse apply order (404 is success) — the plan's manifests and
    whatever else a deploy labelled with its plan id (``--gpu-api dra``'s claims and per-replica
    Deployments) — then wait for its pods."""
    plan_id = plan_dir.plan.plan_id
    deadline = Deadline(timeout_s)
    objects = [labelled(m, plan_id) for m in plan_dir.manifests]
    known = {ref(o) for o in objects}
    extra = [
        o
        for o in _labelled_objects(api, namespace, f"{PLAN_LABEL}={plan_id}", deadline)
        if ref(o) not in known
    ]
    return teardown_objects(api, extra + objects, namespace, plan_id=plan_id, deadline=deadline, wait=wait)


# The kinds a deploy creates, in apply order; teardown by label looks for these.
_RUN_KINDS: tuple[tuple[str, str], ...] = (
    ("resource.k8s.io/v1", "ResourceClaim"),
    ("apps/v1", "Deployment"),
    ("v1", "Service"),
    ("policy/v1", "PodDisruptionBudget"),
)
# The Kubeflow path's task pods on a testenv (gpuplace.k8s.kfp_task) carry this label; a run's teardown
# deletes them too (the pods of Deployments go with their Deployment).
KFP_TASK_LABEL = "gpuplace.io/kfp-task-pod"


def _labelled_objects(
    api: Api,
    namespace: str,
    selector: str,
    deadline: Deadline,
    kinds: Sequence[tuple[str, str]] = _RUN_KINDS,
) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    for api_version, kind in kinds:
        try:
            found = api.list(api_version, kind, namespace, label_selector=selector, deadline=deadline)
        except (NotFound, Forbidden):  # no DRA on this cluster, or this identity does not use it
            continue
        objects += [{**obj, "apiVersion": api_version, "kind": kind} for obj in found]
    return objects


def teardown_run(api: Api, *, namespace: str, run_id: str, timeout_s: float = 120.0) -> TeardownResult:
    """Delete every object a deploy labelled with ``run_id`` (a pipeline's exit handler knows the run
    id but cannot read the plan the guarded tasks produced), then wait for their pods."""
    deadline = Deadline(timeout_s)
    objects = _labelled_objects(api, namespace, f"{RUN_LABEL}={run_id}", deadline)
    objects += _labelled_objects(
        api, namespace, f"{RUN_LABEL}={run_id},{KFP_TASK_LABEL}", deadline, [("v1", "Pod")]
    )
    plan_ids = {(o["metadata"].get("labels") or {}).get(PLAN_LABEL, "") for o in objects}
    plan_id = next(iter(plan_ids - {""}), "")
    if not objects:
        return TeardownResult(deleted=(), absent=(), pods_left=())
    return teardown_objects(api, objects, namespace, plan_id=plan_id, deadline=deadline, wait=bool(plan_id))
