from gpuplace.components.serving.teardown_inference.component import teardown_inference

__all__ = ["teardown_inference"]
