"""A local MLflow tracking server process: SQLite backend, proxied artifacts, a free loopback port.

Used by the integration tests, the tracking benchmark and anyone who wants the MLflow UI on their
own results (docs/tracking.md#a-local-server). It starts ``python -m mlflow server`` in its own
process group, waits for ``/health`` with a deadline, and stops exactly that process group by its
id. No mlflow import here: the server is a subprocess.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from gpuplace.tracking.config import probe


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class LocalServer:
    uri: str
    process: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self, timeout_s: float = 20.0) -> None:
        """Stop the server's process group (uvicorn workers included) by its id."""
        if self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=timeout_s)
        except ProcessLookupError:
            pass


def start_local_server(
    workdir: str | Path, *, port: int = 0, host: str = "127.0.0.1", timeout_s: float = 180.0
) -> LocalServer:
    """Start ``mlflow server`` on ``host`` (loopback; the real testenv node's gateway for its pods) with its
    store under ``workdir``; wait until it answers."""
    root = Path(workdir).resolve()
    root.mkdir(parents=True, exist_ok=True)
    port = port or free_port()
    log = root / "server.log"
    cmd = [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        "--backend-store-uri",
        f"sqlite:///{root / 'mlflow.db'}",
        "--artifacts-destination",
        str(root / "artifacts"),
        "--host",
        host,
        "--port",
        str(port),
        "--workers",
        "1",
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    server = LocalServer(f"http://{host}:{port}", proc, log)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(
                f"mlflow server exited with {proc.returncode}; see {log}:\n{log.read_text()[-2000:]}"
            )
        if not probe(server.uri, timeout_s=2.0):
            return server
        time.sleep(0.5)
    server.stop()
    raise RuntimeError(f"mlflow server on {server.uri} did not answer within {timeout_s:.0f} s; see {log}")
