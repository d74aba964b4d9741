"""The component images, checked statically (no Docker engine here): parsed with dockerfile-parse,
COPY sources exist, bases are pinned, the user is not root, and the tags the components use match
the package version."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from dockerfile_parse import DockerfileParser

import gpuplace
from gpuplace.components.images import COMPONENTS_IMAGE, CPU_IMAGE, CUDA_IMAGE, SERVING_IMAGE

REPO = Path(__file__).resolve().parents[2]
DOCKERFILES = sorted((REPO / "images").glob("Dockerfile.*"))


def _parse(path: Path) -> DockerfileParser:
    return DockerfileParser(fileobj=io.BytesIO(path.read_bytes()))


def test_both_images_exist() -> None:
    assert [p.name for p in DOCKERFILES] == [
        "Dockerfile.components",
        "Dockerfile.cpu",
        "Dockerfile.cuda",
        "Dockerfile.vllm",
    ]


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_base_image_is_pinned(path: Path) -> None:
    base = _parse(path).baseimage
    assert base and ":" in base and not base.endswith(":latest"), base
    pinned = re.search(r":v?\d+\.\d+", base) or "@sha256:" in base
    assert pinned, f"{path.name}: pin {base} to a version or digest"


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_copy_sources_exist_in_the_build_context(path: Path) -> None:
    copies = [i for i in _parse(path).structure if i["instruction"] == "COPY"]
    assert copies
    for instruction in copies:
        *sources, _dest = instruction["value"].split()
        for src in sources:
            assert (REPO / src).exists(), f"{path.name}: COPY {src} is not in the repository"


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_runs_as_non_root(path: Path) -> None:
    users = [i["value"].strip() for i in _parse(path).structure if i["instruction"] == "USER"]
    assert users and users[-1] not in ("root", "0"), f"{path.name}: last USER is {users}"


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: p.name)
def test_installs_gpuplace_from_the_source_tree_with_the_lock(path: Path) -> None:
    runs = [
        i["value"]
        for i in _parse(path).structure
        if i["instruction"] == "RUN" and "pip install" in i["value"]
    ]
    assert any(re.search(r"pip install .*\"?\.\[", r) for r in runs), f"{path.name}: install the source tree"
    assert all("-c " in r and "constraints.txt" in r for r in runs), (
        f"{path.name}: every pip install is locked"
    )


def test_component_image_tags_match_the_package_version() -> None:
    version = gpuplace.__version__.split("+")[0]
    for image in (COMPONENTS_IMAGE, CPU_IMAGE, CUDA_IMAGE, SERVING_IMAGE):
        assert image.endswith(f":{version}")
    readme = (REPO / "images" / "README.md").read_text()
    for path in DOCKERFILES:
        header = path.read_text().splitlines()[1]
        tag = re.search(r"-t (\S+)", header)
        assert tag and tag.group(1) in (COMPONENTS_IMAGE, CPU_IMAGE, CUDA_IMAGE, SERVING_IMAGE), (
            f"{path.name}: build command tags {tag}"
        )
        assert tag.group(1) in readme


def test_the_torch_layer_pins_torch_as_the_lock_does() -> None:
    """The torch layer takes torch's pin as a build argument (make images passes constraints.txt's line),
    so another change to constraints.txt does not rebuild its ~6 GB; the default for a plain
    ``docker build`` must still be the lock's pin."""
    (pin,) = [
        line for line in (REPO / "constraints.txt").read_text().splitlines() if line.startswith("torch==")
    ]
    for name in ("cpu", "cuda"):
        text = (REPO / "images" / f"Dockerfile.{name}").read_text()
        assert f"ARG TORCH_REQUIREMENT={pin}\n" in text, name
    assert "TORCH_REQUIREMENT=$TORCH_REQUIREMENT" in (REPO / "images" / "build.sh").read_text()
