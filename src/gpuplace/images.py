"""Default images of the components and the serving pods, tagged with the gpuplace version
(images/README.md): the one place their names are written.

Standard library only: ``components/images.py`` re-exports these for the component modules, which import
them at their top (KFP compiles the tags into the pipeline YAML), and the plan step names the image a plan
for this machine runs in, which must work from the source tree on a bare GPU machine, where
``gpuplace.components`` (mapped from the repository root by setup.py) does not exist.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    _VERSION = version("gpuplace").split("+")[0]
except PackageNotFoundError:  # compiling from a source tree without an install
    _VERSION = "0.1.0"

REGISTRY = "ghcr.io/gpuplace"
CPU_IMAGE = f"{REGISTRY}/gpuplace-cpu:{_VERSION}"
# Without torch: the components that never import it (images/Dockerfile.components).
COMPONENTS_IMAGE = f"{REGISTRY}/gpuplace-components:{_VERSION}"
CUDA_IMAGE = f"{REGISTRY}/gpuplace-cuda:{_VERSION}"
# vLLM's OpenAI server image with gpuplace added: the Kubeflow path's serving task runs in it, and the
# orchestration_comparison pipeline plans the native path's pods in it too, so both paths run one image.
SERVING_IMAGE = f"{REGISTRY}/gpuplace-vllm:{_VERSION}"
