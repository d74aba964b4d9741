"""The ``local`` deploy target: an OpenAI-compatible server process on this machine.

:func:`deploy_local` builds (or reuses) a model directory for a preset, starts ``transformers serve`` on
loopback in its own session, offline (``HF_HUB_OFFLINE=1``), waits until ``/health`` and
``/v1/models`` answer, and returns the same :class:`DeploymentRecord` the Kubernetes target does, with
one :class:`PodRecord` whose created → ready times are the provisioning latency. :func:`teardown_local`
stops the process by its PID (its whole process group), and is idempotent: a server already gone, or a
PID now used by some other program, is left alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from gpuplace.errors import GpuplaceError, InvalidInput
from gpuplace.serving.runtime import serve_command
from gpuplace.types import DeploymentRecord, PodRecord
from gpuplace.types.engines import LOCAL_ENGINE

_POLL_S = 0.25
_STOP_GRACE_S = 10.0
# Torch threads of the local server: half the cores (one on two), so that its intra-op threads leave room
# for its own HTTP thread and the load tester on the same machine. The engine-step calibration and every
# local deployment run with the same value, so a prediction and its measurement see the same engine.
LOCAL_TORCH_THREADS = max(1, min(8, (os.cpu_count() or 2) // 2))


class ServerStartFailed(GpuplaceError):
    """The local inference server exited or did not become ready in time; the message has its log tail."""


def _port_free(host: str, port: int) -> bool:
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


def free_port(host: str = "127.0.0.1") -> int:
    """A port the OS reports free now (``transformers serve`` needs a number, not port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _get_json(url: str, timeout_s: float = 2.0) -> object | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            return json.loads(resp.read()) if resp.status == 200 else None
    except (OSError, ValueError, urllib.error.URLError):
        return None


def _log_tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def resolve_model_dir(model: str) -> Path:
    """A model directory as given, or the (cached) directory built from a preset."""
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise InvalidInput("model", model, "directory has no config.json", "Give a model directory")
        return path.resolve()
    from gpuplace.catalog.modeldir import build_model_dir

    return build_model_dir(model)


def deploy_local(
    model: str,
    *,
    workdir: Path,
    port: int = 0,
    host: str = "127.0.0.1",
    startup_timeout_s: float = 300.0,
    name: str = "gpuplace-local",
    device: str = "auto",
    extra_args: Sequence[str] = (),
) -> DeploymentRecord:
    """Start ``transformers serve`` for ``model`` (a preset or a model directory) and wait until ready.

    The server's log goes to ``<workdir>/<name>.log``. On failure the process is stopped and
    :class:`ServerStartFailed` carries the log's last lines.
    """
    if not startup_timeout_s > 0:
        raise InvalidInput("startup_timeout_s", startup_timeout_s, "must be positive", "")
    if not 0 <= port < 65536:
        raise InvalidInput("port", port, "is not a TCP port", "Give 0 (any free port) or 1..65535")
    from gpuplace.deploy.memory import require_fits_memory

    if device == "cpu" or (device == "auto" and not Path("/dev/nvidia0").exists()):
        require_fits_memory(model)  # before building or loading anything
    created_at = time.time()
    model_dir = resolve_model_dir(model)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    if port and not _port_free(host, port):
        raise InvalidInput(
            "port",
            port,
            f"is in use on {host}",
            "Stop what listens there, pick another --port, or give 0 (any free port)",
        )
    port = port or free_port(host)
    log_path = workdir / f"{name}.log"
    proc = _start_server(
        model_dir,
        host=host,
        port=port,
        device=device,
        extra_args=extra_args,
        workdir=workdir,
        log_path=log_path,
    )
    started_at = time.time()
    endpoint = f"http://{host}:{port}"
    _wait_until_ready(proc, endpoint, model=model, log_path=log_path, startup_timeout_s=startup_timeout_s)
    ready_at = time.time()
    return DeploymentRecord(
        target="local",
        name=name,
        namespace="",
        endpoint=endpoint,
        model=model,
        ready=True,
        pods=(
            PodRecord(
                name=name,
                node=socket.gethostname(),
                phase="Running",
                created_at_s=created_at,
                scheduled_at_s=started_at,
                ready_at_s=ready_at,
            ),
        ),
        created_at=datetime.fromtimestamp(created_at, UTC).isoformat(),
        pid=proc.pid,
        served_model_name=str(model_dir),
        notes=(
            f"model_dir={model_dir}",
            f"log={log_path}",
            "server=transformers serve",
            f"torch threads={LOCAL_TORCH_THREADS}",
        ),
    )


def _start_server(
    model_dir: Path,
    *,
    host: str,
    port: int,
    device: str,
    extra_args: Sequence[str],
    workdir: Path,
    log_path: Path,
) -> subprocess.Popen[bytes]:
    """``transformers serve`` started offline in its own session, its output appended to ``log_path``."""
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PYTHONUNBUFFERED": "1",
        "OMP_NUM_THREADS": str(LOCAL_TORCH_THREADS),
    }
    with log_path.open("ab") as log:
        return subprocess.Popen(
            serve_command(model_dir, host=host, port=port, device=device, extra_args=extra_args),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            cwd=workdir,
            # Its own session, so that the server outlives `gpuplace deploy` and teardown can stop
            # the whole group (uvicorn and any worker it forks).
            start_new_session=True,
        )


def _wait_until_ready(
    proc: subprocess.Popen[bytes], endpoint: str, *, model: str, log_path: Path, startup_timeout_s: float
) -> None:
    """Wait for ``/health`` and ``/v1/models``; raise :class:`ServerStartFailed` if it exits or times out."""
    deadline = time.monotonic() + startup_timeout_s
    while True:
        code = proc.poll()
        if code is not None:
            raise ServerStartFailed(
                f"the local server for {model!r} exited with status {code} before it was ready; "
                f"log {log_path}:\n{_log_tail(log_path)}"
            )
        if _get_json(endpoint + "/health") is not None:
            models = _get_json(endpoint + "/v1/models")
            if isinstance(models, dict) and models.get("data"):
                return
        if time.monotonic() > deadline:
            _stop_pid(proc.pid)
            raise ServerStartFailed(
                f"the local server for {model!r} was not ready within {startup_timeout_s:g} s; "
                f"log {log_path}:\n{_log_tail(log_path)}"
            )
        time.sleep(_POLL_S)


def _is_our_server(pid: int) -> bool:
    """Whether ``pid`` is still a ``transformers serve`` process (guards against a reused PID)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return True  # no /proc (macOS): trust the record
    return b"serve" in cmdline and any(LOCAL_ENGINE.process_word in part for part in cmdline)


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs; reaps it when it is our child, and counts a zombie as gone."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    if state in ("Z", "X"):
        # it died between the waitpid above and now: reap it if it is our child, so the PID is free
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        return False
    return True


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _stop_pid(pid: int) -> None:
    _signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + _STOP_GRACE_S
    while _alive(pid):
        if time.monotonic() > deadline:
            _signal_group(pid, signal.SIGKILL)
            time.sleep(_POLL_S)
            _alive(pid)
            return
        time.sleep(0.05)


def teardown_local(record: DeploymentRecord) -> None:
    """Stop the server of a local deployment; nothing happens if it is already gone."""
    if record.target != "local":
        raise InvalidInput("deployment.target", record.target, "is not a local deployment", "")
    if record.pid is None:
        return
    if not _alive(record.pid) or not _is_our_server(record.pid):
        return
    _stop_pid(record.pid)
