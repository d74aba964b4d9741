"""The ``kserve-llmisvc`` form: a KServe ``LLMInferenceService`` (serving.kserve.io/v1alpha2, KServe 0.20).

The plan's model (``spec.model``: ``hf://`` URI of what vLLM loads, the served name), replicas,
``parallelism.tensor``, and a pod template whose ``main`` container is the same vLLM server with the
same engine arguments, resources and placement (planned-node affinity, spread, tolerations) as the
Deployment form, so the prediction holds for what KServe runs. The model is loaded by vLLM itself, as in
the other forms (``storageInitializer.enabled: false``). A replica that spans nodes gets ``spec.worker``
(KServe runs it through LeaderWorkerSet) with the LWS form's worker pod. ``router`` (on unless
``EmitOptions.router`` is off) asks KServe for its managed Gateway route and scheduler: an InferencePool
with the endpoint picker in front of the replicas. Pure functions.
"""

from __future__ import annotations

from typing import Any

from gpuplace.manifests.builders import ServingOptions, _meta, _pod_spec
from gpuplace.manifests.lws import nodes_per_replica, worker_pod_spec
from gpuplace.types import Inventory
from gpuplace.types.plan import PlacementPlan

LLMISVC_API = "serving.kserve.io/v1alpha2"
MAIN = "main"  # the container KServe's config merges into


def model_uri(source: str) -> str:
    """KServe's model URI of what vLLM loads: as given when it has a scheme, else a Hugging Face id."""
    return source if "://" in source else f"hf://{source}"


def _main(pod: dict[str, Any]) -> dict[str, Any]:
    pod["containers"][0]["name"] = MAIN
    return pod


def llm_inference_service(
    plan: PlacementPlan, inventory: Inventory, options: ServingOptions, *, router: bool = True
) -> dict[str, Any]:
    serving = plan.serving
    source = serving.model_source if serving else (options.model_path or plan.model)
    served = serving.served_model_name if serving else (options.served_model_name or plan.model)
    size = nodes_per_replica(plan)
    spec: dict[str, Any] = {
        "model": {"uri": model_uri(source), "name": served},
        "replicas": plan.replicas,
        "parallelism": {"tensor": plan.chosen.tp},
        "storageInitializer": {"enabled": False},
    }
    if size > 1:
        spec["template"] = _main(worker_pod_spec(plan, inventory, options, rank="0"))
        spec["worker"] = _main(worker_pod_spec(plan, inventory, options, rank="$(LWS_WORKER_INDEX)"))
    else:
        spec["template"] = _main(_pod_spec(plan, inventory, options))
    if router:
        spec["router"] = {"gateway": {}, "route": {}, "scheduler": {}}
    meta = _meta(plan, plan.deployment_name)
    meta["annotations"] = {"gpuplace.io/shape": plan.chosen.label}
    return {"apiVersion": LLMISVC_API, "kind": "LLMInferenceService", "metadata": meta, "spec": spec}
