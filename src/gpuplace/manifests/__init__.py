"""Kubernetes specs rendered from a plan: pure builders, no I/O and no kubernetes client.

:func:`build_manifests` gives the objects to apply (Deployment, Service, PodDisruptionBudget, in that
file order) and the alternatives (a DRA ``resource.k8s.io/v1`` ResourceClaimTemplate with a Deployment
that claims it, and a KServe InferenceService); :func:`kfp_fragments` gives the node affinity,
tolerations and node selector JSON that kfp-kubernetes applies to a KFP task at run time.
"""

from gpuplace.manifests.builders import (
    VLLM_IMAGE,
    ManifestSet,
    ServingOptions,
    build_manifests,
    kfp_fragments,
    serving_spec,
)

__all__ = ["VLLM_IMAGE", "ManifestSet", "ServingOptions", "build_manifests", "kfp_fragments", "serving_spec"]
