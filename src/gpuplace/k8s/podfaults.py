"""Pods that will never serve, told apart from pods that are only slow, so a deploy fails fast with the
cluster's own words instead of waiting out its deadline.

- **Never schedulable**: kube-scheduler marked the pod ``PodScheduled=False, reason=Unschedulable``, it
  stayed so for :data:`UNSCHEDULABLE_GRACE_S` (a node may still be registering), and no node of the
  cluster could take it even if nothing else ran there (:func:`gpuplace.k8s.fit.could_ever_fit`: its
  node affinity matches no node, or it asks for more than any node has). A pod that waits for GPUs other
  pods hold is not failed: it may be scheduled once they go, so it waits for the deadline. The error
  carries the scheduler's message, e.g. ``0/5 nodes are available: 5 Insufficient nvidia.com/gpu``.
- **Image not present**: the kubelet reports ``ErrImageNeverPull`` (``imagePullPolicy: Never`` and the
  image is not on the node) or cannot pull it (``ErrImagePull``, ``ImagePullBackOff``,
  ``InvalidImageName``). The error names the image and the command that builds it here.
- **Crash loop**: a container in ``CrashLoopBackOff``; the error carries its last log lines.

Both orchestration paths wait through :class:`gpuplace.k8s.provisioning.PodTimer`, which calls
:func:`pod_failure` on every pod it watches; what the deploy does next (tear down, roll back, keep) is the
deploy's ``on_failure``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gpuplace.errors import GpuplaceError
from gpuplace.k8s.api import Api
from gpuplace.k8s.errors import KubeError
from gpuplace.k8s.fit import could_ever_fit

UNSCHEDULABLE_GRACE_S = 10.0
IMAGE_REASONS = ("ErrImageNeverPull", "ErrImagePull", "ImagePullBackOff", "InvalidImageName")
BUILD_HINT = "build and load it with `make images` (docs/testenv.md#images)"
LOG_LINES = 20


class PodFailed(GpuplaceError):
    """A pod that will not serve; ``kind`` is ``unschedulable``, ``image`` or ``crashloop``."""

    def __init__(self, message: str, *, kind: str, pod: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.pod = pod


def unschedulable_message(pod: Mapping[str, Any]) -> str:
    """kube-scheduler's message when it found no node for ``pod`` ("" when it has not said so)."""
    for c in (pod.get("status") or {}).get("conditions") or ():
        if (
            c.get("type") == "PodScheduled"
            and c.get("status") == "False"
            and c.get("reason") == "Unschedulable"
        ):
            return str(c.get("message") or "Unschedulable")
    return ""


def _waiting(pod: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(container, waiting reason, message) of every waiting container, init containers first."""
    status = pod.get("status") or {}
    found = []
    for cs in [*(status.get("initContainerStatuses") or ()), *(status.get("containerStatuses") or ())]:
        waiting = (cs.get("state") or {}).get("waiting") or {}
        if waiting.get("reason"):
            found.append((str(cs.get("name")), str(waiting["reason"]), str(waiting.get("message") or "")))
    return found


def _image_of(pod: Mapping[str, Any], container: str) -> str:
    spec = pod.get("spec") or {}
    for c in [*(spec.get("initContainers") or ()), *(spec.get("containers") or ())]:
        if c.get("name") == container:
            return str(c.get("image", ""))
    return ""


def container_logs(api: Api, pod: Mapping[str, Any], container: str, *, previous: bool = True) -> str:
    """The last :data:`LOG_LINES` lines the container wrote (its previous run's, after a crash)."""
    meta = pod.get("metadata") or {}
    try:
        text = api.client.call_api(
            f"/api/v1/namespaces/{meta.get('namespace')}/pods/{meta.get('name')}/log",
            "GET",
            query_params=[
                ("container", container),
                ("tailLines", str(LOG_LINES)),
                ("previous", "true" if previous else "false"),
            ],
            header_params={"Accept": "application/json, */*"},
            response_type="str",
            auth_settings=["BearerToken"],
            _return_http_data_only=True,
            _preload_content=True,
            _request_timeout=(5.0, 10.0),
        )
    except Exception as e:  # the kubelet may be unreachable: the failure is still reported, without logs
        if previous:
            return container_logs(api, pod, container, previous=False)
        return f"(could not read its log: {e})"
    return str(text or "").rstrip() or "(its log is empty)"


def pod_failure(
    api: Api,
    pod: Mapping[str, Any],
    *,
    unschedulable_for_s: float,
    nodes: Callable[[], Sequence[Mapping[str, Any]]] = lambda: (),
) -> PodFailed | None:
    """Why ``pod`` will never serve, or None while it may still. ``unschedulable_for_s``: how long it has
    been marked unschedulable (0 when it is not); ``nodes``: the cluster's Node objects (read only when
    needed)."""
    name = str((pod.get("metadata") or {}).get("name", ""))
    message = unschedulable_message(pod)
    if message and unschedulable_for_s >= UNSCHEDULABLE_GRACE_S and not could_ever_fit(pod, nodes()):
        return PodFailed(
            f"pod {name} cannot be scheduled (kube-scheduler: {message}); no node could take it even if "
            f"nothing else ran there (it was unschedulable for {unschedulable_for_s:.0f} s)",
            kind="unschedulable",
            pod=name,
        )
    for container, reason, detail in _waiting(pod):
        if reason in IMAGE_REASONS:
            image = _image_of(pod, container)
            return PodFailed(
                f"pod {name}: container {container}'s image {image} is not on node "
                f"{(pod.get('spec') or {}).get('nodeName')} ({reason}: {detail}); {BUILD_HINT}",
                kind="image",
                pod=name,
            )
        if reason == "CrashLoopBackOff":
            try:
                logs = container_logs(api, pod, container)
            except KubeError as e:
                logs = f"(could not read its log: {e})"
            return PodFailed(
                f"pod {name}: container {container} is in CrashLoopBackOff ({detail}); its last log lines:\n"
                + "\n".join(f"    {line}" for line in logs.splitlines()[-LOG_LINES:]),
                kind="crashloop",
                pod=name,
            )
    return None
