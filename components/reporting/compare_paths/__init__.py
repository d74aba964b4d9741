from gpuplace.components.reporting.compare_paths.component import compare_paths

__all__ = ["compare_paths"]
