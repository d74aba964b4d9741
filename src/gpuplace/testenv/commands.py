"""The command lines of the local control plane's processes: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler (with its configuration file) and KWOK.

:class:`gpuplace.testenv.controlplane.ControlPlane` starts, tracks and stops them; this module only says
how each is started, from the binaries, the certificates, the state directory and the ports.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

if TYPE_CHECKING:  # certs needs cryptography, which a bare GPU machine's pytest (this plugin) lacks
    from gpuplace.testenv.certs import PkiFiles

SERVICE_CIDR = "10.0.0.0/24"
POD_CIDR = "10.64.0.1/12"
# Client rate limits high enough that kube-scheduler's throughput, not its client's token bucket, is
# what a benchmark measures (scheduler_perf does the same).
CLIENT_QPS = 500
CLIENT_BURST = 1000


def command_lines(
    bins: Mapping[str, Path],
    pki: PkiFiles,
    *,
    state_dir: Path,
    ports: Mapping[str, int],
    kubeconfig: Path,
    apiserver_bind: str,
) -> dict[str, list[str]]:
    """Each process's command line, by name; writes kube-scheduler's configuration file first."""
    etcd_url = f"http://127.0.0.1:{ports['etcd']}"
    scheduler_config = write_scheduler_config(state_dir / "kube-scheduler.yaml", kubeconfig)
    component_common = [
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
    ]
    return {
        "etcd": etcd(bins["etcd"], state_dir, etcd_url, f"http://127.0.0.1:{ports['etcd-peer']}"),
        "kube-apiserver": kube_apiserver(
            bins["kube-apiserver"], pki, state_dir, etcd_url, ports["kube-apiserver"], apiserver_bind
        ),
        "kube-controller-manager": [
            str(bins["kube-controller-manager"]),
            *component_common,
            f"--secure-port={ports['kube-controller-manager']}",
            f"--cert-dir={state_dir / 'kcm-certs'}",
            f"--service-account-private-key-file={pki.sa_key}",
            f"--root-ca-file={pki.ca_cert}",
            f"--cluster-signing-cert-file={pki.ca_cert}",
            f"--cluster-signing-key-file={pki.ca_key}",
            "--leader-elect=false",
            f"--kube-api-qps={CLIENT_QPS}",
            f"--kube-api-burst={CLIENT_BURST}",
            "--v=1",
        ],
        "kube-scheduler": [
            str(bins["kube-scheduler"]),
            *component_common,
            f"--config={scheduler_config}",
            f"--secure-port={ports['kube-scheduler']}",
            f"--cert-dir={state_dir / 'scheduler-certs'}",
            "--v=1",
        ],
        "kwok": [
            str(bins["kwok"]),
            f"--kubeconfig={kubeconfig}",
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            f"--cidr={POD_CIDR}",
            "--node-ip=10.64.0.1",
            "--node-lease-duration-seconds=40",
            f"--server-address=127.0.0.1:{ports['kwok']}",
        ],
    }


def write_scheduler_config(path: Path, kubeconfig: Path) -> Path:
    """kube-scheduler's configuration (its client's rate limits, no leader election) at ``path``."""
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "KubeSchedulerConfiguration",
                "clientConnection": {"kubeconfig": str(kubeconfig), "qps": CLIENT_QPS, "burst": CLIENT_BURST},
                "leaderElection": {"leaderElect": False},
            }
        )
    )
    return path


def etcd(binary: Path, state_dir: Path, client_url: str, peer_url: str) -> list[str]:
    """etcd's command line: one member, its data in the state directory."""
    return [
        str(binary),
        "--name=gpuplace",
        f"--data-dir={state_dir / 'etcd'}",
        f"--listen-client-urls={client_url}",
        f"--advertise-client-urls={client_url}",
        f"--listen-peer-urls={peer_url}",
        f"--initial-advertise-peer-urls={peer_url}",
        f"--initial-cluster=gpuplace={peer_url}",
        # A throwaway cluster: durability buys nothing and fsync dominates on slow disks.
        "--unsafe-no-fsync",
        "--log-level=warn",
    ]


def kube_apiserver(
    binary: Path, pki: PkiFiles, state_dir: Path, etcd_url: str, port: int, bind: str
) -> list[str]:
    """kube-apiserver's command line; ``bind`` is 0.0.0.0 when a real node's pods must reach it."""
    return [
        str(binary),
        f"--etcd-servers={etcd_url}",
        # A real node's pods reach it at the bridge gateway, which does not exist yet: the wildcard.
        f"--bind-address={bind}",
        "--advertise-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={state_dir / 'apiserver-certs'}",
        f"--tls-cert-file={pki.serving_cert}",
        f"--tls-private-key-file={pki.serving_key}",
        f"--client-ca-file={pki.ca_cert}",
        f"--service-account-key-file={pki.sa_pub}",
        f"--service-account-signing-key-file={pki.sa_key}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--authorization-mode=RBAC",
        # The loopback advertise address may not go into the kubernetes Service's endpoints.
        "--endpoint-reconciler-type=none",
        "--allow-privileged=true",
        # A real node's kubelet serves on its InternalIP; its host name resolves to 127.0.0.1 here.
        "--kubelet-preferred-address-types=InternalIP,Hostname",
        "--v=1",
    ]
