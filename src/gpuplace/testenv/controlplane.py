"""The lifecycle of one local control plane: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and KWOK as child processes of nobody (own sessions), tracked in a state directory.

Start order and readiness: etcd (``/health``) → kube-apiserver (``/readyz``) → controller-manager and
scheduler (``/healthz``) and KWOK (``/healthz``). Everything listens on 127.0.0.1 on free ports. The state
directory holds ``state.json`` (ports, PIDs, command lines), ``kubeconfig`` (cluster-admin via a client
certificate), ``pki/``, ``etcd/`` and ``logs/<process>.log``. :meth:`ControlPlane.stop` signals only the
PIDs recorded there, after checking by start time that each PID is still the process it started.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from gpuplace.errors import GpuplaceError
from gpuplace.testenv import binaries
from gpuplace.testenv.commands import command_lines

if TYPE_CHECKING:  # certs needs cryptography, which a bare GPU machine's pytest (this plugin) lacks
    from gpuplace.testenv.certs import PkiFiles

START_ORDER: tuple[str, ...] = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
STATE_FILE = "state.json"
DEFAULT_START_TIMEOUT_S = 90.0


class ControlPlaneError(GpuplaceError):
    """The control plane could not start, or is not running when it should be."""


def default_state_dir() -> Path:
    env = os.environ.get("GPUPLACE_TESTENV_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "gpuplace" / "testenv"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def process_start_ticks(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot), or None if it is gone or a zombie.

    A PID plus its start time names one process for good: a recycled PID has a later start time.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    if fields[0] == "Z":
        return None
    return int(fields[19])


def _pid_alive(pid: int, started: int | None) -> bool:
    """Whether ``pid`` still runs and is the process that started at ``started``."""
    ticks = process_start_ticks(pid)
    return ticks is not None and (started is None or ticks == started)


def spawn_logged(
    command: list[str], log_path: Path, *, cwd: Path, env: dict[str, str] | None = None
) -> tuple[int, int | None]:
    """Start ``command`` in its own session (a Ctrl-C in the shell that ran ``up`` must not kill it), its
    output appended to ``log_path``; returns (PID, start ticks)."""
    with log_path.open("ab") as log:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        log.write(f"\n--- {stamp} start: {' '.join(command)}\n".encode())
        log.flush()
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    return proc.pid, process_start_ticks(proc.pid)


def log_tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(text[-lines:])


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


KUBECONFIG_CONTEXT = "gpuplace-testenv"


def is_testenv_kubeconfig(path: str | Path | None) -> bool:
    """Whether the kubeconfig at ``path`` (None: ``$KUBECONFIG``, else ``~/.kube/config``) points at a
    gpuplace testenv, whose nodes KWOK plays (its current context is :data:`KUBECONFIG_CONTEXT`)."""
    if path in (None, ""):
        path = (os.environ.get("KUBECONFIG") or "").split(os.pathsep)[0] or Path.home() / ".kube" / "config"
    try:
        config = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError):
        return False
    return isinstance(config, dict) and config.get("current-context") == KUBECONFIG_CONTEXT


def write_kubeconfig(path: Path, server: str, pki: PkiFiles, *, name: str = KUBECONFIG_CONTEXT) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": name, "cluster": {"server": server, "certificate-authority-data": _b64(pki.ca_cert)}}
        ],
        "users": [
            {
                "name": "admin",
                "user": {
                    "client-certificate-data": _b64(pki.admin_cert),
                    "client-key-data": _b64(pki.admin_key),
                },
            }
        ],
        "contexts": [{"name": name, "context": {"cluster": name, "user": "admin", "namespace": "default"}}],
        "current-context": name,
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


@dataclass
class ControlPlane:
    """A control plane described by its state directory; :meth:`start` creates one, :meth:`load` finds it."""

    state_dir: Path
    ports: dict[str, int] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)
    pid_starts: dict[str, int] = field(default_factory=dict)  # start ticks: guards against recycled PIDs
    commands: dict[str, list[str]] = field(default_factory=dict)
    started_at: float = 0.0
    start_s: float = 0.0
    fleet: str = ""
    pod_gateway: str = ""  # where pods on a real node reach the API server (its bridge); "" = loopback only

    # --- paths ---------------------------------------------------------------------------------------
    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def log_dir(self) -> Path:
        return self.state_dir / "logs"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports['kube-apiserver']}"

    def log(self, name: str) -> Path:
        return self.log_dir / f"{name}.log"

    # --- persistence -----------------------------------------------------------------------------------
    def save(self) -> None:
        data = {
            "ports": self.ports,
            "pids": self.pids,
            "pid_starts": self.pid_starts,
            "commands": self.commands,
            "started_at": self.started_at,
            "start_s": self.start_s,
            "fleet": self.fleet,
            "pod_gateway": self.pod_gateway,
        }
        tmp = self.state_dir / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(data, indent=2))
        tmp.replace(self.state_dir / STATE_FILE)

    @classmethod
    def load(cls, state_dir: Path | None = None) -> ControlPlane:
        state_dir = state_dir or default_state_dir()
        path = state_dir / STATE_FILE
        if not path.is_file():
            raise ControlPlaneError(
                f"no control plane in {state_dir} (no {STATE_FILE}); start one with `gpuplace testenv up`"
            )
        data = json.loads(path.read_text())
        return cls(
            state_dir=state_dir,
            ports={k: int(v) for k, v in data.get("ports", {}).items()},
            pids={k: int(v) for k, v in data.get("pids", {}).items()},
            pid_starts={k: int(v) for k, v in data.get("pid_starts", {}).items()},
            commands={k: list(v) for k, v in data.get("commands", {}).items()},
            started_at=float(data.get("started_at", 0.0)),
            start_s=float(data.get("start_s", 0.0)),
            fleet=str(data.get("fleet", "")),
            pod_gateway=str(data.get("pod_gateway", "")),
        )

    # --- status ------------------------------------------------------------------------------------------
    def alive(self) -> dict[str, bool]:
        return {n: self._alive(n) for n in START_ORDER if n in self.pids}

    def _alive(self, name: str) -> bool:
        # Without a recorded start time we cannot tell our process from a stranger: treat it as gone.
        return name in self.pid_starts and _pid_alive(self.pids[name], self.pid_starts[name])

    @property
    def running(self) -> bool:
        alive = self.alive()
        return bool(alive) and all(alive.values())

    def _ssl_context(self) -> ssl.SSLContext:
        pki = self.state_dir / "pki"
        ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
        return ctx

    def _probe(self, name: str) -> bool:
        port = self.ports.get(name)
        if port is None:
            return False
        try:
            if name == "etcd":
                url, ctx = f"http://127.0.0.1:{port}/health", None
            elif name == "kwok":
                url, ctx = f"http://127.0.0.1:{port}/healthz", None
            elif name == "kube-apiserver":
                url, ctx = f"{self.server}/readyz", self._ssl_context()
            else:
                # The components' serving certificates are self-signed in memory: checking liveness only.
                url, ctx = f"https://127.0.0.1:{port}/healthz", ssl._create_unverified_context()
            with urllib.request.urlopen(url, timeout=2.0, context=ctx) as resp:
                body = resp.read().decode(errors="replace")
                return resp.status == 200 and ("true" in body if name == "etcd" else True)
        except (OSError, urllib.error.URLError, ssl.SSLError):
            return False

    def ready(self) -> dict[str, bool]:
        return {n: self._probe(n) for n in START_ORDER if n in self.ports}

    # --- processes ---------------------------------------------------------------------------------------
    def _spawn(self, name: str) -> None:
        self.pids[name], started = spawn_logged(self.commands[name], self.log(name), cwd=self.state_dir)
        if started is not None:
            self.pid_starts[name] = started
        self.save()

    def _wait_ready(self, names: tuple[str, ...], timeout_s: float) -> None:
        end = time.monotonic() + timeout_s
        pending = list(names)
        while pending:
            for name in list(pending):
                if not self._alive(name):
                    raise ControlPlaneError(
                        f"{name} exited during start-up; last lines of {self.log(name)}:\n"
                        f"{log_tail(self.log(name))}"
                    )
                if self._probe(name):
                    pending.remove(name)
            if pending and time.monotonic() > end:
                raise ControlPlaneError(
                    f"{', '.join(pending)} not ready within {timeout_s:g} s; logs in {self.log_dir}; "
                    "last lines of "
                    f"{self.log(pending[0])}:\n{log_tail(self.log(pending[0]))}"
                )
            if pending:
                time.sleep(0.1)

    def _stop_one(self, name: str, timeout_s: float = 10.0) -> None:
        pid = self.pids.get(name)
        if pid is None or not self._alive(name):
            return
        os.kill(pid, signal.SIGTERM)
        end = time.monotonic() + timeout_s
        while self._alive(name) and time.monotonic() < end:
            self._reap(pid)
            time.sleep(0.05)
        if self._alive(name):
            os.kill(pid, signal.SIGKILL)
            while self._alive(name) and time.monotonic() < end + 5:
                self._reap(pid)
                time.sleep(0.05)
        self._reap(pid)

    @staticmethod
    def _reap(pid: int) -> None:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)

    def stop(self) -> None:
        """Stop every process this control plane started (reverse start order); the state directory stays."""
        for name in reversed(START_ORDER):
            self._stop_one(name)
        self.save()

    def stop_process(self, name: str) -> None:
        """Stop one process (e.g. kube-scheduler, to let pods pile up); :meth:`start_process` restarts it."""
        self._stop_one(name)
        self.save()

    def start_process(self, name: str, *, timeout_s: float = DEFAULT_START_TIMEOUT_S) -> None:
        """Start one process again with its recorded command line and wait until it is ready."""
        self._spawn(name)
        self._wait_ready((name,), timeout_s)

    def restart(self, name: str, *, timeout_s: float = DEFAULT_START_TIMEOUT_S) -> float:
        """Stop ``name`` and start it again with the same command line; returns the seconds it was down."""
        t0 = time.monotonic()
        self.stop_process(name)
        self.start_process(name, timeout_s=timeout_s)
        return time.monotonic() - t0

    # --- start ---------------------------------------------------------------------------------------------
    def _commands(self, bins: dict[str, Path], pki: PkiFiles) -> dict[str, list[str]]:
        """Each process's command line (:mod:`gpuplace.testenv.commands`), by name."""
        return command_lines(
            bins,
            pki,
            state_dir=self.state_dir,
            ports=self.ports,
            kubeconfig=self.kubeconfig,
            apiserver_bind="0.0.0.0" if self.pod_gateway else "127.0.0.1",
        )

    @classmethod
    def start(
        cls,
        state_dir: Path | None = None,
        *,
        bins: dict[str, Path] | None = None,
        timeout_s: float = DEFAULT_START_TIMEOUT_S,
        pod_gateway: str = "",
    ) -> ControlPlane:
        """Start a fresh control plane in ``state_dir`` (wiped first; an error if one runs there);
        ``pod_gateway``: the API server also serves there, for pods on a real node."""
        state_dir = (state_dir or default_state_dir()).resolve()
        if (state_dir / STATE_FILE).is_file():
            previous = cls.load(state_dir)
            if any(previous.alive().values()):
                raise ControlPlaneError(
                    f"a control plane already runs in {state_dir} (API {previous.server}); "
                    "stop it with `gpuplace testenv down` or pick another --state-dir"
                )
        bins = bins or binaries.resolve()
        t0 = time.monotonic()
        _wipe(state_dir)
        cp = cls(state_dir=state_dir, started_at=time.time(), pod_gateway=pod_gateway)
        cp.log_dir.mkdir(parents=True)
        from gpuplace.testenv.certs import make_pki

        pki = make_pki(state_dir / "pki", ips=(pod_gateway,) if pod_gateway else ())
        cp.ports = {n: free_port() for n in (*START_ORDER, "etcd-peer")}
        write_kubeconfig(cp.kubeconfig, cp.server, pki)
        cp.commands = cp._commands(bins, pki)
        cp.save()
        try:
            cp._spawn("etcd")
            cp._wait_ready(("etcd",), timeout_s)
            cp._spawn("kube-apiserver")
            cp._wait_ready(("kube-apiserver",), timeout_s)
            rest = ("kube-controller-manager", "kube-scheduler", "kwok")
            for name in rest:
                cp._spawn(name)
            cp._wait_ready(rest, timeout_s)
        except BaseException:
            cp.stop()
            raise
        cp.start_s = time.monotonic() - t0
        cp.save()
        return cp

    def summary(self) -> dict[str, Any]:
        return {
            "state_dir": str(self.state_dir),
            "kubeconfig": str(self.kubeconfig),
            "server": self.server if "kube-apiserver" in self.ports else "",
            "fleet": self.fleet,
            "start_s": round(self.start_s, 2),
            "processes": {
                n: {"pid": self.pids.get(n), "alive": alive, "log": str(self.log(n))}
                for n, alive in self.alive().items()
            },
        }


def _wipe(state_dir: Path) -> None:
    import shutil

    if state_dir.exists():
        shutil.rmtree(state_dir)
    state_dir.mkdir(parents=True)
