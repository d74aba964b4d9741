"""Every component folder follows kubeflow/pipelines-components (KEP-913): component.py, metadata.yaml
with the validated fields, README.md, and metadata that says what the component really takes."""

from __future__ import annotations

import datetime as dt
import importlib
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
FOLDERS = sorted(p.parent for p in (REPO / "components").glob("*/*/component.py"))


def test_there_are_components() -> None:
    assert len(FOLDERS) >= 9


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_metadata_and_readme(folder: Path) -> None:
    assert (folder / "README.md").is_file(), f"{folder} has no README.md"
    meta = yaml.safe_load((folder / "metadata.yaml").read_text())
    assert meta["name"] == folder.name and meta["category"] == folder.parent.name
    assert meta["tier"] in ("core", "third_party") and meta["stability"] in ("alpha", "beta", "stable")
    assert any(d["name"] == "Pipelines" for d in meta["dependencies"]["kubeflow"])
    verified = meta["lastVerified"]
    verified = verified if isinstance(verified, dt.datetime) else dt.datetime.fromisoformat(str(verified))
    age = dt.datetime.now(dt.UTC) - verified.replace(tzinfo=verified.tzinfo or dt.UTC)
    assert dt.timedelta(0) <= age <= dt.timedelta(days=365), (
        f"{folder.name}: lastVerified is stale: re-verify"
    )
    assert (REPO / meta["links"]["documentation"]).is_file()
    module = importlib.import_module(f"gpuplace.components.{folder.parent.name}.{folder.name}")
    component = getattr(module, folder.name)
    spec = component.component_spec
    assert set(meta["inputs"]) == set(spec.inputs or {}), f"{folder.name}: metadata inputs drifted"
    assert set(meta["outputs"]) == set(spec.outputs or {}), f"{folder.name}: metadata outputs drifted"


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_component_is_a_thin_adapter(folder: Path) -> None:
    """Read inputs, call the library, write outputs: 30 lines of body at most, heavy imports inside."""
    import ast

    tree = ast.parse((folder / "component.py").read_text())
    top = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    allowed = ("kfp", "typing", "gpuplace.components.images", "__future__")
    for node in top:
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        assert all(n.split(".")[0] in ("kfp", "typing", "__future__") or n in allowed for n in names), names
    (function,) = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    body = function.body[1:] if isinstance(function.body[0], ast.Expr) else function.body  # the docstring
    lines = body[-1].end_lineno - body[0].lineno + 1  # type: ignore[operator]
    assert lines <= 30, f"{folder.name}: the component's body is {lines} lines"


def test_the_fit_threshold_has_one_default() -> None:
    """The plan_placement component spells its default in its signature (only kfp at its top); it, the
    CLI's and the library's are the one DEFAULT_FIT_THRESHOLD."""
    import inspect

    from gpuplace.cli import build_parser
    from gpuplace.components.placement.plan_placement import plan_placement
    from gpuplace.planner.request import PlanRequest
    from gpuplace.types.plan import DEFAULT_FIT_THRESHOLD

    signature = inspect.signature(plan_placement.python_func)
    assert signature.parameters["fit_threshold"].default == DEFAULT_FIT_THRESHOLD
    flags = ["--model", "tiny", "--slo-tpot-ms", "50", "--slo-ttft-ms", "2000", "--rate", "1", "--out", "p"]
    args = build_parser().parse_args(["plan", *flags])
    assert args.fit_threshold == DEFAULT_FIT_THRESHOLD
    assert PlanRequest.__dataclass_fields__["fit_threshold"].default == DEFAULT_FIT_THRESHOLD
