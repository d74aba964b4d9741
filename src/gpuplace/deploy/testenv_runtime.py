"""What serves the pods of a deploy to a gpuplace testenv: each pod's own container on the real node, the
KWOK stand-in elsewhere.

On a testenv started with ``--real-node`` (:mod:`gpuplace.testenv.realnode`), a pod kube-scheduler binds to
the real node runs in a real container (containerd + runc): its readiness probe is the kubelet's, and it is
ready to serve when the first request to its pod IP succeeds (the CNI bridge makes pod IPs reachable from
this machine; no kube-proxy runs, so Services do not route). A pod on a KWOK GPU node runs no container,
so :class:`~gpuplace.deploy.standin.LocalStandIn` serves it. :class:`TestenvRuntime` is the
:class:`~gpuplace.k8s.runtime.PodRuntime` that dispatches by the pod's node, and records per pod what ran
it (``runtime``: ``containerd/runc`` or the stand-in).

No registry can be reached from the testenv, so the images the plan names
(``ghcr.io/gpuplace/gpuplace-<name>:<version>``) are not on the node; ``make images`` builds each here
as ``gpuplace.local/gpuplace-<name>:<version>-debian-bookworm`` and ``testenv up --real-node`` loads it.
:func:`with_local_images` points the plan's containers at those local builds (the record says so).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpuplace.deploy.standin import STANDIN, LocalStandIn
from gpuplace.k8s.runtime import BackgroundChecks, container_port
from gpuplace.manifests.local import MODEL_DIR
from gpuplace.plandir import PlanDir
from gpuplace.serving.probe import first_request

FIRST_REQUEST_TIMEOUT_S = 60.0  # one attempt; the checks retry until the deploy's deadline


def real_node_of(kubeconfig: str | Path | None) -> str:
    """The real node's name on the testenv of ``kubeconfig`` ("" when it has none, or is no testenv)."""
    from gpuplace.testenv.controlplane import is_testenv_kubeconfig
    from gpuplace.testenv.realnode import RealNode

    if not kubeconfig or not is_testenv_kubeconfig(kubeconfig):
        return ""
    node = RealNode.load(Path(kubeconfig).resolve().parent)
    return node.name if node is not None and node.alive().get("kubelet") else ""


def local_build_of(image: str, built: Mapping[str, Path]) -> str:
    """The local build (one of ``built``'s tags) of gpuplace's ``image``, "" when none was built."""
    repo, _, version = image.rpartition(":")
    name = repo.rsplit("/", 1)[-1]
    if not name.startswith("gpuplace-") or not version:
        return ""
    for tag in sorted(built):
        local_repo, _, local_version = tag.rpartition(":")
        if local_repo.rsplit("/", 1)[-1] == name and local_version.startswith(f"{version}-"):
            return tag
    return ""


def with_local_images(planned: PlanDir, built: Mapping[str, Path]) -> tuple[PlanDir, tuple[str, ...]]:
    """``planned`` with every container image that has a local build pointed at it, and a note per image."""
    notes: list[str] = []

    def local(container: Mapping[str, Any]) -> dict[str, Any]:
        image = str(container.get("image", ""))
        found = local_build_of(image, built)
        if not found:
            return dict(container)
        note = f"image {image} (no registry here) runs as its local build {found} (make images)"
        if note not in notes:
            notes.append(note)
        return {**container, "image": found, "imagePullPolicy": "Never"}

    manifests = []
    for m in planned.manifests:
        pod = (((m.get("spec") or {}).get("template") or {}).get("spec")) or {}
        if not pod.get("containers"):
            manifests.append(m)
            continue
        pod = {**pod, "containers": [local(c) for c in pod["containers"]]}
        spec = dict(m["spec"])
        spec["template"] = {**spec["template"], "spec": pod}
        manifests.append({**m, "spec": spec})
    if not notes:
        return planned, ()
    plan = planned.plan
    serving = plan.serving
    if serving is not None and local_build_of(serving.image, built):
        plan = replace(plan, serving=replace(serving, image=local_build_of(serving.image, built)))
    return replace(planned, manifests=tuple(manifests), plan=plan), tuple(notes)


class TestenvRuntime:
    """A pod on the real node is served by its container (first request to its pod IP); any other pod by
    the KWOK stand-in."""

    __test__ = False  # not a pytest class, whatever its name says
    observes_serving = True
    serves_locally = True  # pod IPs and the stand-in's servers are both reached from this machine

    def __init__(self, standin: LocalStandIn, real_node: str) -> None:
        self.standin = standin
        self.real_node = real_node
        self.name = STANDIN
        self._lock = threading.Lock()
        self._ran: dict[str, str] = {}  # pod name → what ran it
        self._checks = BackgroundChecks(self._attempt)

    def on_real_node(self, pod: Mapping[str, Any]) -> bool:
        return bool(self.real_node) and (pod.get("spec") or {}).get("nodeName") == self.real_node

    def _url(self, pod: Mapping[str, Any]) -> str:
        ip = (pod.get("status") or {}).get("podIP") or ""
        return f"http://{ip}:{container_port(pod)}" if ip else ""

    def _attempt(self, pod: Mapping[str, Any]) -> bool:
        url = self._url(pod)
        return bool(url) and first_request(url, self.model_of(pod), timeout_s=FIRST_REQUEST_TIMEOUT_S)

    def serve_check(self, pod: Mapping[str, Any]) -> bool | float:
        if self.on_real_node(pod):
            return self._checks.check(pod)
        return self.standin.serve_check(pod)

    def endpoint_of(self, pod: Mapping[str, Any]) -> str:
        return self._url(pod) if self.on_real_node(pod) else self.standin.endpoint_of(pod)

    def model_of(self, pod: Mapping[str, Any]) -> str:
        if not self.on_real_node(pod):
            return self.standin.model_of(pod)
        commands = [" ".join(c.get("command") or ()) for c in (pod.get("spec") or {}).get("containers") or ()]
        # gpuplace's serving container builds the model into MODEL_DIR, the name transformers serve answers to
        return MODEL_DIR if any("gpuplace.catalog.modeldir" in c for c in commands) else ""

    def runtime_of(self, pod: Mapping[str, Any]) -> str:
        from gpuplace.testenv.realnode import RUNTIME_NAME

        ran = RUNTIME_NAME if self.on_real_node(pod) else STANDIN
        with self._lock:
            self._ran[str((pod.get("metadata") or {}).get("name", ""))] = ran
            self.name = " + ".join(sorted(set(self._ran.values())))
        return ran

    def served_on(self) -> str:
        with self._lock:
            stood_in = not self._ran or STANDIN in self._ran.values()
        return self.standin.served_on() if stood_in else ""  # "": the node's own device (its CPUs)

    def discard(self) -> None:
        self._checks.close()
        self.standin.discard()

    def close(self) -> None:
        self._checks.close()
        self.standin.close()
