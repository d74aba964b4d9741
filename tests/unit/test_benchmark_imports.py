"""The benchmarks and the GPU check are not run by `make test` (they are slow, or need a GPU), so nothing
else notices when a refactor moves what they import: `make bench` then dies on a device-time budget or
a reviewer's machine. This test resolves every `from gpuplace... import` / `from tests... import` in
them, at module level and inside functions, against the code as it is."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = sorted([*(REPO / "tests" / "benchmarks").glob("*.py"), *(REPO / "tests" / "gpu").glob("*.py")])


def unresolved_imports(path: Path) -> list[str]:
    """``module.name`` for each project import in ``path`` that does not resolve."""
    missing: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
            continue
        if node.module.split(".")[0] not in ("gpuplace", "tests"):
            continue
        try:
            module = importlib.import_module(node.module)
        except ImportError as e:
            missing.append(f"line {node.lineno}: {node.module} ({e})")
            continue
        for alias in node.names:
            if hasattr(module, alias.name):
                continue
            try:
                importlib.import_module(f"{node.module}.{alias.name}")
            except ImportError:
                missing.append(f"line {node.lineno}: {node.module}.{alias.name}")
    return missing


def test_the_check_finds_a_stale_import(tmp_path: Path) -> None:
    stale = tmp_path / "bench_stale.py"
    stale.write_text(
        "def f():\n"
        "    from gpuplace.planner.latency import Shape\n"
        "    from gpuplace.planner import nothing_here\n"
    )
    assert unresolved_imports(stale) == [
        "line 2: gpuplace.planner.latency (No module named 'gpuplace.planner.latency')",
        "line 3: gpuplace.planner.nothing_here",
    ]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_project_import_of_a_benchmark_resolves(script: Path) -> None:
    assert not unresolved_imports(script), f"{script.relative_to(REPO)}: {unresolved_imports(script)}"
