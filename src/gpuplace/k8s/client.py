"""Where a Kubernetes API client comes from: a kubeconfig file, or the pod's service account.

This is the only place that reads kubeconfig; everything else takes the resulting client as the
keyword argument ``client``. A missing or unreadable kubeconfig is bad input, reported with the path and
what to do. urllib3's own retries are switched off because :mod:`gpuplace.k8s.retry` owns retrying.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from gpuplace.errors import InvalidInput

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

IN_CLUSTER = "in-cluster"


def default_kubeconfig() -> Path | None:
    """``$KUBECONFIG`` (its first entry) or ``~/.kube/config``, if that file exists."""
    env = os.environ.get("KUBECONFIG", "")
    candidates = [Path(p) for p in env.split(os.pathsep) if p] or [Path.home() / ".kube" / "config"]
    return next((p for p in candidates if p.is_file()), None)


def connect(kubeconfig: str | Path | None = None, *, context: str | None = None) -> ApiClient:
    """An API client for ``kubeconfig``; ``None`` means the default kubeconfig, else in-cluster config.

    ``"in-cluster"`` forces the service-account token of the pod this runs in.
    """
    from kubernetes import client as k8s_client
    from kubernetes import config as k8s_config
    from kubernetes.config.config_exception import ConfigException

    configuration = k8s_client.Configuration()
    if kubeconfig == IN_CLUSTER or (kubeconfig is None and default_kubeconfig() is None):
        if not os.environ.get("KUBERNETES_SERVICE_HOST"):
            raise InvalidInput(
                "kubeconfig",
                kubeconfig,
                "no kubeconfig given, none at $KUBECONFIG or ~/.kube/config, and not running in a pod",
                "Pass --kubeconfig PATH (for the local control plane: `gpuplace testenv kubeconfig`)",
            )
        try:
            k8s_config.load_incluster_config(client_configuration=configuration)
        except ConfigException as e:
            raise InvalidInput("kubeconfig", IN_CLUSTER, f"in-cluster config unusable: {e}") from e
    else:
        path = Path(kubeconfig) if kubeconfig is not None else default_kubeconfig()
        assert path is not None
        if not path.is_file():
            raise InvalidInput(
                "kubeconfig",
                str(path),
                "no such file",
                "Pass the path of a kubeconfig (for the local control plane: `gpuplace testenv kubeconfig`)",
            )
        try:
            k8s_config.load_kube_config(
                config_file=str(path), context=context, client_configuration=configuration
            )
        except (ConfigException, ValueError, TypeError, KeyError, OSError) as e:
            raise InvalidInput(
                "kubeconfig", str(path), f"not a usable kubeconfig ({type(e).__name__}: {e})", ""
            ) from e
        except Exception as e:  # yaml errors come in several classes
            raise InvalidInput("kubeconfig", str(path), f"not a usable kubeconfig ({e})") from e
    configuration.retries = 0
    return k8s_client.ApiClient(configuration)
