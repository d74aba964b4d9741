from gpuplace.components.placement.plan_placement.component import plan_placement

__all__ = ["plan_placement"]
