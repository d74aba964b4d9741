"""The planner: the serving model, feasibility, fragmentation, topology-aware packing, the plan.

Pure functions of their arguments (no I/O, no torch, kubernetes or mlflow), so the same scoring serves
``gpuplace plan``, the scheduler extender and the benchmarks. :mod:`gpuplace.steps.plan` is the one
module here that reads and writes files (through :mod:`gpuplace.plandir`).
"""

from gpuplace.planner.fragmentation import DEFAULT_LLM_MIX, FragmentationModel, TaskClass, parse_mix
from gpuplace.planner.hardware import ReplicaHardware
from gpuplace.planner.local import LocalTarget, plan_local
from gpuplace.planner.request import PlanRequest
from gpuplace.planner.search import breach_cost_usd_per_month, plan_placement
from gpuplace.types.plan import NoFeasiblePlacement

__all__ = [
    "DEFAULT_LLM_MIX",
    "FragmentationModel",
    "LocalTarget",
    "NoFeasiblePlacement",
    "PlanRequest",
    "ReplicaHardware",
    "TaskClass",
    "breach_cost_usd_per_month",
    "parse_mix",
    "plan_local",
    "plan_placement",
]
