"""The fragmentation the comparison measures a fleet with: the planner's FGD score over its default LLM
task mix, in GPUs (:data:`~gpuplace.compare.metrics.FragmentationFn`)."""

from __future__ import annotations

from gpuplace.compare.metrics import FragmentationFn
from gpuplace.types import Inventory


def default_fragmentation() -> FragmentationFn:
    """The planner's FGD fragmentation of a fleet in GPUs, over its default LLM task mix."""
    from gpuplace.planner.fragmentation import DEFAULT_LLM_MIX, FragmentationModel
    from gpuplace.planner.placement import FleetState

    model = FragmentationModel(DEFAULT_LLM_MIX)

    def fgd_gpus(fleet: Inventory) -> float:
        return FleetState.of(fleet.nodes, model).fleet_fragmentation()

    return fgd_gpus
