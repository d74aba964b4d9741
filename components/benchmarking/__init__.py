from gpuplace.components.benchmarking.load_test.component import load_test

__all__ = ["load_test"]
