"""A second kube-scheduler beside a local control plane, with a configuration of our choosing.

The control plane's own scheduler keeps its default configuration; tests and the benchmark start another
one from the same binary (:mod:`gpuplace.testenv.binaries`) whose profiles have their own
``schedulerName`` — pods choose it with ``spec.schedulerName`` — and, for the extender, an ``extenders``
stanza. The process runs in its own session and is stopped by its PID (checked by start time).
"""

from __future__ import annotations

import os
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpuplace.testenv import binaries
from gpuplace.testenv.commands import CLIENT_BURST, CLIENT_QPS
from gpuplace.testenv.controlplane import (
    ControlPlane,
    ControlPlaneError,
    free_port,
    process_start_ticks,
)


@dataclass
class LocalScheduler:
    proc: subprocess.Popen[bytes]
    started: int | None
    port: int
    log: Path

    def alive(self) -> bool:
        return self.proc.poll() is None and process_start_ticks(self.proc.pid) == self.started

    def stop(self, timeout_s: float = 10.0) -> None:
        if self.alive():
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout_s)


def start_scheduler(
    cp: ControlPlane,
    config: dict[str, Any],
    workdir: Path,
    *,
    name: str = "kube-scheduler-extra",
    timeout_s: float = 60.0,
) -> LocalScheduler:
    """Start kube-scheduler with ``config`` (KubeSchedulerConfiguration) against ``cp``; wait till healthy."""
    workdir.mkdir(parents=True, exist_ok=True)
    kubeconfig = str(cp.kubeconfig)
    config = {
        **config,
        "clientConnection": {"kubeconfig": kubeconfig, "qps": CLIENT_QPS, "burst": CLIENT_BURST},
        "leaderElection": {"leaderElect": False},
    }
    path = workdir / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    port = free_port()
    log = workdir / f"{name}.log"
    command = [
        str(binaries.resolve()["kube-scheduler"]),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={workdir / (name + '-certs')}",
        f"--config={path}",
        "--v=2",
    ]
    with log.open("ab") as out:
        proc = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    sched = LocalScheduler(proc, process_start_ticks(proc.pid), port, log)
    end = time.monotonic() + timeout_s
    while True:
        if not sched.alive():
            raise ControlPlaneError(f"{name} exited; last lines of {log}:\n{log.read_text()[-3000:]}")
        try:
            url = f"https://127.0.0.1:{port}/healthz"
            with urllib.request.urlopen(url, timeout=2, context=ssl._create_unverified_context()) as r:
                if r.status == 200:
                    return sched
        except (OSError, urllib.error.URLError):
            pass
        if time.monotonic() > end:
            sched.stop()
            raise ControlPlaneError(f"{name} not healthy within {timeout_s:g} s; see {log}")
        time.sleep(0.2)
