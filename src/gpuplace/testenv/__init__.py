"""A real local Kubernetes control plane with simulated GPU nodes.

etcd, kube-apiserver, kube-controller-manager and kube-scheduler built from their Go modules
(:mod:`~gpuplace.testenv.binaries`, ``build.sh``), with KWOK making fake GPU nodes Ready and the pods
kube-scheduler binds to them Running. :mod:`~gpuplace.testenv.controlplane` owns the processes,
:mod:`~gpuplace.testenv.certs` the PKI, :mod:`~gpuplace.testenv.nodes` turns an :class:`Inventory` into
Node objects, :mod:`~gpuplace.testenv.env` puts them together, and :mod:`~gpuplace.testenv.commands` is
``gpuplace testenv up|down|status|kubeconfig``.
"""

from gpuplace.testenv.binaries import BinariesMissing
from gpuplace.testenv.controlplane import ControlPlane, ControlPlaneError, default_state_dir
from gpuplace.testenv.env import add_fleet, down, load_fleet, up

__all__ = [
    "BinariesMissing",
    "ControlPlane",
    "ControlPlaneError",
    "add_fleet",
    "default_state_dir",
    "down",
    "load_fleet",
    "up",
]
