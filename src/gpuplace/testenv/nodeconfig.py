"""The real node's configuration files, as pure functions: containerd's (CRI included), the CNI network's
and the kubelet's. What each setting is for on this machine is said beside it; issue 22 records how each
was found.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

CNI_BIN_DIR = "/usr/lib/cni"  # where Debian's containernetworking-plugins put them


def containerd_config(
    *, root: Path, state: Path, socket: Path, sandbox_image: str, cni_conf_dir: Path
) -> str:
    """containerd 1.6's config (version 2): its own root, state and socket, so it is nobody else's."""
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return f"""version = 2
root = "{root}"
state = "{state}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "{socket}"
[ttrpc]
  address = "{socket}.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "{root}/opt"
[{cri}]
  # No registry is reachable: the sandbox image is made here (gpuplace.testenv.localimages).
  sandbox_image = "{sandbox_image}"
  # Lowering oom_score_adj is not permitted here; without this runc fails every sandbox
  # ("can't get final child's PID from pipe").
  restrict_oom_score_adj = true
  [{cri}.containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [{cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [{cri}.cni]
    bin_dir = "{CNI_BIN_DIR}"
    conf_dir = "{cni_conf_dir}"
"""


def cni_config(
    bridge: str, subnet: str, gateway: str, ipam_dir: Path, routes: tuple[str, ...] = ()
) -> dict[str, Any]:
    """A bridge network this machine reaches directly (it holds the gateway address); no masquerading,
    so the plugin adds no iptables rules. Pods route ``routes`` (the Service CIDR: the API server's
    ``kubernetes`` Service) through the gateway; no default route."""
    return {
        "cniVersion": "0.4.0",
        "name": "gpuplace",
        "plugins": [
            {
                "type": "bridge",
                "bridge": bridge,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": subnet, "gateway": gateway}]],
                    "routes": [{"dst": dst, "gw": gateway} for dst in routes],
                    "dataDir": str(ipam_dir),
                },
            },
            {"type": "loopback"},
        ],
    }


def kubelet_config(
    *, socket: Path, address: str, port: int, healthz_port: int, client_ca: Path, pod_logs_dir: Path
) -> dict[str, Any]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "containerRuntimeEndpoint": f"unix://{socket}",
        # This machine's cgroups are v1 (hybrid): kubelet 1.35 accepts them only when asked, with the
        # cgroupfs driver and no QoS hierarchy or node-allocatable enforcement.
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "cgroupsPerQOS": False,
        "enforceNodeAllocatable": [],
        "failSwapOn": False,
        "address": address,
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": healthz_port,
        "authentication": {
            # The API server reaches the kubelet (logs, exec) without a client certificate.
            "anonymous": {"enabled": True},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(client_ca)},
        },
        "authorization": {"mode": "AlwaysAllow"},
        "podLogsDir": str(pod_logs_dir),
        # A throwaway node on a shared disk: no image GC or disk eviction deleting the local images.
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "serializeImagePulls": False,
        "maxPods": 30,
        "registerNode": True,
        "nodeStatusReportFrequency": "10s",
        "nodeStatusUpdateFrequency": "5s",
        "syncFrequency": "10s",
        "fileCheckFrequency": "10s",
        "resolvConf": "/etc/resolv.conf",
    }
