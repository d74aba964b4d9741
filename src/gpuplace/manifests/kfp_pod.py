"""The Pod of one task of a compiled KFP pipeline, as KFP's v2 backend would create it: the Kubeflow path's
pod, built here so the same kube-scheduler that places the native path's pods can place it.

What is real, read from the KFP backend source (``backend/src/v2/driver`` and
``backend/src/v2/compiler/argocompiler/container.go``, as of the 2.x releases whose driver runs before the
task's pod and hands Argo a pod-spec patch):

- the **pod-spec patch** the container driver computes (``initPodSpecPatch`` + ``extendPodSpecPatch``):
  a container ``main`` whose command is the launcher (``/kfp-launcher/launch ... --``) and whose args are
  the component's command and args; the image, CPU/memory requests and limits, and the accelerator as a
  *limit* named by ``resourceType`` with ``resourceCount`` (each may be the placeholder
  ``{{$.inputs.parameters['pipelinechannel--…']}}``, resolved like ``resolvePodSpecInputRuntimeParameter``:
  only a *string* value resolves; a number resolves to "" and the driver then sets no accelerator at
  all, which :attr:`KfpTaskPod.warnings` says); from the kubernetes platform config, ``nodeSelector``
  (labels or ``nodeSelectorJson``), ``tolerations`` (fields or ``tolerationJson``, one object or a list,
  all *replacing* the pod's), ``nodeAffinity`` (terms or ``nodeAffinityJson``: required terms ORed,
  preferred terms appended), ``imagePullPolicy``, ``activeDeadlineSeconds``, ``emptyDirMounts``,
  ``fieldPathAsEnv``, pod labels and annotations;
- the executor template the patch is merged into (Argo's strategic merge): the ``kfp-launcher`` init
  container and its resources, the ``kfp-launcher`` and scratch ``emptyDir`` volumes, ``KFP_POD_NAME`` and
  ``KFP_POD_UID`` from the downward API, ``envFrom`` the optional ``metadata-grpc-configmap``.

What stands in for the KFP backend, which cannot run here: the run's inputs (``arguments``, and
``task_outputs`` for what upstream tasks produced — in a real run the driver reads them from ML Metadata);
the execution id (``0``) and a reduced executor input (parameter values only); the pod's name and Argo's
labels; Argo's own ``init``/``wait`` containers (they request no GPU). Platform features outside the list
above (secrets, config maps, PVCs) raise :class:`~gpuplace.errors.InvalidInput` rather than being dropped.
Pure functions over plain YAML data.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuplace.errors import InvalidInput
from gpuplace.manifests.kfp_package import CHANNEL, Resolver, defaults, find_task, load_package

LAUNCHER_IMAGE = "ghcr.io/kubeflow/kfp-launcher:2.17.0"
LAUNCHER_PATH = "/kfp-launcher/launch"
LAUNCHER_VOLUME = "kfp-launcher"
SCRATCH = (
    ("gcs-scratch", "/gcs"),
    ("s3-scratch", "/s3"),
    ("minio-scratch", "/minio"),
    ("dot-local-scratch", "/.local"),
    ("dot-cache-scratch", "/.cache"),
    ("dot-config-scratch", "/.config"),
)
SUPPORTED_PLATFORM_KEYS = frozenset(
    {
        "nodeSelector",
        "tolerations",
        "nodeAffinity",
        "imagePullPolicy",
        "activeDeadlineSeconds",
        "emptyDirMounts",
        "fieldPathAsEnv",
        "podMetadata",
    }
)


@dataclass(frozen=True, slots=True)
class KfpTaskPod:
    """A task's Pod, the pod-spec patch KFP's driver would compute for it, and what the driver resolved."""

    pod: dict[str, Any]
    pod_spec_patch: dict[str, Any]
    parameters: Mapping[str, Any]  # the task's input parameters as the executor input carries them
    warnings: tuple[str, ...] = field(default=())


def _pod_spec_value(text: str, parameters: Mapping[str, Any], what: str, warnings: list[str]) -> str:
    """``resolvePodSpecInputRuntimeParameter``: a channel resolves to its *string* value only."""
    m = CHANNEL.match(text or "")
    if not m:
        return text
    if m.group(1) not in parameters:
        raise InvalidInput(what, text, "names an input the task does not have")
    value = parameters[m.group(1)]
    if not isinstance(value, str):
        warnings.append(
            f"{what} {text} resolved to a {type(value).__name__} ({value!r}); KFP's driver reads only "
            'string values here and gets "": make that output a str'
        )
        return ""
    return value


def _json_value(value: Any, what: str) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value) if value.strip() else None
        except ValueError as e:
            raise InvalidInput(what, value[:80], f"is not JSON ({e})") from e
    return copy.deepcopy(value)


def _resources(
    container: Mapping[str, Any], parameters: Mapping[str, Any], warnings: list[str]
) -> dict[str, Any]:
    res = container.get("resources") or {}
    limits: dict[str, str] = {}
    requests: dict[str, str] = {}
    for new, old, unit, target, key in (
        ("resourceMemoryLimit", "memoryLimit", "G", limits, "memory"),
        ("resourceMemoryRequest", "memoryRequest", "G", requests, "memory"),
        ("resourceCpuLimit", "cpuLimit", "", limits, "cpu"),
        ("resourceCpuRequest", "cpuRequest", "", requests, "cpu"),
    ):
        if res.get(new):
            target[key] = _pod_spec_value(str(res[new]), parameters, f"resources.{new}", warnings)
        elif res.get(old):
            target[key] = f"{res[old]:g}{unit}" if isinstance(res[old], float) else f"{res[old]}{unit}"
    accelerator = res.get("accelerator") or {}
    kind = ""
    if accelerator.get("resourceType"):
        kind = _pod_spec_value(
            str(accelerator["resourceType"]), parameters, "accelerator.resourceType", warnings
        )
    elif accelerator.get("type"):
        kind = str(accelerator["type"])
    count = ""
    if accelerator.get("resourceCount"):
        count = _pod_spec_value(
            str(accelerator["resourceCount"]), parameters, "accelerator.resourceCount", warnings
        )
    elif accelerator.get("count") and int(str(accelerator["count"])) > 0:
        count = str(accelerator["count"])
    if kind and count:
        limits[kind] = count
    elif accelerator:
        warnings.append(
            "the task asks for an accelerator but its type or count resolved empty: no GPU is requested"
        )
    out: dict[str, Any] = {}
    if limits:
        out["limits"] = {k: v for k, v in limits.items() if v}
    if requests:
        out["requests"] = {k: v for k, v in requests.items() if v}
    return out


def _node_affinity(
    terms: Sequence[Mapping[str, Any]], resolve: Callable[[Mapping[str, Any], str], Any], warnings: list[str]
) -> dict[str, Any]:
    """The pod's nodeAffinity from the config's terms (required ones ORed, preferred appended), or {}."""
    required: list[dict[str, Any]] = []
    preferred: list[dict[str, Any]] = []
    for i, term in enumerate(terms):
        if "nodeAffinityJson" in term:
            value = resolve(term["nodeAffinityJson"], "nodeAffinityJson")
            if not value:
                continue
            required += list(
                ((value.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms"))
                or ()
            )
            preferred += list(value.get("preferredDuringSchedulingIgnoredDuringExecution") or ())
        elif term.get("matchExpressions") or term.get("matchFields"):
            selector_term = {
                k: [
                    {
                        "key": e.get("key"),
                        "operator": e.get("operator"),
                        **({"values": e["values"]} if e.get("values") else {}),
                    }
                    for e in term.get(k) or ()
                ]
                for k in ("matchExpressions", "matchFields")
                if term.get(k)
            }
            if term.get("weight") is not None:
                preferred.append({"weight": term["weight"], "preference": selector_term})
            else:
                required.append(selector_term)
        else:
            warnings.append(f"nodeAffinity term {i} is empty and skipped, as the driver does")
    affinity: dict[str, Any] = {}
    if required:
        affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": required}
    if preferred:
        affinity["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    return affinity


def _platform_patch(
    config: Mapping[str, Any], resolver: Resolver, scope: Mapping[str, Any], warnings: list[str]
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(pod-spec fields, main-container fields, pod metadata) from the task's kubernetes executor config."""
    unsupported = sorted(set(config) - SUPPORTED_PLATFORM_KEYS)
    if unsupported:
        raise InvalidInput(
            "kubernetes platform config",
            unsupported,
            "is not modelled by this stand-in for KFP's driver",
            "Extend gpuplace.manifests.kfp_pod or drop it from the task",
        )
    spec: dict[str, Any] = {}
    main: dict[str, Any] = {}

    def resolve(param: Mapping[str, Any], what: str) -> Any:
        return _json_value(resolver.value(param, scope, what), what)

    selector = config.get("nodeSelector")
    if selector is not None:
        if "nodeSelectorJson" in selector:
            value = resolve(selector["nodeSelectorJson"], "nodeSelectorJson")
            if value is not None:
                spec["nodeSelector"] = dict(value)
        else:
            spec["nodeSelector"] = dict(selector.get("labels") or {})
    if "tolerations" in config:
        tolerations: list[dict[str, Any]] = []
        for t in config.get("tolerations") or ():
            if "tolerationJson" in t:
                value = resolve(t["tolerationJson"], "tolerationJson")
                if isinstance(value, list):
                    tolerations += [dict(v) for v in value]
                elif isinstance(value, dict) and value:
                    tolerations.append(dict(value))
            else:
                tolerations.append(
                    {k: t[k] for k in ("key", "operator", "value", "effect", "tolerationSeconds") if t.get(k)}
                )
        spec["tolerations"] = tolerations
    affinity = _node_affinity(config.get("nodeAffinity") or (), resolve, warnings)
    if affinity:
        spec["affinity"] = {"nodeAffinity": affinity}
    if config.get("imagePullPolicy"):
        policy = config["imagePullPolicy"]
        if policy not in ("Always", "Never", "IfNotPresent"):
            raise InvalidInput("imagePullPolicy", policy, "must be Always, Never or IfNotPresent")
        main["imagePullPolicy"] = policy
    if int(config.get("activeDeadlineSeconds") or 0) > 0:
        spec["activeDeadlineSeconds"] = int(config["activeDeadlineSeconds"])
    for mount in config.get("emptyDirMounts") or ():
        empty: dict[str, Any] = {}
        if mount.get("medium"):
            empty["medium"] = mount["medium"]
        if mount.get("sizeLimit"):
            empty["sizeLimit"] = mount["sizeLimit"]
        spec.setdefault("volumes", []).append({"name": mount["volumeName"], "emptyDir": empty})
        main.setdefault("volumeMounts", []).append(
            {"name": mount["volumeName"], "mountPath": mount["mountPath"]}
        )
    for env in config.get("fieldPathAsEnv") or ():
        main.setdefault("env", []).append(
            {"name": env["name"], "valueFrom": {"fieldRef": {"fieldPath": env["fieldPath"]}}}
        )
    meta = dict(config.get("podMetadata") or {})
    return spec, main, meta


def _merge_named(
    base: list[dict[str, Any]], patch: list[dict[str, Any]], key: str = "name"
) -> list[dict[str, Any]]:
    """A strategic merge of two lists merged by ``key`` (env, volumes, volumeMounts, containers)."""
    out = [copy.deepcopy(b) for b in base]
    for item in patch:
        match = next((o for o in out if o.get(key) == item.get(key)), None)
        if match is None:
            out.append(copy.deepcopy(item))
        else:
            match.update(copy.deepcopy(item))
    return out


def _strategic_merge(base: dict[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """Argo's strategic merge of the pod-spec patch into the executor template's pod spec, for the fields
    the patch carries: containers by name (their env and volumeMounts by name, resources by key),
    volumes by name, maps merged, other lists replaced."""
    out = copy.deepcopy(base)
    for key, value in patch.items():
        if key == "containers":
            merged = []
            for c in out.get("containers") or ():
                p = next((x for x in value if x.get("name") == c.get("name")), None)
                if p is None:
                    merged.append(c)
                    continue
                new = dict(c)
                for ck, cv in p.items():
                    if ck in ("env", "volumeMounts"):
                        new[ck] = _merge_named(c.get(ck) or [], cv, "name" if ck == "env" else "mountPath")
                    elif ck == "resources":
                        new[ck] = {**(c.get(ck) or {}), **cv}
                    else:
                        new[ck] = copy.deepcopy(cv)
                merged.append(new)
            merged += [
                copy.deepcopy(x) for x in value if x.get("name") not in {c.get("name") for c in merged}
            ]
            out["containers"] = merged
        elif key == "volumes":
            out["volumes"] = _merge_named(out.get("volumes") or [], value)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **copy.deepcopy(value)}
        else:
            out[key] = copy.deepcopy(value)
    return out


def _executor_template(launcher_image: str) -> dict[str, Any]:
    """The pod spec of Argo's ``system-container-impl`` template before the patch (the stand-in part)."""
    mounts = [{"name": LAUNCHER_VOLUME, "mountPath": "/kfp-launcher"}] + [
        {"name": n, "mountPath": p} for n, p in SCRATCH
    ]
    return {
        "initContainers": [
            {
                "name": "kfp-launcher",
                "image": launcher_image,
                "command": ["launcher-v2"],
                "args": ["--copy", LAUNCHER_PATH],
                "volumeMounts": [{"name": LAUNCHER_VOLUME, "mountPath": "/kfp-launcher"}],
                "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "100m"}},
            }
        ],
        "containers": [
            {
                "name": "main",
                "image": "gcr.io/ml-pipeline/should-be-overridden-during-runtime",
                "command": ["should-be-overridden-during-runtime"],
                "volumeMounts": mounts,
                "envFrom": [{"configMapRef": {"name": "metadata-grpc-configmap", "optional": True}}],
                "env": [
                    {"name": "KFP_POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "KFP_POD_UID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.uid"}}},
                ],
            }
        ],
        "volumes": [{"name": LAUNCHER_VOLUME, "emptyDir": {}}]
        + [{"name": n, "emptyDir": {}} for n, _ in SCRATCH],
        "restartPolicy": "Never",
    }


def _launcher_command(
    pipeline_name: str, run_id: str, parameters: Mapping[str, Any], component: Mapping[str, Any]
) -> list[str]:
    """The main container's command: KFP's launcher, given the task's executor input, then ``--``."""
    executor_input = {
        "inputs": {"parameterValues": parameters},
        "outputs": {"outputFile": "/tmp/kfp_outputs/output_metadata.json"},
    }
    return [
        LAUNCHER_PATH,
        "--pipeline_name",
        pipeline_name,
        "--run_id",
        run_id,
        "--execution_id",
        "0",
        "--executor_input",
        json.dumps(executor_input, separators=(",", ":"), sort_keys=True),
        "--component_spec",
        json.dumps(component, separators=(",", ":"), sort_keys=True),
        "--pod_name",
        "$(KFP_POD_NAME)",
        "--pod_uid",
        "$(KFP_POD_UID)",
        "--mlmd_server_address",
        "$(METADATA_GRPC_SERVICE_HOST)",
        "--mlmd_server_port",
        "$(METADATA_GRPC_SERVICE_PORT)",
        "--",
    ]


def _pod_metadata(
    name: str, task: str, workflow: str, pod_meta: Mapping[str, Any], labels: Mapping[str, str] | None
) -> dict[str, Any]:
    """The pod's metadata: Argo's and KFP's labels and annotations, then the platform config's and ours."""
    return {
        "name": name,
        "labels": {
            "workflows.argoproj.io/workflow": workflow,
            "pipelines.kubeflow.org/v2_component": "true",
            **dict(pod_meta.get("labels") or {}),
            **dict(labels or {}),
        },
        "annotations": {
            "workflows.argoproj.io/node-name": f"{task}.executor",
            "pipelines.kubeflow.org/task_name": task,
            **dict(pod_meta.get("annotations") or {}),
        },
    }


def kfp_task_pod(
    package: Mapping[str, Any] | str | Path,
    task: str,
    *,
    arguments: Mapping[str, Any] | None = None,
    task_outputs: Mapping[str, Mapping[str, Any]] | None = None,
    run_id: str = "00000000-0000-0000-0000-000000000000",
    pod_name: str = "",
    labels: Mapping[str, str] | None = None,
    launcher_image: str = LAUNCHER_IMAGE,
    service_account: str = "",
    platform: Mapping[str, Any] | None = None,
    iteration: int = 0,
) -> KfpTaskPod:
    """The Pod KFP would run for ``task`` of the compiled pipeline ``package`` (a path, or the pipeline
    spec as a mapping with ``platform`` beside it), given the run's ``arguments`` and what upstream tasks
    output (``task_outputs[producer][output]``: e.g. the plan's node affinity, tolerations, node selector,
    accelerator type and count; a loop's items, e.g. ``task_outputs["repeat-runs"]["Output"]``). Inside a
    ParallelFor, ``iteration`` picks the item the task runs for, as the driver gives each iteration one.
    See the module docstring for what is real and what stands in."""
    if isinstance(package, (str, Path)):
        spec, platform_doc = load_package(package)
    else:
        spec, platform_doc = dict(package), dict(platform or {})
    task_spec, chain = find_task(spec, task)
    comp_name = (task_spec.get("componentRef") or {}).get("name", "")
    component = (spec.get("components") or {}).get(comp_name) or {}
    executor_label = component.get("executorLabel", "")
    executor = ((spec.get("deploymentSpec") or {}).get("executors") or {}).get(executor_label) or {}
    container = executor.get("container")
    if not container:
        raise InvalidInput("task", task, "is not a container task (a DAG, an importer or a resolver)")
    resolver = Resolver(spec, arguments or {}, task_outputs or {}, iteration, run_id=run_id)
    scope = resolver.scope_of(chain)
    parameters = {**defaults(component.get("inputDefinitions") or {}), **resolver.inputs(task_spec, scope)}
    warnings: list[str] = []
    image = _pod_spec_value(str(container.get("image", "")), parameters, "image", warnings)
    pipeline_name = str((spec.get("pipelineInfo") or {}).get("name", ""))
    launcher = _launcher_command(pipeline_name, run_id, parameters, component)
    main: dict[str, Any] = {
        "name": "main",
        "command": launcher,
        "args": [*(container.get("command") or ()), *(container.get("args") or ())],
        "image": image,
        "resources": _resources(container, parameters, warnings),
        "env": [{"name": e["name"], "value": str(e.get("value", ""))} for e in container.get("env") or ()],
    }
    k8s_config = (
        ((platform_doc.get("platforms") or {}).get("kubernetes") or {})
        .get("deploymentSpec", {})
        .get("executors", {})
    ).get(executor_label) or {}
    spec_fields, main_fields, pod_meta = _platform_patch(k8s_config, resolver, scope, warnings)
    for k, v in main_fields.items():
        main[k] = [*main.get(k, []), *v] if isinstance(v, list) else v
    patch: dict[str, Any] = {"containers": [main], **spec_fields}
    pod_spec = _strategic_merge(_executor_template(launcher_image), patch)
    if service_account:
        pod_spec["serviceAccountName"] = service_account
    name = pod_name or f"{pipeline_name}-{run_id[:8]}-system-container-impl"[:63].rstrip("-")
    workflow = f"{pipeline_name}-{run_id[:8]}"[:63].rstrip("-")
    metadata = _pod_metadata(name, task, workflow, pod_meta, labels)
    return KfpTaskPod(
        pod={"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec},
        pod_spec_patch=patch,
        parameters=parameters,
        warnings=tuple(warnings),
    )
