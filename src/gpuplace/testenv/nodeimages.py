"""The images the real node runs: the docker-archives ``make images`` wrote (``images/build.sh``) and the
node's image store, containerd's root kept between nodes so an ``up`` imports only what was rebuilt.

Files only, no process: :mod:`gpuplace.testenv.realnode` imports and runs them, and the deploy paths ask
:func:`built_image_archives` which local images a pod on the real node can use.
"""

from __future__ import annotations

import os
from pathlib import Path

GPU_IMAGES = ("gpuplace-cuda", "gpuplace-vllm")  # built by `make images`, never loaded: they need a GPU


def images_cache() -> Path:
    """Where ``make images`` (images/build.sh) writes its archives: ``$GPUPLACE_IMAGES_CACHE``, else
    ``~/.cache/gpuplace/images``."""
    return Path(os.environ.get("GPUPLACE_IMAGES_CACHE") or Path.home() / ".cache" / "gpuplace" / "images")


def image_store() -> Path:
    """containerd's root for the real node: a cache beside :func:`images_cache` (one node per machine), so
    the images a node imported (the CPU image is ~13 GB unpacked) stay for the next one instead of being
    imported again (minutes) each ``up``."""
    return images_cache().parent / "node-containerd"


def needs_import(archive: Path, store: Path) -> bool:
    """Whether ``archive`` (``make images``'s, with the image id beside it in ``<name>.id``) is not yet in
    the node's image store: its id differs from the one recorded when it was last imported."""
    built = archive.with_suffix(".id")
    marker = store / "gpuplace-imported" / archive.with_suffix(".id").name
    if not built.is_file() or not marker.is_file():
        return True
    return marker.read_text().strip() != built.read_text().strip()


def built_image_archives() -> dict[str, Path]:
    """image tag → its docker-archive, for every image ``make images`` built (``<name>.tag`` + ``.tar``)."""
    found = {}
    for tag_file in sorted(images_cache().glob("*.tag")):
        archive = tag_file.with_suffix(".tar")
        if archive.is_file():
            found[tag_file.read_text().strip()] = archive
    return found
