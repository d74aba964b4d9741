"""The GPU-topology-fit kube-scheduler extender: an HTTP service over the planner's scoring.

kube-scheduler calls ``filter`` (which nodes have a GPU set meeting the pod's topology, MIG and model
requirements), ``prioritize`` (the planner's GPU-fit score and FGD fragmentation increase, as 0–10) and
``bind`` (record the chosen devices on the pod, then bind it). :mod:`~gpuplace.extender.fit` decides,
:mod:`~gpuplace.extender.state` and :mod:`~gpuplace.extender.watch` keep the cluster's view,
:mod:`~gpuplace.extender.service` and :mod:`~gpuplace.extender.server` speak the protocol,
:mod:`~gpuplace.extender.config` writes the scheduler configuration and manifests. docs/extender.md.
"""

from gpuplace.extender.fit import (
    ASSIGNMENT_ANNOTATION,
    MODELS_ANNOTATION,
    TOPOLOGY_ANNOTATION,
    node_fit,
    pod_request,
)
from gpuplace.extender.service import ExtenderService
from gpuplace.extender.state import ClusterState

__all__ = [
    "ASSIGNMENT_ANNOTATION",
    "MODELS_ANNOTATION",
    "TOPOLOGY_ANNOTATION",
    "ClusterState",
    "ExtenderService",
    "node_fit",
    "pod_request",
]
