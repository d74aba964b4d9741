"""The images the real node runs: the ones ``make images`` built into buildah's storage and recorded
(``<name>.tag`` + ``<name>.id`` in :func:`images_cache`, ``images/build.sh``), and the node's image store,
containerd's root kept between nodes so an ``up`` imports only what was rebuilt.

An image goes from buildah into containerd as a stream (``buildah push ... docker-archive:/dev/stdout | ctr
images import -``), never as an archive on disk, and the layer blobs containerd keeps after unpacking are
dropped (:func:`drop_layer_blobs`): a container runs from the unpacked snapshots, and the archive and blobs
of the CPU image alone took 13 GB, on a disk a CI run filled (docs/development.md#disk).

:mod:`gpuplace.testenv.realnode` starts the node and calls :func:`stream_import`; the deploy paths ask
:func:`built_images` which local images a pod on the real node can use.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

GPU_IMAGES = ("gpuplace-cuda", "gpuplace-vllm")  # built by `make images`, never loaded: they need a GPU


class ImageImportError(RuntimeError):
    """An image could not be taken from buildah's storage into the node's containerd."""


def images_cache() -> Path:
    """Where ``make images`` (images/build.sh) records what it built: ``$GPUPLACE_IMAGES_CACHE``, else
    ``~/.cache/gpuplace/images``."""
    return Path(os.environ.get("GPUPLACE_IMAGES_CACHE") or Path.home() / ".cache" / "gpuplace" / "images")


def image_store() -> Path:
    """containerd's root for the real node: a cache beside :func:`images_cache` (one node per machine), so
    the images a node imported (the CPU image is ~7 GB unpacked) stay for the next one instead of being
    imported again (minutes) each ``up``."""
    return images_cache().parent / "node-containerd"


def needs_import(build_id: Path, store: Path) -> bool:
    """Whether the build recorded in ``build_id`` (``<name>.id``: buildah's image id) is not yet in the
    node's image store: its id differs from the one recorded when it was last imported."""
    marker = store / "gpuplace-imported" / build_id.name
    if not build_id.is_file() or not marker.is_file():
        return True
    return marker.read_text().strip() != build_id.read_text().strip()


def mark_imported(build_id: Path, store: Path) -> None:
    """Record in the store that the build in ``build_id`` is imported (what :func:`needs_import` reads)."""
    marker = store / "gpuplace-imported" / build_id.name
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(build_id.read_text())


def built_images() -> dict[str, Path]:
    """image tag → its build record (``<name>.id``), for every image ``make images`` built for this node
    (the CUDA and vLLM images get no record: they cannot run without a GPU)."""
    found = {}
    for tag_file in sorted(images_cache().glob("*.tag")):
        build_id = tag_file.with_suffix(".id")
        if build_id.is_file():
            found[tag_file.read_text().strip()] = build_id
    return found


def layer_digests(manifest: str) -> list[str]:
    """The layer digests of an image manifest (JSON, Docker v2 or OCI)."""
    return [str(layer["digest"]) for layer in json.loads(manifest).get("layers", [])]


def stream_import(ctr: Sequence[str], tag: str, *, env: dict[str, str], timeout_s: float = 900.0) -> None:
    """Push ``tag`` from buildah's storage into the containerd that the ``ctr`` command line (address and
    namespace included) talks to, through a pipe: no archive is written."""
    push = subprocess.Popen(
        ["buildah", "push", "--quiet", tag, f"docker-archive:/dev/stdout:{tag}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        load = subprocess.run(
            [*ctr, "images", "import", "-"],
            stdin=push.stdout,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=env,
        )
    finally:
        assert push.stdout is not None
        push.stdout.close()
        push_err = push.communicate(timeout=60)[1].decode(errors="replace").strip()
    if push.returncode != 0:
        raise ImageImportError(
            f"buildah push {tag} failed ({push.returncode}): {push_err}. The node imports what `make "
            "test-images` built into buildah's storage: run it again"
        )
    if load.returncode != 0:
        raise ImageImportError(
            f"ctr images import of {tag} failed ({load.returncode}): {load.stderr.strip()}"
        )


def import_image(ctr: Sequence[str], tag: str, *, env: dict[str, str]) -> None:
    """Stream ``tag`` into the node's containerd and drop its layer blobs, retrying once when containerd
    lost a parent snapshot mid-import: re-importing a rebuilt image untags the old one, and containerd's
    garbage collection can remove the snapshot the new layers were about to be unpacked on (seen in a CI
    run: "parent snapshot ... does not exist: not found"; the next import of the same stream succeeded)."""
    try:
        stream_import(ctr, tag, env=env)
    except ImageImportError as e:
        if "snapshot" not in str(e) or "not found" not in str(e):
            raise
        stream_import(ctr, tag, env=env)
    drop_layer_blobs(ctr, tag, env=env)


def drop_layer_blobs(ctr: Sequence[str], tag: str, *, env: dict[str, str]) -> int:
    """Delete the layer blobs containerd keeps of ``tag`` once it is unpacked (what containerd's own
    ``discard_unpacked_layers`` does for pulled images): containers run from the snapshots, and the manifest
    and config stay, so the image is still listed and started. The next garbage collection frees the space;
    how many blobs were dropped."""

    def run(*args: str) -> str:
        result = subprocess.run([*ctr, *args], capture_output=True, text=True, timeout=120, env=env)
        if result.returncode != 0:
            raise ImageImportError(
                f"ctr {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}"
            )
        return result.stdout

    rows = [line.split() for line in run("images", "ls").splitlines()[1:]]
    digest = next((row[2] for row in rows if len(row) > 2 and row[0] == tag), "")
    if not digest:
        raise ImageImportError(f"{tag} is not in the node's containerd after its import")
    layers = layer_digests(run("content", "get", digest))
    if layers:
        run("content", "rm", *layers)
    return len(layers)
