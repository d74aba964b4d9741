"""A stand-in for the container runtime the testenv does not have: a local engine per pod KWOK runs.

KWOK plays the kubelet of the simulated nodes: it marks bound pods Running and Ready, but no container
starts, so nothing would answer a request. :class:`LocalStandIn` fills exactly that gap and no other: for
each pod KWOK has marked Ready it starts the plan's model in the local engine on this machine
(:func:`gpuplace.deploy.local.deploy_local`, the same engine the ``local`` target runs), and the pod is
ready to serve when the first request to that server succeeds. So on the testenv:

- real: the API objects, kube-scheduler's binding and DRA allocation, the watch-timed created →
  scheduled → Ready events, a real server start and a real first request, and the load test against a
  real server;
- stand-in: the container (the local engine for the pod's vLLM image), the device that serves (this
  machine's, reported as ``served_on``: never the simulated node's GPU), the Service's load balancing
  (the record's endpoint is one pod's server).

The servers outlive the deploy (the load test runs in another step); ``gpuplace teardown`` stops them
through the local registry (:func:`gpuplace.deploy.standin_records`). Each is also registered with the
testenv it serves (``<testenv state dir>/standin-servers/``, :func:`testenv_servers_dir`), so that
``gpuplace testenv down`` stops every server anything started against it, torn down or not.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gpuplace.k8s.runtime import BackgroundChecks
from gpuplace.serving.probe import first_request
from gpuplace.testenv.env import SERVERS_DIR
from gpuplace.types import DeploymentRecord

STANDIN = "local stand-in (KWOK runs no containers)"
FIRST_REQUEST_TIMEOUT_S = 120.0  # the local engine loads the model on its first request

StartServer = Callable[[str, Path, str, float], DeploymentRecord]  # (model, workdir, name, timeout)


def testenv_servers_dir(kubeconfig: str | Path | None) -> Path | None:
    """Where the stand-in registers its servers with the testenv of ``kubeconfig`` (None: not a testenv).
    A testenv's kubeconfig lives in its state directory, beside ``state.json``."""
    from gpuplace.testenv.controlplane import STATE_FILE, is_testenv_kubeconfig

    if not kubeconfig or not is_testenv_kubeconfig(kubeconfig):
        return None
    state_dir = Path(kubeconfig).resolve().parent
    return state_dir / SERVERS_DIR if (state_dir / STATE_FILE).is_file() else None


def register_with_testenv(folder: Path, record: DeploymentRecord) -> None:
    """Note ``record``'s server where ``gpuplace testenv down`` finds it: its PID and start time (so a
    reused PID is never signalled), in ``<folder>/<name>.json``."""
    import json

    from gpuplace.testenv.controlplane import process_start_ticks

    if record.pid is None:
        return
    folder.mkdir(parents=True, exist_ok=True)
    entry = {"pid": record.pid, "start_ticks": process_start_ticks(record.pid), "endpoint": record.endpoint}
    (folder / f"{record.name}.json").write_text(json.dumps(entry))


def start_local(model: str, workdir: Path, name: str, timeout_s: float) -> DeploymentRecord:
    from gpuplace.deploy.local import deploy_local
    from gpuplace.deploy.served import local_engine

    device, engine_args = local_engine(model)  # the local engine, standing in for the pod's vLLM
    return deploy_local(
        model, workdir=workdir, name=name, startup_timeout_s=timeout_s, device=device, extra_args=engine_args
    )


class LocalStandIn:
    """A :class:`~gpuplace.k8s.runtime.PodRuntime` for KWOK's pods: one local server per pod."""

    name = STANDIN
    observes_serving = True
    serves_locally = True

    def __init__(
        self,
        model: str,
        *,
        workdir: str | Path,
        startup_timeout_s: float = 300.0,
        start: StartServer | None = None,
        unit: str = "",
        register_dir: Path | None = None,
    ) -> None:
        self.model = model
        self.workdir = Path(workdir)
        self.startup_timeout_s = startup_timeout_s
        self._start = start or start_local
        self._unit = unit
        self._register_dir = register_dir  # the testenv's standin-servers/ (testenv_servers_dir)
        self._lock = threading.Lock()
        self._servers: dict[str, DeploymentRecord] = {}  # by pod name
        self._checks = BackgroundChecks(self._attempt)

    def _attempt(self, pod: Mapping[str, Any]) -> bool:
        name = str((pod.get("metadata") or {}).get("name", ""))
        with self._lock:
            record = self._servers.get(name)
        if record is None:
            record = self._start(self.model, self.workdir, f"kwok-{name}"[:63], self.startup_timeout_s)
            if self._register_dir is not None:
                register_with_testenv(self._register_dir, record)
            if self._checks.stopped:  # the deploy gave up while this server started: do not leak it
                self._stop_one(record)
                return False
            with self._lock:
                self._servers[name] = record
        return first_request(record.endpoint, record.served_model_name, timeout_s=FIRST_REQUEST_TIMEOUT_S)

    def serve_check(self, pod: Mapping[str, Any]) -> bool | float:
        return self._checks.check(pod)

    def endpoint_of(self, pod: Mapping[str, Any]) -> str:
        with self._lock:
            record = self._servers.get(str((pod.get("metadata") or {}).get("name", "")))
        return record.endpoint if record is not None else ""

    def model_of(self, pod: Mapping[str, Any]) -> str:
        with self._lock:
            record = self._servers.get(str((pod.get("metadata") or {}).get("name", "")))
        return record.served_model_name if record is not None else ""

    def runtime_of(self, pod: Mapping[str, Any]) -> str:
        return self.name

    def served_on(self) -> str:
        if not self._unit:
            from gpuplace.profiling.device import local_unit

            self._unit = local_unit()
        return self._unit

    def servers(self) -> dict[str, DeploymentRecord]:
        """The local server of each pod, by pod name."""
        with self._lock:
            return dict(self._servers)

    @staticmethod
    def _stop_one(record: DeploymentRecord) -> None:
        from gpuplace.deploy.local import teardown_local

        teardown_local(record)

    def discard(self) -> None:
        self._checks.close()
        for record in self.servers().values():
            self._stop_one(record)
        with self._lock:
            self._servers.clear()

    def close(self) -> None:
        self._checks.close()
