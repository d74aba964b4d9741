from gpuplace.components.serving.deploy_inference.component import deploy_inference

__all__ = ["deploy_inference"]
