"""Kubernetes specs rendered from a plan: pure builders, no I/O and no kubernetes client.

:func:`build_manifests` gives every form of the plan that ``EmitOptions.forms`` asks for
(:mod:`gpuplace.manifests.forms`): the objects to apply (Deployment, Service, PodDisruptionBudget, in that
file order) and the alternatives (DRA claims, KServe InferenceService and LLMInferenceService, llm-d's
InferencePool, Kueue, LeaderWorkerSet); :func:`kfp_fragments` gives the node affinity, tolerations and
node selector JSON that kfp-kubernetes applies to a KFP task at run time. One module per form.
"""

from gpuplace.manifests.builders import (
    VLLM_IMAGE,
    ManifestSet,
    ServingOptions,
    kfp_fragments,
    serving_spec,
)
from gpuplace.manifests.forms import DEFAULT_EMIT, FORMS, EmitOptions, build_manifests

__all__ = [
    "DEFAULT_EMIT",
    "FORMS",
    "VLLM_IMAGE",
    "EmitOptions",
    "ManifestSet",
    "ServingOptions",
    "build_manifests",
    "kfp_fragments",
    "serving_spec",
]
