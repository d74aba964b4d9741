"""gpuplace.testenv without starting processes: Node objects from an inventory, placeholder pods, the PKI,
binary resolution (envtest's variables), and the state directory."""

from __future__ import annotations

import os
import ssl
import stat
import subprocess
from pathlib import Path

import pytest
from cryptography import x509

from gpuplace.testenv import binaries
from gpuplace.testenv.certs import make_pki
from gpuplace.testenv.controlplane import ControlPlane, ControlPlaneError, write_kubeconfig
from gpuplace.testenv.nodes import KWOK_ANNOTATION, label_value, node_object, placeholder_pod
from gpuplace.types import GpuDevice, Node, Taint


def _h100_node(name: str = "h1", allocated: tuple[float, ...] = (0, 0, 0, 0)) -> Node:
    gpus = tuple(
        GpuDevice(
            f"{name}/gpu{i}", i, "H100-SXM5-80GB", product="NVIDIA-H100-80GB-HBM3", memory_gib=80, allocated=a
        )
        for i, a in enumerate(allocated)
    )
    return Node(
        name,
        gpus,
        labels={"team": "llm"},
        taints=(Taint("nvidia.com/gpu", "present", "NoSchedule"),),
        zone="zone-a",
        rack="rack-1",
        cpu_cores=96,
        memory_gib=1024,
    )


def _mig_node(strategy: str) -> Node:
    slices = tuple(
        GpuDevice(
            f"m/gpu0/{p}-{i}",
            0,
            "A100-SXM4-80GB",
            product="NVIDIA-A100-SXM4-80GB",
            memory_gib=m,
            mig_profile=p,
        )
        for i, (p, m) in enumerate([("3g.40gb", 40), ("2g.20gb", 20), ("1g.10gb", 10)])
    )
    whole = GpuDevice("m/gpu1", 1, "A100-SXM4-80GB", product="NVIDIA-A100-SXM4-80GB", memory_gib=80)
    return Node("m", (*slices, whole), mig_strategy=strategy)


def test_whole_gpu_node_object() -> None:
    obj = node_object(_h100_node())
    labels = obj["metadata"]["labels"]
    assert obj["kind"] == "Node" and obj["metadata"]["name"] == "h1"
    assert labels["kubernetes.io/hostname"] == "h1"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert labels["nvidia.com/gpu.count"] == "4"
    assert labels["nvidia.com/gpu.memory"] == str(80 * 1024)
    assert labels["nvidia.com/mig.strategy"] == "none"
    assert labels["topology.kubernetes.io/zone"] == "zone-a"
    assert labels["gpuplace.io/rack"] == "rack-1"
    assert labels["team"] == "llm"
    assert obj["metadata"]["annotations"][KWOK_ANNOTATION] == "fake"
    assert obj["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    assert obj["status"]["capacity"] == {
        "cpu": "96",
        "memory": "1024Gi",
        "pods": "110",
        "nvidia.com/gpu": "4",
    }
    assert obj["status"]["allocatable"] == obj["status"]["capacity"]


def test_mig_mixed_node_advertises_slices_by_profile() -> None:
    cap = node_object(_mig_node("mixed"))["status"]["capacity"]
    assert cap["nvidia.com/gpu"] == "1"
    assert (cap["nvidia.com/mig-3g.40gb"], cap["nvidia.com/mig-2g.20gb"], cap["nvidia.com/mig-1g.10gb"]) == (
        "1",
        "1",
        "1",
    )


def test_mig_single_node_advertises_slices_as_gpus() -> None:
    node = Node(
        "s",
        tuple(
            GpuDevice(
                f"s/gpu0/1g-{i}",
                0,
                "A100-SXM4-80GB",
                product="NVIDIA-A100-SXM4-80GB",
                memory_gib=10,
                mig_profile="1g.10gb",
            )
            for i in range(7)
        ),
        mig_strategy="single",
    )
    obj = node_object(node)
    assert obj["status"]["capacity"]["nvidia.com/gpu"] == "7"
    assert obj["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"


def test_node_without_cpu_memory_gets_room_for_pods() -> None:
    cap = node_object(Node("bare", (GpuDevice("bare/gpu0", 0, "L4-24GB"),)))["status"]["capacity"]
    assert int(cap["cpu"]) >= 32 and cap["memory"].endswith("Gi")


def test_label_values_are_valid() -> None:
    assert label_value("NVIDIA H100 80GB HBM3") == "NVIDIA-H100-80GB-HBM3"
    assert len(label_value("x" * 100)) == 63


def test_allocated_gpus_become_a_placeholder_pod() -> None:
    assert placeholder_pod(_h100_node()) is None
    pod = placeholder_pod(_h100_node(allocated=(1, 0.5, 0, 0)))
    assert pod is not None
    assert pod["spec"]["nodeName"] == "h1"
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "2"}


def test_pki_chains_and_is_private(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    ca = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    serving = x509.load_pem_x509_certificate(pki.serving_cert.read_bytes())
    admin = x509.load_pem_x509_certificate(pki.admin_cert.read_bytes())
    serving.verify_directly_issued_by(ca)
    admin.verify_directly_issued_by(ca)
    sans = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in sans.get_values_for_type(x509.DNSName)
    assert "system:masters" in admin.subject.rfc4514_string()
    assert stat.S_IMODE(pki.admin_key.stat().st_mode) == 0o600
    ctx = ssl.create_default_context(cafile=str(pki.ca_cert))
    ctx.load_cert_chain(str(pki.admin_cert), str(pki.admin_key))  # the pair matches


def test_with_a_real_node_the_api_server_serves_its_pods_at_the_gateway(tmp_path: Path) -> None:
    import ipaddress

    serving = x509.load_pem_x509_certificate(
        make_pki(tmp_path / "a", ips=("10.90.0.1",)).serving_cert.read_bytes()
    )
    ips = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.IPAddress
    )
    # the gateway (a mounted kubeconfig) and the kubernetes Service's IP (a service account's in-cluster)
    assert {ipaddress.ip_address("10.90.0.1"), ipaddress.ip_address("10.0.0.1")} <= set(ips)
    bins = {
        n: Path(f"/bin/{n}")
        for n in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
    }
    ports = {
        n: 1
        for n in ("etcd", "etcd-peer", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
    }
    pki = make_pki(tmp_path / "b")
    for gateway, bind in (("", "127.0.0.1"), ("10.90.0.1", "0.0.0.0")):
        cp = ControlPlane(state_dir=tmp_path, ports=ports, pod_gateway=gateway)
        assert f"--bind-address={bind}" in cp._commands(bins, pki)["kube-apiserver"]


def test_kubeconfig_loads_with_the_kubernetes_client(tmp_path: Path) -> None:
    from gpuplace.k8s.client import connect

    pki = make_pki(tmp_path / "pki")
    kc = write_kubeconfig(tmp_path / "kubeconfig", "https://127.0.0.1:6443", pki)
    assert connect(kc).configuration.host == "https://127.0.0.1:6443"


def _exe(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_binary_resolution_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUPLACE_K8S_CACHE", str(tmp_path / "cache"))
    for var in [binaries.asset_variable(n) for n in binaries.NAMES] + ["KUBEBUILDER_ASSETS"]:
        monkeypatch.delenv(var, raising=False)
    cached = _exe(binaries.cache_dir() / "etcd")
    assert binaries.find_binary("etcd") == cached
    assets = _exe(tmp_path / "assets" / "etcd")
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(tmp_path / "assets"))
    assert binaries.find_binary("etcd") == assets
    explicit = _exe(tmp_path / "mine" / "my-etcd")
    monkeypatch.setenv("TEST_ASSET_ETCD", str(explicit))
    assert binaries.find_binary("etcd") == explicit
    assert binaries.asset_variable("kube-apiserver") == "TEST_ASSET_KUBE_APISERVER"


def test_missing_binaries_say_how_to_get_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUPLACE_K8S_CACHE", str(tmp_path / "empty"))
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    monkeypatch.delenv("TEST_ASSET_KWOK", raising=False)
    with pytest.raises(binaries.BinariesMissing, match=r"kwok \(looked at cache=.*make k8s-bins"):
        binaries.resolve(("kwok",))


def test_no_state_dir_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ControlPlaneError, match="gpuplace testenv up"):
        ControlPlane.load(tmp_path)


def test_state_round_trip_and_dead_pids(tmp_path: Path) -> None:
    cp = ControlPlane(
        state_dir=tmp_path,
        ports={"kube-apiserver": 1234},
        pids={"etcd": 2**22 + 1},
        pid_starts={"etcd": 5},
        commands={"etcd": ["/bin/etcd"]},
    )
    cp.save()
    again = ControlPlane.load(tmp_path)
    assert again.server == "https://127.0.0.1:1234"
    assert again.pid_starts == {"etcd": 5}
    assert again.alive() == {"etcd": False}
    assert not again.running
    again.stop()  # nothing to signal: must not raise


def test_a_recycled_pid_is_not_ours(tmp_path: Path) -> None:
    from gpuplace.testenv.controlplane import process_start_ticks

    me = os.getpid()
    started = process_start_ticks(me)
    assert started is not None
    assert ControlPlane(state_dir=tmp_path, pids={"etcd": me}, pid_starts={"etcd": started}).alive() == {
        "etcd": True
    }
    # Same PID, different start time: another process got the number; never signal it.
    assert ControlPlane(state_dir=tmp_path, pids={"etcd": me}, pid_starts={"etcd": started - 1}).alive() == {
        "etcd": False
    }


def _run_build(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TEST_ASSET_", "KUBEBUILDER_ASSETS"))}
    return subprocess.run(
        ["bash", str(binaries.BUILD_SCRIPT)],
        env=base | env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_build_script_builds_nothing_when_every_binary_is_overridden(tmp_path: Path) -> None:
    for name in binaries.NAMES:
        _exe(tmp_path / "assets" / name)
    result = _run_build(
        {"KUBEBUILDER_ASSETS": str(tmp_path / "assets"), "GPUPLACE_K8S_CACHE": str(tmp_path / "c")}
    )
    assert result.returncode == 0, result.stderr
    assert "nothing to build" in result.stdout
    assert not (tmp_path / "c").exists()


def test_build_script_reuses_a_complete_cache(tmp_path: Path) -> None:
    version_dir = tmp_path / "c" / binaries.k8s_version()
    (version_dir / "bin").mkdir(parents=True)
    (version_dir / ".complete").write_text("k8s=v built_s=1\n")
    result = _run_build({"GPUPLACE_K8S_CACHE": str(tmp_path / "c")})
    assert result.returncode == 0, result.stderr
    assert "reusing" in result.stdout
