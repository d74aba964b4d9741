"""The walk of ``gpuplace run``'s main job: how many files and stays a reader follows from
``jobs/main.py:run_main_job`` (issue 34 measured 26 files and 60 stays at ``879204a``, with a tool this
repository does not have).

Two static walks of this script's own, run on any commit with ``git show``, each function once, depth first:

- **config**: where the value of ``run_main_job``'s ``config`` goes: a call that passes it (a field of it,
  a name bound to it or to a field of it, a ``replace`` of it) as an argument to a gpuplace function is
  followed into that function's parameter;
- **calls**: every call that resolves to a function of gpuplace, to any depth.

A call resolves when it names a function of the same module, a name imported from a gpuplace module (at
the top or inside a function; re-exports followed), ``module.function`` through an imported module,
``self.method`` in a class, ``Class.method``, or a gpuplace class (its ``__init__``/``__post_init__``).
**files**: the distinct modules visited; **stays**: the runs of the walk in one module (it enters a
module, reads there, leaves: one stay); **rooms**: the distinct packages. Calls it cannot resolve
statically (a method on a value, a callable passed in, the pipeline the local runner runs) are not
followed, so the figures are lower bounds, comparable between commits, not with the issue's tool.
Writes docs/benchmarks/walk.{md,json}.

Run: `.venv/bin/python tests/benchmarks/bench_walk.py 879204a HEAD`.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
OUT = REPO / "docs" / "benchmarks"
START = ("gpuplace.jobs.main", "run_main_job")


@dataclass
class Module:
    name: str
    functions: dict[str, ast.AST] = field(default_factory=dict)  # "f" or "Class.method"
    imports: dict[str, tuple[str, str]] = field(default_factory=dict)  # local name -> (module, attribute)
    modules: dict[str, str] = field(default_factory=dict)  # local name -> a gpuplace module


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True).stdout


def load(commit: str) -> dict[str, Module]:
    """Every module of ``src/gpuplace`` at ``commit``, parsed."""
    out = {}
    for path in _git("ls-tree", "-r", "--name-only", commit, "src/gpuplace").split():
        if path.endswith(".py"):
            name = path.removeprefix("src/").removesuffix(".py").replace("/", ".").removesuffix(".__init__")
            out[name] = parse_module(name, _git("show", f"{commit}:{path}"), path.endswith("__init__.py"))
    return out


def parse_module(name: str, text: str, is_package: bool = False) -> Module:
    """One module's functions (methods as ``Class.method``) and the gpuplace names it imports."""
    tree = ast.parse(text)
    mod = Module(name)
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            if base.startswith("gpuplace"):
                for a in node.names:
                    mod.imports[a.asname or a.name] = (base, a.name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("gpuplace") and a.asname:
                    mod.modules[a.asname] = a.name
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            mod.functions[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    mod.functions[f"{node.name}.{item.name}"] = item
    return mod


def _target(mods: dict[str, Module], module: str, attr: str) -> tuple[str, str] | None:
    """Where ``attr`` of ``module`` is defined: a function, a class's constructor, or a re-export."""
    for _ in range(5):  # follow re-exports (a package's __init__ importing from its modules)
        mod = mods.get(module)
        if mod is None:
            return None
        if attr in mod.functions:
            return module, attr
        for init in ("__init__", "__post_init__"):
            if f"{attr}.{init}" in mod.functions:
                return module, f"{attr}.{init}"
        if attr in mod.imports:
            module, attr = mod.imports[attr]
            continue
        if f"{module}.{attr}" in mods:  # a submodule: not a call
            return None
        return None
    return None


def calls(mods: dict[str, Module], module: str, func: str) -> list[tuple[str, str]]:
    """The gpuplace functions ``func`` of ``module`` calls, in the order they are written."""
    found = (resolve(mods, module, func, n) for n in ast.walk(mods[module].functions[func]))
    return [t for t in found if t is not None]


def resolve(mods: dict[str, Module], module: str, func: str, node: ast.AST) -> tuple[str, str] | None:
    """The gpuplace function a call in ``func`` of ``module`` resolves to (None: not a call, or not
    resolved statically)."""
    if not isinstance(node, ast.Call):
        return None
    mod, f = mods[module], node.func
    cls = func.split(".")[0] if "." in func else ""
    if isinstance(f, ast.Name):
        if f.id in mod.functions:
            return module, f.id
        if f.id in mod.imports:
            return _target(mods, *mod.imports[f.id])
        return _target(mods, module, f.id)  # a class of this module
    if not (isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)):
        return None
    owner, method = f.value.id, f.attr
    if owner in ("self", "cls") and cls:
        return (module, f"{cls}.{method}") if f"{cls}.{method}" in mod.functions else None
    if owner in mod.modules:
        return _target(mods, mod.modules[owner], method)
    if owner in mod.imports:
        base, name = mod.imports[owner]
        if f"{base}.{name}" in mods:  # `from gpuplace.x import y` where y is a module
            return _target(mods, f"{base}.{name}", method)
        return _target(mods, base, f"{name}.{method}")  # Class.method of an imported class
    if f"{owner}.{method}" in mod.functions:  # Class.method of this module
        return module, f"{owner}.{method}"
    return None


def _params(node: ast.AST) -> list[str]:
    args = node.args  # type: ignore[attr-defined]
    return [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]


def _carries(expr: ast.AST, names: set[str]) -> bool:
    """Whether ``expr`` is one of ``names``, a field of one, or a call/replace of one (the value flows on)."""
    if isinstance(expr, ast.Name):
        return expr.id in names
    if isinstance(expr, ast.Attribute):
        return _carries(expr.value, names)
    if isinstance(expr, ast.Call) and getattr(expr.func, "id", "") in ("replace", "dataclasses.replace"):
        return any(_carries(a, names) for a in expr.args)
    return False


def flow(mods: dict[str, Module], start: tuple[str, str, str]) -> list[tuple[str, str]]:
    """The functions the value of ``start``'s parameter reaches, depth first, each (function, parameter)
    once: a name bound to it (or to a field of it) in the function, passed as an argument to a gpuplace
    function, carries it into that function's parameter."""
    seen: set[tuple[str, str, str]] = set()
    order: list[tuple[str, str]] = []
    stack = [start]
    while stack:
        module, func, param = stack.pop()
        if (module, func, param) in seen or module not in mods or func not in mods[module].functions:
            continue
        seen.add((module, func, param))
        order.append((module, func))
        node = mods[module].functions[func]
        names = {param}
        for sub in ast.walk(node):  # names bound to the value or a field of it
            if isinstance(sub, ast.Assign) and _carries(sub.value, names):
                names |= {t.id for t in sub.targets if isinstance(t, ast.Name)}
        found = []
        for sub in ast.walk(node):
            target = resolve(mods, module, func, sub)
            if target is None or not isinstance(sub, ast.Call):
                continue
            tm, tf = target
            params = _params(mods[tm].functions[tf])
            if params[:1] in (["self"], ["cls"]):
                params = params[1:]
            for i, a in enumerate(sub.args):
                if _carries(a, names) and i < len(params):
                    found.append((tm, tf, params[i]))
            for k in sub.keywords:
                if k.arg and _carries(k.value, names) and k.arg in params:
                    found.append((tm, tf, k.arg))
        stack.extend(reversed(found))
    return order


def walk(mods: dict[str, Module]) -> list[tuple[str, str]]:
    """The functions visited from :data:`START`, depth first, each once."""
    seen: set[tuple[str, str]] = set()
    order: list[tuple[str, str]] = []
    stack = [START]
    while stack:
        here = stack.pop()
        if here in seen or here[0] not in mods or here[1] not in mods[here[0]].functions:
            continue
        seen.add(here)
        order.append(here)
        stack.extend(reversed(calls(mods, *here)))
    return order


def count_stays(order: list[tuple[str, str]]) -> int:
    """The runs of the walk in one module: each time it enters a module other than the one it was in."""
    return sum(1 for i, (m, _) in enumerate(order) if i == 0 or order[i - 1][0] != m)


def measure(commit: str, how: str) -> dict[str, object]:
    mods = load(commit)
    order = walk(mods) if how == "calls" else flow(mods, (*START, "config"))
    stays = count_stays(order)
    files = sorted({m for m, _ in order})
    rooms = sorted({m.split(".")[1] for m in files})
    return {
        "commit": _git("rev-parse", "--short", commit).strip(),
        "walk": how,
        "functions": len(order),
        "files": len(files),
        "stays": stays,
        "rooms": len(rooms),
        "room_names": rooms,
        "file_names": files,
    }


def markdown(data: dict[str, Any]) -> str:
    rows = data["rows"]
    lines = [
        "# The walk of `gpuplace run`'s main job",
        "",
        f"Produced by `.venv/bin/python tests/benchmarks/bench_walk.py {' '.join(data['asked'])}` on "
        f"{data['date']}. Two static walks from `jobs/main.py:run_main_job`, each function once, depth "
        "first (the script's docstring says what they follow):",
        "",
        "- **config**: where the value of its `config` goes: the functions it (a field of it, a name bound "
        "to it, a `replace` of it) is passed to as an argument, and on from their parameter;",
        "- **calls**: every call that resolves to a gpuplace function, to any depth.",
        "",
        "Files: the distinct modules visited; stays: the runs of the walk in one module; rooms: the distinct "
        "packages. Both are lower bounds of what a reader follows (a method on a value, a callable passed "
        "in, the pipeline the local runner runs: not followed), comparable between commits. **Neither "
        "reproduces issue 34's 26 files / 60 stays at `879204a`**, which came from a tool this repository "
        "does not have, so the issue's goal is not judged by them.",
        "",
        "| walk | commit | functions | files | stays | rooms |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['walk']} | `{r['commit']}` | {r['functions']} | {r['files']} | {r['stays']} | {r['rooms']} |"
        for r in rows
    ]
    last = {r["walk"]: r for r in rows}
    lines += [""] + [
        f"Rooms of the {w} walk at `{r['commit']}`: {', '.join(r['room_names'])}." for w, r in last.items()
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "commits", nargs="*", default=["879204a", "HEAD"], help="commits to measure (default: 879204a HEAD)"
    )
    args = parser.parse_args()
    rows = [measure(c, how) for how in ("config", "calls") for c in args.commits]
    for r in rows:
        print(
            f"{r['walk']} {r['commit']}: {r['functions']} functions, {r['files']} files, {r['stays']} stays, "
            f"{r['rooms']} rooms",
            file=sys.stderr,
        )
    data = {"date": datetime.date.today().isoformat(), "asked": args.commits, "rows": rows}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "walk.json").write_text(json.dumps(data, indent=2) + "\n")
    (OUT / "walk.md").write_text(markdown(data))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
