"""The layering docs/architecture.md promises, checked on the source: no import circle between rooms,
heavy libraries only in the rooms that own them, one reader of plan.json, and no oversized module.

Imports inside functions count too: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "gpuplace"
MAX_LINES = 500


def _modules() -> dict[str, Path]:
    out = {}
    for p in SRC.rglob("*.py"):
        parts = p.relative_to(SRC.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def _room(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else module


def test_no_import_circle_between_rooms() -> None:
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in _modules().items():
        for imported in _imports(path):
            if imported.startswith("gpuplace.") and _room(imported) != _room(name):
                graph[_room(name)].add(_room(imported))
    graph.pop("gpuplace", None)
    for edges in graph.values():
        edges.discard("gpuplace")  # the package root holds only the version

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(
            n == goal or (n not in seen and reaches(n, goal, seen | {n})) for n in graph.get(start, ())
        )

    circles = sorted(f"{a} ↔ {b}" for a in graph for b in graph[a] if reaches(b, a, {b}))
    assert not circles, circles


def _importers(prefix: str) -> set[str]:
    return {
        name
        for name, path in _modules().items()
        if any(i == prefix or i.startswith(prefix + ".") for i in _imports(path))
    }


def test_heavy_libraries_stay_in_their_rooms() -> None:
    assert {_room(m) for m in _importers("kubernetes")} <= {"gpuplace.k8s"}
    assert {_room(m) for m in _importers("mlflow")} <= {"gpuplace.tracking"}
    assert {_room(m) for m in _importers("kfp") | _importers("gpuplace.pipelines")} <= {"gpuplace.jobs"}
    pure = [m for m in _modules() if _room(m) in ("gpuplace.planner", "gpuplace.manifests", "gpuplace.types")]
    pure = [m for m in pure if not m.endswith((".step", ".fragbench"))]
    for heavy in ("torch", "kubernetes", "mlflow", "aiohttp", "urllib.request", "requests"):
        offenders = sorted(set(pure) & _importers(heavy))
        assert not offenders, f"{heavy} imported by pure modules {offenders}"


def test_plan_json_has_one_reader() -> None:
    readers = []
    for name, path in _modules().items():
        text = path.read_text()
        if (
            ("plan.json" in text or "PLAN_FILE" in text)
            and "json.loads" in text
            and name != "gpuplace.plandir"
        ):
            readers.append(name)
    assert not readers, f"plan.json is read outside gpuplace.plandir: {readers}"


def test_no_module_over_the_size_limit() -> None:
    big = {name: n for name, p in _modules().items() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not big, f"modules over {MAX_LINES} lines: {big}"
