"""Reading the comparison's inputs from files: deployment records, load-test reports, the plan.

Each reader names the parameter and the file in its error, so ``gpuplace compare`` and the
``compare_paths`` component fail with a message that says which input is wrong. A load test's output
may be given as its directory (``report.json`` inside) or the file itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from gpuplace.compare.metrics import FragmentationFn, PathResult
from gpuplace.errors import InvalidInput
from gpuplace.types import DeploymentRecord, Inventory
from gpuplace.types.compare import PlanFacts
from gpuplace.types.loadtest import LatencyReport

T = TypeVar("T")


def read_json(field: str, path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise InvalidInput(field, str(path), "no such file", f"Give the {what}") from None
    except IsADirectoryError:
        raise InvalidInput(field, str(path), "is a directory", f"Give the {what}") from None
    except json.JSONDecodeError as e:
        raise InvalidInput(field, str(path), f"is not JSON ({e.msg} at line {e.lineno})", "") from None


def _load_record(field: str, path: str | Path, default_name: str, what: str, parse: Callable[[Any], T]) -> T:
    """``parse`` of the JSON at ``path`` (or ``path/default_name``), errors naming ``field``."""
    p = Path(path)
    if p.is_dir():
        p = p / default_name
    data = read_json(field, p, what)
    try:
        return parse(data)
    except (TypeError, KeyError, AttributeError, ValueError) as e:
        raise InvalidInput(field, str(p), f"is not a valid {default_name} ({e})", "") from None


def load_report(field: str, path: str | Path) -> LatencyReport:
    """``report.json`` of a load test (or its output directory)."""
    return _load_record(
        field, path, "report.json", "report.json of gpuplace loadtest", LatencyReport.from_json_dict
    )


def load_deployment_record(field: str, path: str | Path) -> DeploymentRecord:
    """``deployment.json`` of a deploy step (or its directory)."""
    return _load_record(
        field, path, "deployment.json", "deployment.json of gpuplace deploy", DeploymentRecord.from_json_dict
    )


def load_path_result(path: str, deployment: str | Path, report: str | Path) -> PathResult:
    """One path's results; errors name ``<path>_deployment`` / ``<path>_report``."""
    if not str(deployment):
        raise InvalidInput(f"{path}_deployment", "", "is missing", "Give the path's deployment.json")
    if not str(report):
        raise InvalidInput(f"{path}_report", "", "is missing", "Give the path's load-test report.json")
    return PathResult(
        path=path,
        deployment=load_deployment_record(f"{path}_deployment", deployment),
        report=load_report(f"{path}_report", report),
    )


def load_plan_facts(path: str | Path) -> PlanFacts:
    """The plan facts of ``plan.json`` (a plan directory works too)."""
    return _load_record("plan", path, "plan.json", "plan.json of gpuplace plan", PlanFacts.from_json_dict)


def default_fragmentation() -> FragmentationFn:
    """The planner's FGD fragmentation of a fleet in GPUs, over its default LLM task mix."""
    from gpuplace.planner.fragmentation import DEFAULT_LLM_MIX, FragmentationModel
    from gpuplace.planner.placement import FleetState

    model = FragmentationModel(DEFAULT_LLM_MIX)

    def fgd_gpus(fleet: Inventory) -> float:
        return FleetState.of(fleet.nodes, model).fleet_fragmentation()

    return fgd_gpus
