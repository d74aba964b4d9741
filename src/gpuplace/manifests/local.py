"""The serving spec of a plan for this machine (``--inventory local``): ``transformers serve
--continuous-batching`` with the engine parameters the prediction assumed; the KFP placement of its task;
and the objects that serve it on a cluster node named like this machine (the testenv's real node), in the
CPU serving image. Pure; no I/O: the local target starts a process, a cluster runs these objects.

In the container, the model is built from its preset's architecture config with random weights and a
locally trained tokenizer (:func:`gpuplace.catalog.modeldir.build_model_dir`, no downloads) into an
``emptyDir``, then ``transformers serve`` loads it: so the container's start includes the build, as the
local engine's does. The container's ``args`` are exactly the serving spec's engine arguments, so a spec
read back from the pod equals the plan's.
"""

from __future__ import annotations

import shlex
from typing import Any

from gpuplace.errors import InvalidInput
from gpuplace.labels import GPU_RESOURCE
from gpuplace.manifests.builders import PORT, _labels, _selector, node_affinity, service
from gpuplace.types.engines import LOCAL_ENGINE
from gpuplace.types.plan import PlacementPlan
from gpuplace.types.serving import ServingSpec

MODEL_DIR = "/cache/model"  # where the container builds the model: the `model` field requests carry
TORCH_THREADS = "1"  # the local engine's share of this machine's cores (deploy.local.LOCAL_TORCH_THREADS)


def local_serving_spec(plan: PlacementPlan, image: str = "") -> ServingSpec:
    """One local server of ``plan.model`` with the plan's engine parameters
    (``EngineParams.to_transformers_serve_args``: continuous batching, block size, pinned KV-cache
    blocks, token budget); on this machine's GPU when the plan is for one, else its CPU. With ``image``,
    the spec a node of a cluster runs (:func:`node_manifests`): that image, on the server's port."""
    if plan.engine is None:
        raise InvalidInput(
            "plan.engine", None, "the plan has no engine parameters to serve with", "Plan it again"
        )
    on_gpu = plan.chosen.unit != "cpu"
    return ServingSpec(
        engine=LOCAL_ENGINE.name,
        image=image,
        model=plan.model,
        model_source=plan.model,
        served_model_name=plan.model,
        args=tuple(plan.engine.to_transformers_serve_args()),
        gpu_resource=GPU_RESOURCE if on_gpu else "",
        gpus_per_replica=1 if on_gpu else 0,
        replicas=1,
        port=PORT if image else 0,
        engine_params=plan.engine,
    )


def local_kfp_fragments(plan: PlacementPlan) -> dict[str, Any]:
    """KFP placement for a plan of this machine: on the node named like it (the testenv's real node, where
    the task pod runs); one GPU when the plan is for this machine's GPU. The local runner ignores it."""
    on_gpu = plan.chosen.unit != "cpu"
    return {
        "node_affinity": node_affinity(plan) if plan.nodes else {},
        "tolerations": [],
        "node_selector": {},
        "accelerator_type": GPU_RESOURCE if on_gpu else "",
        "accelerator_count": "1" if on_gpu else "0",
    }


def serve_script(model: str) -> str:
    """The container's shell: build ``model`` into :data:`MODEL_DIR`, then exec ``transformers serve``
    with the container's args (the engine's) after its own host, port and device."""
    build = (
        "import sys; from pathlib import Path; from gpuplace.catalog.modeldir import build_model_dir; "
        "build_model_dir(sys.argv[1], Path(sys.argv[2]))"
    )
    return (
        f"python -c {shlex.quote(build)} {shlex.quote(model)} {MODEL_DIR} && exec transformers serve "
        f'{MODEL_DIR} --host 0.0.0.0 --port {PORT} --device cpu --log-level warning "$@"'
    )


def server_container(serving: ServingSpec) -> dict[str, Any]:
    """The serving container of a local plan on a cluster node (also the Kubeflow path's task container on
    the testenv, :mod:`gpuplace.k8s.kfp_task`)."""
    probe = {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 1, "timeoutSeconds": 2}
    return {
        "name": "server",
        "image": serving.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/sh", "-c", serve_script(serving.model), "gpuplace-serve"],
        "args": list(serving.args),
        "ports": [{"name": "http", "containerPort": serving.port, "protocol": "TCP"}],
        "env": [
            {"name": "HOME", "value": "/cache"},
            {"name": "HF_HOME", "value": "/cache/huggingface"},
            {"name": "HF_HUB_OFFLINE", "value": "1"},
            {"name": "TRANSFORMERS_OFFLINE", "value": "1"},
            {"name": "OMP_NUM_THREADS", "value": TORCH_THREADS},
        ],
        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
        # the model is built and loaded before /health answers: up to 10 minutes on a busy 2-core machine
        "startupProbe": probe | {"failureThreshold": 600},
        "readinessProbe": probe | {"failureThreshold": 3},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "runAsNonRoot": True,
            "runAsUser": 10001,
            "runAsGroup": 10001,
            "capabilities": {"drop": ["ALL"]},
        },
        "volumeMounts": [{"name": "cache", "mountPath": "/cache"}, {"name": "tmp", "mountPath": "/tmp"}],
    }


SERVER_VOLUMES = ({"name": "cache", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}})


def node_manifests(plan: PlacementPlan) -> dict[str, tuple[dict[str, Any], ...]]:
    """A Deployment (one replica, pinned to the plan's node, in the spec's image) and its Service, by file
    name as the plan directory holds them."""
    serving = plan.serving
    if serving is None or not serving.image:
        raise InvalidInput("plan.serving.image", "", "a cluster node runs the plan in an image", "")
    labels = _labels(plan)
    pod = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 5,
        "affinity": {"nodeAffinity": node_affinity(plan)},
        "containers": [server_container(serving)],
        "volumes": [dict(v) for v in SERVER_VOLUMES],
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": plan.deployment_name, "labels": labels},
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": _selector(plan)},
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }
    return {"10-deployment.yaml": (deployment,), "20-service.yaml": (service(plan),)}


def serving_task_pod(pod: dict[str, Any], serving: ServingSpec) -> dict[str, Any]:
    """The Kubeflow path's task pod (as KFP's driver built it) serving ``serving`` in its main container.

    Stands in for the component that a KFP run would start there through KFP's launcher: that component
    (``serve_and_load_test``, backend ``kfp``) runs the plan's serving spec in its own pod; here the pod runs
    that spec's container directly (the launcher's image cannot be had here, and the vLLM component image
    cannot serve on a CPU). Placement, labels, the downward-API env and the resources stay the driver's."""
    spec = dict(pod["spec"])
    main = next(c for c in spec["containers"] if c.get("name") == "main")
    server = server_container(serving)
    container = {
        **server,
        "name": "main",
        "env": [*(main.get("env") or ()), *server["env"]],
        "resources": main.get("resources") or server["resources"],
    }
    spec["containers"] = [container if c is main else c for c in spec["containers"]]
    spec.pop("initContainers", None)
    taken = {v["name"] for v in spec.get("volumes") or ()}
    added = [dict(v) for v in SERVER_VOLUMES if v["name"] not in taken]
    spec["volumes"] = [*(spec.get("volumes") or ()), *added]
    return {**pod, "spec": spec}
