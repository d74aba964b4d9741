"""The only part of gpuplace that talks to the Kubernetes API.

:mod:`~gpuplace.k8s.client` builds a client from a kubeconfig (or in-cluster) at the entry point;
:mod:`~gpuplace.k8s.api` does discovery, server-side apply (field manager ``gpuplace``), get, list,
delete under deadlines with :mod:`~gpuplace.k8s.retry`; :mod:`~gpuplace.k8s.errors` is the error
hierarchy; :mod:`~gpuplace.k8s.deploy` applies a plan, waits for rollout (:mod:`~gpuplace.k8s.rollout`),
records provisioning latency and placement, and tears down; :mod:`~gpuplace.k8s.rbac` is the deploy
step's least-privilege Role; :mod:`~gpuplace.k8s.nodes` registers simulated Nodes;
:mod:`~gpuplace.k8s.dra` reads placements back (nodes, DRA-allocated GPU devices) and why a pod is Pending;
:mod:`~gpuplace.k8s.watch` watches under a deadline across API-server restarts, and
:mod:`~gpuplace.k8s.provisioning` times pods from creation to ready-to-serve with it;
:mod:`~gpuplace.k8s.crds` installs CustomResourceDefinitions (the upstream CRDs the emitted forms are
validated against).
"""

from gpuplace.k8s.api import FIELD_MANAGER, Api
from gpuplace.k8s.client import connect
from gpuplace.k8s.deploy import DeployFailed, deploy_plan
from gpuplace.k8s.errors import (
    Conflict,
    Forbidden,
    Invalid,
    KubeError,
    NotFound,
    ServerError,
    Throttled,
    Unreachable,
)
from gpuplace.k8s.rollout import RolloutTimeout
from gpuplace.k8s.teardown import TeardownResult, teardown_plan, teardown_run

__all__ = [
    "FIELD_MANAGER",
    "Api",
    "Conflict",
    "DeployFailed",
    "Forbidden",
    "Invalid",
    "KubeError",
    "NotFound",
    "RolloutTimeout",
    "ServerError",
    "TeardownResult",
    "Throttled",
    "Unreachable",
    "connect",
    "deploy_plan",
    "teardown_plan",
    "teardown_run",
]
