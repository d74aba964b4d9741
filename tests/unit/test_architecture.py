"""The layering docs/architecture.md promises, checked on the source: every room imports only what the
doc's may-import table allows (the table is parsed from the doc, so the two cannot drift), no import circle
between rooms, heavy libraries only in the rooms that own them, one reader of plan.json, and no oversized
module.

Imports inside functions count too: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SRC = REPO / "src" / "gpuplace"
DOC = REPO / "docs" / "architecture.md"
MAX_LINES = 500
# Always importable: the package root holds only the version.
ROOT = {"gpuplace", "gpuplace.__version__"}


def _modules() -> dict[str, Path]:
    out = {}
    for p in SRC.rglob("*.py"):
        parts = p.relative_to(SRC.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    return out


def _mapped_modules() -> dict[str, Path]:
    """components/ and pipelines/ under the names setup.py's package_dir gives them in the wheel
    (``gpuplace.components.…``, ``gpuplace.pipelines.…``), their tests left out as the wheel leaves them."""
    out = {}
    for folder in ("components", "pipelines"):
        for p in (REPO / folder).rglob("*.py"):
            parts = ("gpuplace", *p.relative_to(REPO).with_suffix("").parts)
            if "tests" not in parts:
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


def _write_modules(tmp_path: Path, files: dict[str, str]) -> dict[str, Path]:
    """Fabricated modules for a check's negative case: dotted name → a file holding its text."""
    modules = {}
    for name, text in files.items():
        modules[name] = tmp_path / f"{name}.py"
        modules[name].write_text(text)
    return modules


def _room(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else module


# --- the may-import table of docs/architecture.md ---------------------------------------------------


@dataclass
class Row:
    """One row of the table: its layer, its rooms, the rooms it names, and per-module additions."""

    layer: int
    rooms: tuple[str, ...]
    named: set[str]
    below: bool = False  # "everything below"
    layers: set[int] = field(default_factory=set)  # "layer N"
    modules: dict[str, set[str]] = field(default_factory=dict)  # "`step.py` also `x`, `y`"


def _name(ticked: str) -> str:
    """`types/` → gpuplace.types; `errors` → gpuplace.errors; `gpuplace.pipelines` stays."""
    ticked = ticked.rstrip("/")
    return ticked if ticked.startswith("gpuplace.") else f"gpuplace.{ticked}"


def parse_table(text: str) -> list[Row]:
    """The rows of the table under '## The rooms, bottom up' (layer | room | owns | may import)."""
    section = text.split("## The rooms, bottom up", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not cells[0].isdigit():
            continue  # the header, its rule, and the prose around the table
        layer, rooms, _, may = cells
        parts = may.split(";")
        row = Row(int(layer), tuple(_name(n) for n in re.findall(r"`([^`]+)`", rooms)), set())
        row.below = "everything below" in parts[0]
        row.layers = {int(n) for n in re.findall(r"layer (\d+)", parts[0])}
        row.named = {_name(n) for n in re.findall(r"`([^`]+)`", parts[0])}
        for part in parts[1:]:
            who, _, what = part.partition(" also ")
            assert what, f"layer {layer}: a ';' part must read '`module.py` also `room`, ...': {part!r}"
            for module in re.findall(r"`([^`]+)\.py`", who):
                row.modules[module] = {_name(n) for n in re.findall(r"`([^`]+)`", what)}
        rows.append(row)
    return rows


class Map:
    """What each room (and module) may import under the table: the rooms it names, and what those may."""

    def __init__(self, rows: list[Row]) -> None:
        self.rows = rows
        self.row_of = {room: r for r in rows for room in r.rooms}
        self._closure: dict[str, set[str]] = {}

    def named(self, row: Row) -> set[str]:
        rooms = set(row.named)
        rooms |= {room for r in self.rows if (row.below and r.layer < row.layer) or r.layer in row.layers
                  for room in r.rooms}  # fmt: skip
        return rooms

    def closure(self, rooms: Iterable[str]) -> set[str]:
        out: set[str] = set()
        for room in rooms:
            if room not in self._closure:
                self._closure[room] = (
                    set()
                )  # a circle in the doc stops here; test_the_table_is_layered says so
                row = self.row_of.get(room)
                self._closure[room] = {room} | (self.closure(self.named(row)) if row else set())
            out |= self._closure[room]
        return out

    def allowed(self, module: str) -> set[str]:
        row = self.row_of[_room(module)]
        extra = row.modules.get(module.rsplit(".", 1)[-1], set())
        return {_room(module)} | self.closure(self.named(row) | extra)


def violations(table: Map, modules: dict[str, Path]) -> list[str]:
    """'module imports room' for each import the table does not allow, and each room without a row."""
    out = []
    for name, path in sorted(modules.items()):
        if name in ROOT:
            continue
        if _room(name) not in table.row_of:
            out.append(f"{name}: room {_room(name)} has no row in the table")
            continue
        rooms = {_room(i) for i in _imports(path) if i.startswith("gpuplace.") and i not in ROOT}
        out += [f"{name} imports {room}" for room in sorted(rooms - table.allowed(name))]
    return out


def test_every_room_imports_only_what_the_table_allows() -> None:
    table = Map(parse_table(DOC.read_text()))
    bad = violations(table, _modules())
    assert not bad, "imports docs/architecture.md's table does not allow:\n" + "\n".join(bad)


def test_the_table_is_layered_and_names_only_rooms_that_exist() -> None:
    rows = parse_table(DOC.read_text())
    table = Map(rows)
    assert len(rows) >= 20 and len(table.row_of) == sum(len(r.rooms) for r in rows)  # each room once
    existing = {_room(m) for m in _modules()}
    assert set(table.row_of) - existing == set(), "rows for rooms that do not exist"
    for row in rows:
        for room in row.named | {r for extra in row.modules.values() for r in extra}:
            if room in table.row_of:  # a room names only rooms of lower layers: no circle in the doc
                assert table.row_of[room].layer < row.layer, f"{row.rooms} (layer {row.layer}) names {room}"
            else:  # outside src/: the wheel maps pipelines/ and components/ into the namespace
                assert room in ("gpuplace.pipelines", "gpuplace.components"), f"{row.rooms} names {room}"
        for module in row.modules:
            assert any((SRC / r.removeprefix("gpuplace.") / f"{module}.py").is_file() for r in row.rooms), (
                module
            )


def test_the_table_check_catches_an_edge_the_table_does_not_allow(tmp_path: Path) -> None:
    doc = """## The rooms, bottom up
| layer | room | owns | may import |
|---|---|---|---|
| 0 | `errors` | errors | standard library |
| 1 | `types/` | types | layer 0 |
| 2 | `planner/` | planning | `types`; `step.py` also `k8s` |
| 3 | `k8s/` | the API | `types` |
| 4 | `cli/` | commands | everything below |
"""
    table = Map(parse_table(doc))
    files = {
        "gpuplace.types.plan": "from gpuplace.errors import InvalidInput\n",  # layer 0 through types: fine
        "gpuplace.planner.search": "import gpuplace.k8s.api\n",  # only step.py may
        "gpuplace.planner.step": "from gpuplace.k8s import api\nfrom gpuplace.errors import X\n",
        "gpuplace.k8s.api": "def f():\n    from gpuplace.planner import search\n",  # upward, lazily
        "gpuplace.cli.plan": "from gpuplace.planner.step import run\nfrom gpuplace import __version__\n",
        "gpuplace.fgd.replay": "",  # a room without a row
    }
    modules = _write_modules(tmp_path, files)
    assert violations(table, modules) == [
        "gpuplace.fgd.replay: room gpuplace.fgd has no row in the table",
        "gpuplace.k8s.api imports gpuplace.planner",
        "gpuplace.planner.search imports gpuplace.k8s",
    ]


def circles(modules: dict[str, Path]) -> list[str]:
    """'a ↔ b' for each pair of rooms that reach each other through imports."""
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
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

    return sorted(f"{a} ↔ {b}" for a in graph for b in graph[a] if reaches(b, a, {b}))


def test_no_import_circle_between_rooms() -> None:
    """Over src/ and the folders the wheel maps into the namespace: a step that imports
    ``gpuplace.components.images`` while the components import the steps is a folder loop."""
    found = circles({**_modules(), **_mapped_modules()})
    assert not found, found


def test_the_circle_check_sees_a_loop_through_the_mapped_folders(tmp_path: Path) -> None:
    files = {
        "gpuplace.steps.plan": "from gpuplace.components.images import CPU_IMAGE\n",
        "gpuplace.components.placement.plan_placement.component": "from gpuplace.steps import plan\n",
        "gpuplace.cli.plan": "from gpuplace.steps import plan\n",
    }
    modules = _write_modules(tmp_path, files)
    assert circles(modules) == [
        "gpuplace.components ↔ gpuplace.steps",
        "gpuplace.steps ↔ gpuplace.components",
    ]
    assert any(n.startswith("gpuplace.components.") for n in _mapped_modules())
    assert not any(".tests." in n for n in _mapped_modules())


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
    for heavy in ("torch", "kubernetes", "mlflow", "aiohttp", "urllib.request", "requests"):
        offenders = sorted(set(pure) & _importers(heavy))
        assert not offenders, f"{heavy} imported by pure modules {offenders}"


def _parses_json(path: Path) -> bool:
    """Whether the module calls ``json.load``/``json.loads`` (as ``json.x``, or imported by name)."""
    tree = ast.parse(path.read_text())
    by_name = {
        a.asname or a.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "json"
        for a in node.names
        if a.name in ("load", "loads")
    }
    calls = [node.func for node in ast.walk(tree) if isinstance(node, ast.Call)]
    return any(
        (isinstance(f, ast.Name) and f.id in by_name)
        or (
            isinstance(f, ast.Attribute)
            and f.attr in ("load", "loads")
            and isinstance(f.value, ast.Name)
            and f.value.id == "json"
        )
        for f in calls
    )


def _plan_json_readers(modules: dict[str, Path]) -> list[str]:
    return sorted(
        name
        for name, path in modules.items()
        if name != "gpuplace.plandir"
        and ("plan.json" in (text := path.read_text()) or "PLAN_FILE" in text)
        and _parses_json(path)
    )


def test_plan_json_has_one_reader() -> None:
    readers = _plan_json_readers(_modules())
    assert not readers, f"plan.json is read outside gpuplace.plandir: {readers}"


def test_the_plan_json_check_sees_every_way_of_parsing(tmp_path: Path) -> None:
    """The check above must not be fooled by ``json.load(f)`` or a by-name import."""
    ways = {
        "loads": "import json\njson.loads(open('plan.json').read())\n",
        "load": "import json\nwith open('plan.json') as f:\n    json.load(f)\n",
        "by_name": "from json import load as rd\nfrom gpuplace import plandir\nrd(open(plandir.PLAN_FILE))\n",
        "none": "from gpuplace.plandir import PLAN_FILE\nprint(PLAN_FILE)\n",
    }
    modules = {}
    for name, text in ways.items():
        (tmp_path / f"{name}.py").write_text(text)
        modules[f"gpuplace.fake.{name}"] = tmp_path / f"{name}.py"
    assert _plan_json_readers(modules) == [
        "gpuplace.fake.by_name",
        "gpuplace.fake.load",
        "gpuplace.fake.loads",
    ]


def _literals(path: Path) -> list[str]:
    """The string constants of a module's code (docstrings left out), f-string pieces included."""
    tree = ast.parse(path.read_text())
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    ]


def test_gpu_resource_names_are_spelled_only_in_labels() -> None:
    """``nvidia.com/gpu`` and ``nvidia.com/mig-<profile>`` as values come from gpuplace.labels (prose that
    mentions them is fine), in src/ and in the pipelines' and components' signatures (a pipeline's
    ``accelerator_type`` default was once the literal)."""
    from gpuplace import labels

    spelled = {
        name
        for name, path in {**_modules(), **_mapped_modules()}.items()
        if name != "gpuplace.labels"
        and any(v == labels.GPU_RESOURCE or v.startswith(labels.MIG_RESOURCE_PREFIX) for v in _literals(path))
    }
    assert not spelled, f"GPU resource names written outside gpuplace.labels: {sorted(spelled)}"


# Thousands that are not seconds <-> milliseconds: CPU millicores and GPU milli-shares (Kubernetes' and the
# Alibaba trace's units), GPU-hours per 1k requests, SI quantity suffixes, a parameter count's K, counts
# (resamples, history, a client's burst, a batch), and bounds (a GEMM's plausible seconds, a GiB minimum).
NOT_TIME = {
    "gpuplace.compare.metrics": {"gpus * (wall_s / 3600.0) / completed * 1000.0"},
    "gpuplace.inventory.alibaba": {"self.num_gpu * self.gpu_milli / 1000"},
    "gpuplace.inventory.cluster": {"pod_cpu_request(pod) * 1000", "'m': 0.001"},
    "gpuplace.planner.fragmentation": {"MILLI = 1000"},
    "gpuplace.compare.noise": {"RESAMPLES = 1000"},
    "gpuplace.extender.service": {"HISTORY = 1000"},
    "gpuplace.testenv.commands": {"CLIENT_BURST = 1000"},
    "gpuplace.tracking.client": {"MAX_METRICS_PER_BATCH = 1000"},
    "gpuplace.catalog.efficiency": {"(0.0, 0.001)"},
    "gpuplace.inventory.fleetfile": {"minimum=0.001"},
    "gpuplace.fgd.bench": {"n.cpu_cores * 1000"},
    "gpuplace.fgd.paperworkload": {"x * total_gpus * 1000"},
    "gpuplace.planner.placement": {"(node.cpu_cores - node.cpu_allocated) * 1000"},
    "gpuplace.k8s.fit": {"'m': 0.001", "'k': 1000.0"},
    "gpuplace.dra": {"'m': 0.001", "'k': 1000.0"},
    "gpuplace.cli.catalog": {"(1000.0, 'K')"},
}


def _thousands(path: Path) -> set[str]:
    """Where a module writes a thousand (1000, 1e3, 1e-3): the expression it multiplies or divides, or, for
    a factor kept aside, the table row, entry or assignment that holds it (``('x_ms', 1e3)``, ``ms = 1e3``),
    so that a factor stored in a table and applied elsewhere is seen too."""

    def thousand(node: ast.AST) -> bool:
        return (
            isinstance(node, ast.Constant) and type(node.value) in (int, float) and node.value in (1000, 1e-3)
        )

    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.Div):
            if thousand(node.left) or thousand(node.right):
                found.add(ast.unparse(node))
        elif isinstance(node, ast.Dict):
            found |= {
                f"{ast.unparse(k)}: {ast.unparse(v)}"
                for k, v in zip(node.keys, node.values, strict=True)
                if k is not None and thousand(v)
            }
        elif isinstance(node, ast.Tuple | ast.List | ast.Assign | ast.AnnAssign | ast.keyword | ast.Call):
            parts = [node.value] if isinstance(node, ast.Assign | ast.AnnAssign | ast.keyword) else []
            parts += node.elts if isinstance(node, ast.Tuple | ast.List) else []
            parts += node.args if isinstance(node, ast.Call) else []
            if any(thousand(p) for p in parts if p is not None):
                found.add(ast.unparse(node))
    return found


def test_seconds_become_milliseconds_only_in_units() -> None:
    """Seconds are converted to milliseconds and back by gpuplace.units (to_ms, ms, seconds) alone."""
    written = {
        f"{name}: {expr}"
        for name, path in _modules().items()
        if name != "gpuplace.units"
        for expr in _thousands(path) - NOT_TIME.get(name, set())
    }
    assert not written, "convert through gpuplace.units: " + "; ".join(sorted(written))


def test_the_units_check_sees_a_factor_kept_in_a_table(tmp_path: Path) -> None:
    """The drift it was blind to: a seconds→ms factor stored in a table row or a name, applied elsewhere."""
    module = tmp_path / "m.py"
    module.write_text(
        "KEYS = {'ttft_p99_s': ('ttft_p99_ms', 1e3)}\n"
        "ROWS = (('TTFT (ms)', 'ttft_s', 1, 1e3),)\n"
        "def f(x, y):\n    ms = 1e3\n    return x * ms, y * 1000, g(x, 1000.0)\n"
    )
    assert _thousands(module) == {
        "('ttft_p99_ms', 1000.0)",
        "('TTFT (ms)', 'ttft_s', 1, 1000.0)",
        "ms = 1000.0",
        "y * 1000",
        "g(x, 1000.0)",
    }


def test_no_module_over_the_size_limit() -> None:
    big = {name: n for name, p in _modules().items() if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not big, f"modules over {MAX_LINES} lines: {big}"


def _collected_as_tests(paths: Iterable[Path]) -> list[str]:
    """The files pytest would collect as test modules, by its ``python_files`` globs (pyproject's, or
    pytest's default ``test_*.py *_test.py``)."""
    import fnmatch
    import tomllib

    options = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    globs = options.get("python_files", ["test_*.py", "*_test.py"])
    globs = globs.split() if isinstance(globs, str) else globs
    return sorted(str(p.relative_to(REPO)) for p in paths if any(fnmatch.fnmatch(p.name, g) for g in globs))


def test_no_library_module_is_named_like_a_test() -> None:
    """``steps/load_test.py`` matched ``*_test.py``: pytest collected (imported) it as a test module."""
    named = _collected_as_tests([*_modules().values(), *_mapped_modules().values()])
    assert not named, f"rename these, pytest collects them as tests: {named}"
    assert _collected_as_tests([SRC / "steps" / "load_test.py", SRC / "steps" / "loadtest.py"]) == [
        "src/gpuplace/steps/load_test.py"
    ]


# Path joins onto a layout name that are not a plan directory: the KFP local runner's pipeline root.
NOT_PLAN_LAYOUT = {"gpuplace.jobs.main": {"run_dir / 'kfp'"}}


def _layout_built(path: Path) -> set[str]:
    """Where a module builds a path of the plan directory's layout itself (``root / "plan.json"``,
    ``f"alternatives/{form}.yaml"``, ``"manifests/"``) instead of asking gpuplace.plandir for it."""
    from gpuplace import plandir

    dirs = (plandir.MANIFESTS_DIR, plandir.ALTERNATIVES_DIR, plandir.KFP_DIR)
    names = {*dirs, plandir.PLAN_FILE, plandir.CANDIDATES_FILE}
    piece = re.compile(
        "|".join([rf"(^|/){re.escape(d)}/" for d in dirs] + [rf"/{re.escape(n)}\b" for n in names])
    )
    tree = ast.parse(path.read_text())
    in_fstrings = {id(v) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for v in node.values}
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            if isinstance(node.right, ast.Constant) and node.right.value in names:
                found.add(ast.unparse(node))
        elif isinstance(node, ast.JoinedStr):
            if any(isinstance(v, ast.Constant) and piece.search(str(v.value)) for v in node.values):
                found.add(ast.unparse(node))
        elif (
            isinstance(node, ast.Constant)
            and node.value in {f"{d}/" for d in dirs}
            and id(node) not in in_fstrings
        ):
            found.add(ast.unparse(node))
    return found


def test_the_plan_directory_layout_is_built_only_in_plandir() -> None:
    built = {
        f"{name}: {expr}"
        for name, path in _modules().items()
        if name != "gpuplace.plandir"
        for expr in _layout_built(path) - NOT_PLAN_LAYOUT.get(name, set())
    }
    assert not built, "ask gpuplace.plandir.PlanDir for the path: " + "; ".join(sorted(built))


def test_the_layout_check_sees_a_path_rebuilt_by_hand(tmp_path: Path) -> None:
    """The drift it catches: ``gpuplace plan`` once printed the forms' paths by rebuilding the layout."""
    module = tmp_path / "m.py"
    module.write_text(
        "where = 'manifests/' if form == 'manifests' else f'alternatives/{form}.yaml'\n"
        "print(f'wrote {out}/plan.json and the forms')\n"
        "p = root / 'candidates.md'\n"
        "help = 'directory: plan.json, manifests/, alternatives/ (the other forms)'\n"
    )
    assert _layout_built(module) == {
        "'manifests/'",
        "f'alternatives/{form}.yaml'",
        "f'wrote {out}/plan.json and the forms'",
        "root / 'candidates.md'",
    }


# Packages whose __init__.py still holds logic (functions or classes), each with how many it may hold: debt
# that may shrink, not grow. deploy/__init__.py held 14 (the dispatch, the stand-in registry, the record's
# formatting); they moved to deploy/dispatch.py, deploy/registry.py and deploy/summary.py. compare/__init__.py
# held 4 (compare_paths and its checks); they moved to compare/paths.py.
INIT_LOGIC = {
    "gpuplace.profiling": 1,
    "gpuplace.report": 3,
    "gpuplace.inventory": 5,
    "gpuplace.cli": 2,
    "gpuplace.tracking": 1,
}


def _defined(path: Path) -> int:
    body = ast.parse(path.read_text()).body
    return sum(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) for n in body)


def test_a_package_face_holds_no_logic() -> None:
    """A package's ``__init__.py`` re-exports what its modules define; the logic lives in the modules."""
    grown = {
        name: n
        for name, path in {**_modules(), **_mapped_modules()}.items()
        if path.name == "__init__.py" and (n := _defined(path)) > INIT_LOGIC.get(name, 0)
    }
    assert not grown, f"functions or classes in a package's __init__.py (move them into a module): {grown}"


MAX_FUNCTION_LINES = 80
# Functions over the limit (lines from `def` to the last line, docstring included), each at most as long as
# listed: a ratchet that may only shrink. The list is issue 34's item 5, not done: splitting the first,
# the planner's hot path, needs the planner benchmark before and after (docs/architecture.md).
LONG_FUNCTIONS: dict[str, int] = {}  # none left; a function over the limit fails the test below


def long_functions(modules: dict[str, Path], limit: int = MAX_FUNCTION_LINES) -> dict[str, int]:
    """``module:function`` → its length in lines, for every function (nested ones too) over ``limit``."""
    return {
        f"{name}:{node.name}": n
        for name, path in modules.items()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (n := (node.end_lineno or node.lineno) - node.lineno + 1) > limit
    }


def test_no_function_grows_past_the_limit_or_its_listed_length() -> None:
    found = long_functions(_modules())
    grown = {f: n for f, n in found.items() if n > LONG_FUNCTIONS.get(f, MAX_FUNCTION_LINES)}
    assert not grown, (
        f"functions over {MAX_FUNCTION_LINES} lines, or longer than listed (split them): {grown}"
    )
    stale = {f: n for f, n in LONG_FUNCTIONS.items() if found.get(f, 0) < n}
    assert not stale, f"shorter than listed or gone: lower or remove their LONG_FUNCTIONS entries: {stale}"


def test_the_length_check_counts_nested_functions(tmp_path: Path) -> None:
    text = "def outer():\n    def inner():\n" + "".join(f"        a{i} = {i}\n" for i in range(6))
    modules = _write_modules(tmp_path, {"gpuplace.m": text + "    return inner\n"})
    assert long_functions(modules, limit=5) == {"gpuplace.m:outer": 9, "gpuplace.m:inner": 7}
