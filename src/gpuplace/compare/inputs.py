"""The comparison's inputs, read through the modules that own each file.

Deployment records come from :func:`gpuplace.deploy.read_record`, load-test reports from
:func:`gpuplace.loadtest.io.read_report`, the plan from :func:`gpuplace.plandir.read_plan_dir`; each
error names the parameter (``native_deployment``, ``kubeflow_report``, ...) so ``gpuplace compare`` and
the ``compare_paths`` component say which input is wrong.
"""

from __future__ import annotations

from pathlib import Path

from gpuplace.compare.metrics import FragmentationFn, PathResult
from gpuplace.deploy import read_record
from gpuplace.errors import InvalidInput
from gpuplace.loadtest.io import read_report
from gpuplace.types import Inventory


def load_path_result(path: str, deployment: str | Path, report: str | Path) -> PathResult:
    """One path's results; errors name ``<path>_deployment`` / ``<path>_report``."""
    if not str(deployment):
        raise InvalidInput(f"{path}_deployment", "", "is missing", "Give the path's deployment.json")
    if not str(report):
        raise InvalidInput(f"{path}_report", "", "is missing", "Give the path's load-test report.json")
    return PathResult(
        path=path,
        deployment=read_record(deployment, f"{path}_deployment"),
        report=read_report(report, f"{path}_report"),
    )


def default_fragmentation() -> FragmentationFn:
    """The planner's FGD fragmentation of a fleet in GPUs, over its default LLM task mix."""
    from gpuplace.planner.fragmentation import DEFAULT_LLM_MIX, FragmentationModel
    from gpuplace.planner.placement import FleetState

    model = FragmentationModel(DEFAULT_LLM_MIX)

    def fgd_gpus(fleet: Inventory) -> float:
        return FleetState.of(fleet.nodes, model).fleet_fragmentation()

    return fgd_gpus
