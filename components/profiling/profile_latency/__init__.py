from gpuplace.components.profiling.profile_latency.component import profile_latency

__all__ = ["profile_latency"]
