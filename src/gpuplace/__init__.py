"""gpuplace: measure, plan, deploy and compare LLM inference placement on Kubernetes GPUs."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("gpuplace")
except PackageNotFoundError:  # running from a source tree (e.g. PYTHONPATH=src on a GPU box)
    __version__ = "0.1.0+src"
