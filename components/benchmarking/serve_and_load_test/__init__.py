from gpuplace.components.benchmarking.serve_and_load_test.component import serve_and_load_test

__all__ = ["serve_and_load_test"]
