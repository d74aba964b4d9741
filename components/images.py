"""Default base images of the components (images/README.md): re-exported from :mod:`gpuplace.images`, the one
place they are written, so that component modules import them beside ``kfp`` at their top.
"""

from gpuplace.images import COMPONENTS_IMAGE, CPU_IMAGE, CUDA_IMAGE, REGISTRY, SERVING_IMAGE

__all__ = ["COMPONENTS_IMAGE", "CPU_IMAGE", "CUDA_IMAGE", "REGISTRY", "SERVING_IMAGE"]
