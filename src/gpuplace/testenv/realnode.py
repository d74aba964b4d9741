"""A real node in the testenv: containerd, runc and a kubelet on this machine, beside the KWOK GPU nodes.

``gpuplace testenv up --real-node`` starts, after the control plane, containerd (Debian's package, with its
own state and socket, and its images kept between nodes: :mod:`gpuplace.testenv.nodeimages`) and the
kubelet built from ``k8s.io/kubernetes`` at the control plane's version (``build.sh node``). The node is
named by this machine's host name, the name ``--inventory local`` plans on, and registers with the
machine's CPUs and memory: the cluster's CPU capacity, the ``local`` device as a node. Pods on it run in
real containers (runc) and get IPs on a CNI bridge (``gpuplace0``, 10.90.0.0/24) that this machine reaches
directly.

What this machine needs, measured when the node was first brought up by hand (issue 22): the kubelet runs
on cgroups v1 only with ``failCgroupV1: false``, ``cgroupDriver: cgroupfs``, ``cgroupsPerQOS: false`` and no
node-allocatable enforcement; runc cannot lower ``oom_score_adj`` here, so containerd's CRI restricts it
(``restrict_oom_score_adj``); the sandbox image is made here (:mod:`gpuplace.testenv.pause`); the kubelet
refuses a loopback ``--node-ip``, so the node's address is the bridge's gateway, which the bridge is
created with before the kubelet starts.

:meth:`RealNode.stop` leaves nothing behind: it cordons the node and deletes its pods (the kubelet stops
their containers and releases their network), stops the kubelet, removes any container containerd still
has, stops containerd and whatever shim outlived it, unmounts everything under the node's directories
and the network namespaces it created, deletes the bridge and its veths, removes every iptables rule and
chain that was not there before, and puts back the sysctls the kubelet and the bridge plugin set.
:mod:`gpuplace.testenv.nodeclean` does the host-side part. One real node per machine (the bridge and
its subnet are the machine's): a second is refused, naming the first.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shutil
import socket
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpuplace.errors import GpuplaceError, InvalidInput
from gpuplace.testenv import binaries, nodeclean, nodeconfig
from gpuplace.testenv.commands import SERVICE_CIDR
from gpuplace.testenv.controlplane import (
    ControlPlane,
    ControlPlaneError,
    free_port,
    log_tail,
    process_start_ticks,
    spawn_logged,
)
from gpuplace.testenv.localimages import busybox_archive, pause_archive, pause_image
from gpuplace.testenv.nodeconfig import CNI_BIN_DIR
from gpuplace.testenv.nodeimages import (
    GPU_IMAGES,
    ImageImportError,
    image_store,
    import_image,
    mark_imported,
    needs_import,
)
from gpuplace.testenv.nodeimages import built_images as built_images  # re-exported

NODE_STATE = "realnode.json"
RUN_DIR = Path("/run/gpuplace-node")  # sockets and containerd's state: short paths, one node per machine
BRIDGE = "gpuplace0"
SUBNET = "10.90.0.0/24"
GATEWAY = "10.90.0.1"
KUBERNETES_SERVICE_IP = str(next(ipaddress.ip_network(SERVICE_CIDR).hosts()))  # the in-cluster API

REAL_NODE_LABEL = "gpuplace.io/real-node"
CONTAINERD_NAMESPACE = "k8s.io"
RUNTIME_NAME = "containerd/runc"  # what a record's ``runtime`` says for a pod on this node
PROCESSES = ("containerd", "kubelet")
# The unix sockets the kubelet binds under its root directory (``<state dir>/node/kubelet``); a socket's
# path holds 108 bytes at most (``sun_path``), so a long state directory fails the kubelet obscurely.
KUBELET_SOCKETS = ("device-plugins/kubelet.sock", "pod-resources/kubelet.sock")
SOCKET_PATH_MAX = 108


class RealNodeError(GpuplaceError):
    """The real node could not start or stop; the message says where to look."""


def node_name() -> str:
    """The real node's name: this machine's host name, as the ``local`` inventory names it."""
    return socket.gethostname().lower()


def host_tools_missing() -> list[str]:
    """The host programs the real node needs that are not installed (``make node-deps`` installs them)."""
    needed = (
        "containerd",
        "containerd-shim-runc-v2",
        "runc",
        "ctr",
        "ip",
        "iptables-save",
        "mount",
        "busybox",
    )
    missing = [n for n in needed if shutil.which(n, path=nodeclean.host_path()) is None]
    missing += [
        f"{CNI_BIN_DIR}/{p}"
        for p in ("bridge", "host-local", "loopback")
        if not Path(CNI_BIN_DIR, p).exists()
    ]
    return missing


def require_short_sockets(testenv_dir: Path) -> None:
    """Refuse a state directory under which the kubelet's unix sockets would not fit ``sun_path``, before
    anything starts (:class:`~gpuplace.errors.InvalidInput` naming the field, the value and the fix)."""
    root = Path(testenv_dir).resolve() / "node" / "kubelet"
    longest = max((root / s for s in KUBELET_SOCKETS), key=lambda p: len(os.fsencode(p)))
    size = len(os.fsencode(longest))
    if size > SOCKET_PATH_MAX:
        raise InvalidInput(
            "state_dir",
            str(testenv_dir),
            f"is too long for a real node: the kubelet binds unix sockets under it, e.g. {longest} "
            f"({size} bytes; a socket path holds {SOCKET_PATH_MAX} at most)",
            f"Pass a --state-dir of at most {SOCKET_PATH_MAX - size + len(os.fsencode(str(testenv_dir)))} "
            "bytes (e.g. under /tmp), or leave it out for the default",
        )


@dataclass
class RealNode:
    """One real node, described by ``<testenv state dir>/realnode.json``."""

    testenv_dir: Path
    name: str = ""
    pids: dict[str, int] = field(default_factory=dict)
    pid_starts: dict[str, int] = field(default_factory=dict)
    commands: dict[str, list[str]] = field(default_factory=dict)
    kubelet_port: int = 0
    start_s: float = 0.0
    host_before: dict[str, Any] = field(default_factory=dict)  # nodeclean.snapshot() taken before start
    imported: dict[str, float] = field(default_factory=dict)  # image → seconds its import took

    # --- paths -------------------------------------------------------------------------------------------
    @property
    def dir(self) -> Path:
        return self.testenv_dir / "node"

    @property
    def socket(self) -> Path:
        return RUN_DIR / "containerd.sock"

    @property
    def kubelet_root(self) -> Path:
        return self.dir / "kubelet"

    def log(self, name: str) -> Path:
        return self.testenv_dir / "logs" / f"{name}.log"

    def owned_dirs(self) -> tuple[Path, ...]:
        return (self.dir, RUN_DIR, image_store())

    # --- persistence -------------------------------------------------------------------------------------
    def save(self) -> None:
        data = asdict(self)
        data["testenv_dir"] = str(self.testenv_dir)
        (self.testenv_dir / NODE_STATE).write_text(json.dumps(data, indent=2))

    @classmethod
    def load(cls, testenv_dir: Path) -> RealNode | None:
        path = testenv_dir / NODE_STATE
        if not path.is_file():
            return None
        data = json.loads(path.read_text())
        data["testenv_dir"] = Path(data["testenv_dir"])
        return cls(**data)

    # --- processes ---------------------------------------------------------------------------------------
    def alive(self) -> dict[str, bool]:
        return {
            n: process_start_ticks(self.pids[n]) == self.pid_starts.get(n)
            for n in PROCESSES
            if n in self.pids
        }

    def _spawn(self, name: str) -> None:
        env = dict(os.environ, PATH=nodeclean.host_path())
        pid, started = spawn_logged(self.commands[name], self.log(name), cwd=self.dir, env=env)
        self.pids[name], self.pid_starts[name] = pid, started or 0
        self.save()

    def _stop_process(self, name: str, timeout_s: float = 20.0) -> None:
        pid = self.pids.get(name)
        if pid is None or not self.alive().get(name):
            return
        nodeclean.stop_pid(pid, self.pid_starts[name], timeout_s=timeout_s)

    def ctr(self, *args: str, timeout_s: float = 120.0, check: bool = True) -> str:
        """``ctr`` against this node's containerd, in the kubelet's namespace."""
        command = ["ctr", "--address", str(self.socket), "--namespace", CONTAINERD_NAMESPACE, *args]
        result = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=dict(os.environ, PATH=nodeclean.host_path()),
        )
        if check and result.returncode != 0:
            raise RealNodeError(f"{' '.join(command)} failed ({result.returncode}): {result.stderr.strip()}")
        return result.stdout

    def import_image(self, archive: Path) -> None:
        """Load an image archive (docker-archive or OCI) into the node's containerd."""
        self.ctr("images", "import", str(archive), timeout_s=900)

    def import_built_images(self) -> dict[str, float]:
        """Import every image ``make images`` built (:func:`built_images`) that can run on this CPU node (not
        the CUDA and vLLM images: several GB each, and no GPU here) and that the image store does not hold yet
        (:func:`needs_import`), streamed from buildah's storage, its layer blobs dropped once unpacked;
        seconds each took (about 0 when it was there)."""
        took: dict[str, float] = {}
        store = image_store()
        ctr = ["ctr", "--address", str(self.socket), "--namespace", CONTAINERD_NAMESPACE]
        env = dict(os.environ, PATH=nodeclean.host_path())
        for tag, build_id in built_images().items():
            if any(f"/{name}:" in tag for name in GPU_IMAGES):
                continue
            t0 = time.monotonic()
            if needs_import(build_id, store) or tag not in self.images():
                try:
                    import_image(ctr, tag, env=env)
                except ImageImportError as e:
                    raise RealNodeError(str(e)) from e
                mark_imported(build_id, store)
            took[tag] = round(time.monotonic() - t0, 1)
        self.save()
        return took

    def images(self) -> list[str]:
        return [line.split()[0] for line in self.ctr("images", "ls").splitlines()[1:] if line.strip()]

    def restart_containerd(self, *, down_s: float = 0.0, with_containers: bool = False) -> None:
        """Stop containerd and start it again (a fault the load test must survive as data). The containers
        outlive it (their shims do) unless ``with_containers``: then the shims and every process in a
        container's cgroup are killed too, as systemd's ``KillMode=control-group`` does on a restart."""
        import signal

        self._stop_process("containerd")
        if with_containers:
            for pid in nodeclean.shim_pids(str(self.socket)) + nodeclean.container_pids():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        if down_s:
            time.sleep(down_s)
        self._spawn("containerd")
        self._wait_socket(60.0)

    # --- configuration -----------------------------------------------------------------------------------
    def _containerd_config(self, k8s_version: str) -> Path:
        (self.dir / "cni").mkdir(parents=True, exist_ok=True)
        (self.dir / "cni" / "10-gpuplace.conflist").write_text(
            json.dumps(
                nodeconfig.cni_config(BRIDGE, SUBNET, GATEWAY, RUN_DIR / "cni-ipam", (SERVICE_CIDR,)),
                indent=2,
            )
        )
        path = self.dir / "containerd.toml"
        path.write_text(
            nodeconfig.containerd_config(
                root=image_store(),
                state=RUN_DIR / "containerd",
                socket=self.socket,
                sandbox_image=pause_image(k8s_version),
                cni_conf_dir=self.dir / "cni",
            )
        )
        return path

    def _kubelet_config(self, cp: ControlPlane) -> Path:
        config = nodeconfig.kubelet_config(
            socket=self.socket,
            address=GATEWAY,
            port=self.kubelet_port,
            healthz_port=free_port(),
            client_ca=cp.state_dir / "pki" / "ca.crt",
            pod_logs_dir=self.dir / "pod-logs",
        )
        path = self.dir / "kubelet.yaml"
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        return path

    # --- start -------------------------------------------------------------------------------------------
    @classmethod
    def start(cls, cp: ControlPlane, *, timeout_s: float = 120.0) -> RealNode:
        """Start containerd and a kubelet registering with ``cp``; returns once the node is Ready."""
        if os.geteuid() != 0:
            raise RealNodeError("a real node needs root (containerd, runc and the CNI bridge); run as root")
        missing = host_tools_missing()
        if missing:
            raise RealNodeError(
                f"a real node needs {', '.join(missing)}; install them with `make node-deps` "
                "(Debian: containerd runc containernetworking-plugins iptables busybox-static)"
            )
        bins = binaries.resolve(binaries.NODE_NAMES)
        other = nodeclean.claim(RUN_DIR, cp.state_dir)
        if other is not None:
            raise RealNodeError(
                f"a real node already runs on this machine, for the testenv in {other}; stop it with "
                f"`gpuplace testenv down --state-dir {other}` first (one real node per machine)"
            )
        node = cls(testenv_dir=cp.state_dir, name=node_name())
        t0 = time.monotonic()
        try:
            node.host_before = nodeclean.snapshot()
            node.save()
            node._start(cp, bins, timeout_s)
        except BaseException:
            node.stop(cp)
            raise
        node.start_s = time.monotonic() - t0
        node.save()
        return node

    def _start(self, cp: ControlPlane, bins: dict[str, Path], timeout_s: float) -> None:
        if self.dir.exists():
            nodeclean.unmount_under((self.dir,))
            shutil.rmtree(self.dir)
        self.dir.mkdir(parents=True)
        (self.dir / "pod-logs").mkdir()
        RUN_DIR.mkdir(parents=True, exist_ok=True)
        version = binaries.k8s_version()
        nodeclean.create_bridge(BRIDGE, f"{GATEWAY}/{SUBNET.split('/')[1]}")
        # No kube-proxy: the kubernetes Service (the in-cluster config of a pod's service account) is routed
        # to the API server, which serves on the gateway too (ControlPlane.pod_gateway).
        nodeclean.route_service(
            SUBNET, f"{KUBERNETES_SERVICE_IP}:443", f"{GATEWAY}:{cp.ports['kube-apiserver']}"
        )
        self.kubelet_port = free_port()
        self.commands = {
            "containerd": ["containerd", "--config", str(self._containerd_config(version))],
            "kubelet": [
                str(bins["kubelet"]),
                f"--config={self._kubelet_config(cp)}",
                f"--kubeconfig={cp.kubeconfig}",
                f"--hostname-override={self.name}",
                f"--node-ip={GATEWAY}",
                f"--root-dir={self.kubelet_root}",
                f"--cert-dir={self.dir / 'kubelet-pki'}",
                f"--node-labels={REAL_NODE_LABEL}=true",
                "--v=1",
            ],
        }
        self._spawn("containerd")
        self._wait_socket(timeout_s)
        self.import_image(pause_archive(bins["gpuplace-pause"], self.dir / "pause.tar", version))
        self.import_image(busybox_archive(self.dir / "busybox.tar"))
        self.imported = self.import_built_images()
        self._spawn("kubelet")
        self._wait_ready(cp, timeout_s)

    def _wait_socket(self, timeout_s: float) -> None:
        end = time.monotonic() + timeout_s
        while True:
            if not self.alive().get("containerd"):
                raise RealNodeError(
                    f"containerd exited; see {self.log('containerd')}:\n{log_tail(self.log('containerd'))}"
                )
            if nodeclean.containerd_answers(self.socket):
                return
            if time.monotonic() > end:
                raise RealNodeError(
                    f"containerd not answering within {timeout_s:g} s; see {self.log('containerd')}"
                )
            time.sleep(0.2)

    def _wait_ready(self, cp: ControlPlane, timeout_s: float) -> None:
        from gpuplace.k8s import Api, connect
        from gpuplace.k8s.retry import Deadline

        api = Api(connect(cp.kubeconfig))
        deadline = Deadline(timeout_s)
        try:
            while True:
                if not self.alive().get("kubelet"):
                    raise RealNodeError(
                        f"the kubelet exited; see {self.log('kubelet')}:\n{log_tail(self.log('kubelet'))}"
                    )
                node = api.get_or_none("v1", "Node", self.name, deadline=deadline)
                conditions = ((node or {}).get("status") or {}).get("conditions") or ()
                if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
                    return
                if deadline.expired:
                    why = next(
                        (c.get("message", "") for c in conditions if c.get("type") == "Ready"),
                        "not registered",
                    )
                    raise RealNodeError(
                        f"node {self.name} not Ready within {timeout_s:g} s ({why}); "
                        f"see {self.log('kubelet')}"
                    )
                time.sleep(0.5)
        finally:
            api.client.close()

    # --- stop --------------------------------------------------------------------------------------------
    def drain(self, cp: ControlPlane, *, timeout_s: float = 90.0) -> None:
        """Cordon the node and delete its pods; returns when the kubelet has stopped them all."""
        from gpuplace.k8s import Api, connect
        from gpuplace.k8s.errors import KubeError
        from gpuplace.k8s.retry import Deadline

        if not cp.alive().get("kube-apiserver") or not self.alive().get("kubelet"):
            return
        api = Api(connect(cp.kubeconfig))
        deadline = Deadline(timeout_s)
        try:
            with contextlib.suppress(KubeError):
                api.request(
                    "PATCH",
                    f"/api/v1/nodes/{self.name}",
                    action=f"cordon node {self.name}",
                    body={"spec": {"unschedulable": True}},
                    content_type="application/merge-patch+json",
                    deadline=deadline,
                )
            while not deadline.expired:
                doc = api.request(
                    "GET",
                    "/api/v1/pods",
                    action=f"list the pods on node {self.name}",
                    query={"fieldSelector": f"spec.nodeName={self.name}"},
                    deadline=deadline,
                )
                pods = doc.get("items") or []
                if not pods:
                    return
                for pod in pods:
                    meta = pod["metadata"]
                    if not meta.get("deletionTimestamp"):
                        with contextlib.suppress(KubeError):
                            api.request(
                                "DELETE",
                                f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                                action=f"delete pod {meta['name']}",
                                body={"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0},
                                deadline=deadline,
                            )
                time.sleep(0.5)
        except KubeError:
            return  # what the kubelet did not stop, the host-side clean-up below does
        finally:
            api.client.close()

    def stop(self, cp: ControlPlane | None = None) -> list[str]:
        """Stop everything the node started and remove what it left on the host; returns what had to be
        removed by force (empty when the kubelet and containerd cleaned up after themselves)."""
        forced: list[str] = []
        if cp is not None:
            try:
                self.drain(cp)
            except Exception as e:  # whatever the drain did not stop, the clean-up below does
                forced.append(f"drain failed: {e}")
        self._stop_process("kubelet")
        if self.alive().get("containerd"):
            forced += self._remove_containers()
        self._stop_process("containerd")
        forced += nodeclean.clean_host(
            self.host_before,
            owned_dirs=self.owned_dirs(),
            shim_address=str(self.socket),
            bridge=BRIDGE,
        )
        nodeclean.release(self.testenv_dir)
        with contextlib.suppress(OSError):
            shutil.rmtree(RUN_DIR)
        # the imported images (several GB) are imported again at the next `up`: do not leave them on disk
        with contextlib.suppress(OSError):
            shutil.rmtree(self.dir / "containerd")
        self.save()
        return forced

    def _remove_containers(self) -> list[str]:
        forced = []
        with contextlib.suppress(RealNodeError, subprocess.TimeoutExpired):
            for task in self.ctr("tasks", "ls", "-q", timeout_s=30).split():
                self.ctr("tasks", "kill", "-s", "SIGKILL", task, check=False, timeout_s=30)
                self.ctr("tasks", "rm", "-f", task, check=False, timeout_s=30)
                forced.append(f"task {task}")
            for container in self.ctr("containers", "ls", "-q", timeout_s=30).split():
                self.ctr("containers", "rm", container, check=False, timeout_s=30)
        return forced


def start_real_node(cp: ControlPlane, *, timeout_s: float = 120.0) -> RealNode:
    if not cp.running:
        raise ControlPlaneError(f"the control plane in {cp.state_dir} is not running")
    return RealNode.start(cp, timeout_s=timeout_s)
