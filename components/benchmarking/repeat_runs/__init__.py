from gpuplace.components.benchmarking.repeat_runs.component import repeat_runs

__all__ = ["repeat_runs"]
