"""Images the real node needs that no registry can serve here, made from one static binary each and written
as docker-archive tars that ``ctr images import`` loads into the node's containerd.

- The sandbox ("pause") image: ``registry.k8s.io/pause`` cannot be pulled, so its one layer holds
  ``gpuplace-pause`` (built by ``build.sh node`` from a few lines of Go that wait for a signal and reap
  orphans, which is all the upstream pause does): ``gpuplace.local/pause:<kubernetes version>-go``.
- A test image holding Debian's ``busybox-static`` (``/bin/busybox``, ``/bin/sh``): a web server and a
  shell for the tests of the node itself and of its faults, seconds to build:
  ``gpuplace.local/busybox:<Debian package version>``.

Each name says what it is: never an upstream image's name.
"""

from __future__ import annotations

import hashlib
import io
import json
import subprocess
import tarfile
from collections.abc import Mapping, Sequence
from pathlib import Path

PAUSE_IMAGE_REPO = "gpuplace.local/pause"
BUSYBOX_IMAGE_REPO = "gpuplace.local/busybox"
BUSYBOX = Path("/bin/busybox")


def pause_image(k8s_version: str) -> str:
    return f"{PAUSE_IMAGE_REPO}:{k8s_version}-go"


def busybox_image() -> str:
    """The test image's name, tagged with the Debian package's version (``1.35.0-4-deb12u1-b1``)."""
    result = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", "busybox-static"], capture_output=True, text=True, check=False
    )
    version = result.stdout.strip() if result.returncode == 0 else "unknown"
    tag = "".join(c if c.isalnum() or c in "._-" else "-" for c in version.split(":")[-1])
    return f"{BUSYBOX_IMAGE_REPO}:{tag}"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _add(tar: tarfile.TarFile, name: str, data: bytes, mode: int = 0o644) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    tar.addfile(info, io.BytesIO(data))


def write_image_archive(
    out: Path,
    ref: str,
    files: Mapping[str, Path],
    *,
    entrypoint: Sequence[str],
    symlinks: Mapping[str, str] | None = None,
    user: str = "65535:65535",
) -> Path:
    """A docker-archive tar at ``out``: image ``ref`` with one layer of ``files`` (path in the image →
    executable on this machine) and ``symlinks`` (path → target)."""
    layer_buf = io.BytesIO()
    with tarfile.open(fileobj=layer_buf, mode="w") as layer:
        for d in sorted({str(Path(p).parent) for p in [*files, *(symlinks or {})]} - {"."}):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            layer.addfile(info)
        info = tarfile.TarInfo("tmp")
        info.type, info.mode = tarfile.DIRTYPE, 0o1777
        layer.addfile(info)
        for path, source in files.items():
            _add(layer, path, source.read_bytes(), mode=0o755)
        for path, target in (symlinks or {}).items():
            info = tarfile.TarInfo(path)
            info.type, info.linkname = tarfile.SYMTYPE, target
            layer.addfile(info)
    layer_bytes = layer_buf.getvalue()
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": list(entrypoint), "User": user},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{_sha256(layer_bytes)}"]},
        "history": [{"created_by": f"gpuplace testenv: {ref} from {', '.join(map(str, files.values()))}"}],
    }
    config_bytes = json.dumps(config, sort_keys=True).encode()
    config_name = f"{_sha256(config_bytes)}.json"
    layer_name = f"{_sha256(layer_bytes)}/layer.tar"
    manifest = [{"Config": config_name, "RepoTags": [ref], "Layers": [layer_name]}]
    out.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(out, mode="w") as tar:
        _add(tar, config_name, config_bytes)
        _add(tar, layer_name, layer_bytes)
        _add(tar, "manifest.json", json.dumps(manifest).encode())
    return out


def pause_archive(binary: Path, out: Path, k8s_version: str) -> Path:
    return write_image_archive(out, pause_image(k8s_version), {"pause": binary}, entrypoint=["/pause"])


def busybox_archive(out: Path) -> Path:
    """The busybox test image (needs ``busybox-static``: ``make node-deps``)."""
    return write_image_archive(
        out,
        busybox_image(),
        {"bin/busybox": BUSYBOX},
        symlinks={"bin/sh": "busybox"},
        entrypoint=["/bin/sh"],
    )
