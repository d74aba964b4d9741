"""The planner: latency prediction, feasibility, fragmentation, topology-aware packing, the plan.

Pure functions of their arguments (no I/O, no torch, kubernetes or mlflow), so the same scoring serves
``gpuplace plan``, the scheduler extender and the benchmarks. :mod:`gpuplace.planner.step` is the one
module here that reads and writes files (through :mod:`gpuplace.plandir`).
"""

from gpuplace.planner.fragmentation import DEFAULT_LLM_MIX, FragmentationModel, TaskClass, parse_mix
from gpuplace.planner.latency import Calibration, Shape, calibrate, predict
from gpuplace.planner.request import PlanRequest
from gpuplace.planner.search import breach_cost_usd_per_month, plan_placement
from gpuplace.types.plan import NoFeasiblePlacement

__all__ = [
    "DEFAULT_LLM_MIX",
    "Calibration",
    "FragmentationModel",
    "NoFeasiblePlacement",
    "PlanRequest",
    "Shape",
    "TaskClass",
    "breach_cost_usd_per_month",
    "calibrate",
    "parse_mix",
    "plan_placement",
    "predict",
]
