"""Files cross a step only in ``gpuplace.steps`` (issue 23): the domain rooms take and return values, and
each file that crosses a step has one module that writes and reads it. Checked on the source, like
tests/unit/test_architecture.py; each check is shown to catch what it forbids on a made-up module.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.unit.test_architecture import _imports, _literals, _modules, _room

# The readers of the files that cross a step, and the one module that owns each file.
READERS = {
    "read_plan_dir": "gpuplace.plandir",
    "read_record": "gpuplace.deploy.record",
    "save_record": "gpuplace.deploy.record",
    "write_record": "gpuplace.deploy.record",
    "read_report": "gpuplace.loadtest.io",
    "read_records": "gpuplace.loadtest.io",
    "read_prediction": "gpuplace.loadtest.io",
    "read_report_and_prediction": "gpuplace.loadtest.io",
    "load_profile": "gpuplace.profiling.io",
    "read_inventory_json": "gpuplace.inventory.jsonfile",
    "write_inventory_json": "gpuplace.inventory.jsonfile",
    "inventory_to_json": "gpuplace.inventory.jsonfile",
    "read_comparison": "gpuplace.steps.compare",
}
# Above the steps or beside them, each with its reason:
# - jobs.outputs reads a finished run's outputs back, once, for the main job's summary (it runs the steps,
#   through kfp): it finds them by the compiled pipeline's tasks (a loop's iterations too);
#   jobs.cluster hands the pipeline the cluster's inventory (read to check --fleet against it) as its input;
# - deploy.dispatch and deploy.registry keep the local targets' registry of running servers under the state
#   directory, which is how teardown finds a server by plan or run id: machine state, not a step output;
# - inventory (load_inventory) reads an inventory JSON given as a source, as it reads a fleet YAML.
ALSO = {
    "gpuplace.jobs.outputs": {
        "read_plan_dir",
        "read_record",
        "read_report_and_prediction",
        "read_comparison",
    },
    "gpuplace.jobs.cluster": {"write_inventory_json"},
    "gpuplace.deploy.dispatch": {"read_record", "write_record"},
    "gpuplace.deploy.registry": {"read_record", "write_record"},
    "gpuplace.inventory": {"read_inventory_json"},
}


def _called(path: Path) -> set[str]:
    """The names of the functions a module calls (``f(...)`` and ``x.f(...)``)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            out.add(f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else "")
    return out


def step_file_readers(modules: dict[str, Path]) -> list[str]:
    """'module calls reader' for each call of a step file's reader outside gpuplace.steps and its owner."""
    out = []
    for name, path in sorted(modules.items()):
        if _room(name) == "gpuplace.steps":
            continue
        for reader in sorted(_called(path) & set(READERS)):
            if READERS[reader] != name and reader not in ALSO.get(name, set()):
                out.append(f"{name} calls {reader}")
    return out


def test_only_the_steps_read_a_steps_files() -> None:
    bad = step_file_readers(_modules())
    assert not bad, "a step's files are read in gpuplace.steps (and by their owner) only:\n" + "\n".join(bad)


def _writes_a_record(path: Path) -> bool:
    """Whether the module serialises a deployment record itself: ``json.dump(s)(<x>.to_json_dict())``
    with ``<x>`` a record (a name or attribute ending in ``record`` or ``deployment``), or
    ``DeploymentRecord.from_json_dict``."""

    def record_like(node: ast.expr) -> bool:
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
        return name.endswith(("record", "deployment"))

    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        f = node.func
        if f.attr == "from_json_dict" and isinstance(f.value, ast.Name) and f.value.id == "DeploymentRecord":
            return True
        if f.attr in ("dump", "dumps") and node.args and isinstance(arg := node.args[0], ast.Call):
            inner = arg.func
            if isinstance(inner, ast.Attribute) and inner.attr == "to_json_dict" and record_like(inner.value):
                return True
    return False


def record_writers(modules: dict[str, Path]) -> list[str]:
    return sorted(
        name
        for name, path in modules.items()
        if _writes_a_record(path) or "deployment.json" in _literals(path)
    )


def test_deployment_json_has_one_writer_and_reader() -> None:
    assert record_writers(_modules()) == ["gpuplace.deploy.record"]


def test_the_inventory_json_has_one_writer_and_reader() -> None:
    """The inventory JSON's form is spelled once: only gpuplace.inventory.jsonfile turns an Inventory into
    JSON or back (the CLI and the component both write it through the inventory step)."""
    spelled = {
        name
        for name, path in _modules().items()
        if _called(path) & {"inventory_to_json", "inventory_from_json"}
    }
    assert spelled == {"gpuplace.inventory.jsonfile"}


def test_the_planner_is_pure_and_reads_no_steps_file() -> None:
    """planner/ imports nothing from inventory/, profiling/, manifests/, plandir or steps/."""
    forbidden = {"gpuplace.inventory", "gpuplace.profiling", "gpuplace.manifests", "gpuplace.plandir"}
    forbidden |= {"gpuplace.steps", "gpuplace.deploy", "gpuplace.loadtest", "gpuplace.k8s"}
    bad = {
        name: sorted(rooms)
        for name, path in _modules().items()
        if _room(name) == "gpuplace.planner"
        and (rooms := {_room(i) for i in _imports(path) if i.startswith("gpuplace.")} & forbidden)
    }
    assert not bad, f"the planner imports rooms of files: {bad}"


def test_no_module_outside_the_steps_and_plandir_names_a_plan_file() -> None:
    """plan.json and the plan directory's folders are named in gpuplace.plandir alone (the others use
    PlanDir's attributes); the steps read the plan directory through it."""
    from gpuplace import plandir

    names = {plandir.PLAN_FILE, "PLAN_FILE", "MANIFESTS_DIR", "ALTERNATIVES_DIR", "KFP_DIR"}
    naming = sorted(
        name
        for name, path in _modules().items()
        if name != "gpuplace.plandir"
        and _room(name) != "gpuplace.steps"
        and (names & set(_literals(path)) or {i.rsplit(".", 1)[-1] for i in _imports(path)} & names)
    )
    assert not naming, f"modules naming a plan file: {naming}"


def test_the_checks_catch_what_they_forbid(tmp_path: Path) -> None:
    """The former forms: deploy_task's and serve_and_load_test_task's inline json.dumps, a domain room
    reading a plan directory, a second inventory JSON writer."""
    files = {
        "gpuplace.steps.deploy": "import json\nPath(p).write_text(json.dumps(record.to_json_dict()))\n",
        "gpuplace.deploy.inline": "json.dump(result.deployment.to_json_dict(), f)\n",
        "gpuplace.compare.inputs": "d = DeploymentRecord.from_json_dict(json.loads(t))\n",
        "gpuplace.cli.deploy": "out = 'deployment.json'\n",
        "gpuplace.loadtest.config": "from gpuplace.plandir import read_plan_dir\nread_plan_dir(p)\n",
        "gpuplace.steps.loadtest": "read_plan_dir(p)\n",
        "gpuplace.cli.inventory": "write_inventory_json(inv, out)\n",
        "gpuplace.report.render": "json.dumps(plan.to_json_dict())\n",  # not a record: fine
    }
    modules = {}
    for name, text in files.items():
        modules[name] = tmp_path / f"{name}.py"
        modules[name].write_text(text)
    assert record_writers(modules) == [
        "gpuplace.cli.deploy",
        "gpuplace.compare.inputs",
        "gpuplace.deploy.inline",
        "gpuplace.steps.deploy",
    ]
    assert step_file_readers(modules) == [
        "gpuplace.cli.inventory calls write_inventory_json",
        "gpuplace.loadtest.config calls read_plan_dir",
    ]
