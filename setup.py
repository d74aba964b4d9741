"""Package layout only (metadata is in pyproject.toml): ``src/gpuplace`` plus the repository's
``components/`` and ``pipelines/``, which ship inside the gpuplace namespace as ``gpuplace.components``
and ``gpuplace.pipelines`` so that the wheel adds no top-level name but ``gpuplace``."""

from setuptools import find_packages, setup

EXCLUDE = ["*.tests", "*.tests.*"]
packages = find_packages("src") + [
    f"gpuplace.{p}" for p in find_packages(".", include=["components*", "pipelines*"], exclude=EXCLUDE)
]
setup(
    packages=packages,
    package_dir={"": "src", "gpuplace.components": "components", "gpuplace.pipelines": "pipelines"},
)
