"""Where the control-plane binaries come from, and building them when they are missing.

Each binary is looked up in this order: ``TEST_ASSET_<NAME>`` (envtest's convention, e.g.
``TEST_ASSET_KUBE_APISERVER``), then ``$KUBEBUILDER_ASSETS/<name>``, then the cache that ``make
k8s-bins`` fills (``~/.cache/gpuplace/k8s/<version>/bin``, or ``$GPUPLACE_K8S_CACHE/<version>/bin``).
The cache is filled by ``build.sh`` beside this module, which builds everything from Go modules (no
release downloads); see docs/testenv.md for the recipe.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from gpuplace.errors import GpuplaceError

K8S_VERSION = "v1.35.4"
ETCD_VERSION = "v3.6.16"
KWOK_VERSION = "v0.7.0"
NAMES: tuple[str, ...] = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubectl",
    "kwok",
)
# What a real node needs besides the control plane (``build.sh node``): the kubelet, and the sandbox
# image's process (:mod:`gpuplace.testenv.pause`).
NODE_NAMES: tuple[str, ...] = ("kubelet", "gpuplace-pause")
BUILD_SCRIPT = Path(__file__).with_name("build.sh")


class BinariesMissing(GpuplaceError):
    """A control-plane binary is neither overridden nor built; the message says how to get it."""


def k8s_version() -> str:
    return os.environ.get("GPUPLACE_K8S_VERSION", K8S_VERSION)


def cache_dir() -> Path:
    root = os.environ.get("GPUPLACE_K8S_CACHE") or str(Path.home() / ".cache" / "gpuplace" / "k8s")
    return Path(root) / k8s_version() / "bin"


def asset_variable(name: str) -> str:
    return "TEST_ASSET_" + name.upper().replace("-", "_")


def _candidates(name: str) -> list[tuple[str, Path]]:
    found: list[tuple[str, Path]] = []
    explicit = os.environ.get(asset_variable(name))
    if explicit:
        found.append((asset_variable(name), Path(explicit)))
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    if assets:
        found.append(("KUBEBUILDER_ASSETS", Path(assets) / name))
    found.append(("cache", cache_dir() / name))
    return found


def find_binary(name: str) -> Path | None:
    for _source, path in _candidates(name):
        if path.is_file() and os.access(path, os.X_OK):
            return path
    return None


def resolve(names: tuple[str, ...] = NAMES) -> dict[str, Path]:
    """Every binary in ``names``; :class:`BinariesMissing` names each missing one and where it looked."""
    found: dict[str, Path] = {}
    missing: list[str] = []
    for name in names:
        path = find_binary(name)
        if path is None:
            looked = ", ".join(f"{src}={p}" for src, p in _candidates(name))
            missing.append(f"{name} (looked at {looked})")
        else:
            found[name] = path
    if missing:
        raise BinariesMissing(
            "control-plane binaries missing: "
            + "; ".join(missing)
            + ". Build them with `make k8s-bins` (needs Go >= 1.25 and the Go module proxy; ~15-25 min on "
            "2 cores the first time), or point KUBEBUILDER_ASSETS / TEST_ASSET_<NAME> at existing ones"
        )
    return found


def build(*, quiet: bool = False, node: bool = False) -> Path:
    """Run ``build.sh`` (a no-op if the cache is complete or all is overridden), then ``build.sh node`` if
    ``node``; returns the bin dir."""
    for target in ("all", "node") if node else ("all",):
        result = subprocess.run(
            ["bash", str(BUILD_SCRIPT), target],
            stdout=subprocess.DEVNULL if quiet else None,
            check=False,
        )
        if result.returncode != 0:
            raise BinariesMissing(
                f"{BUILD_SCRIPT} {target} failed with exit status {result.returncode}; see its output above"
            )
    return cache_dir()
