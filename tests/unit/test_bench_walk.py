"""The walk tool (tests/benchmarks/bench_walk.py) follows what it says it follows, on a module tree it is
given: a value passed on by name, by field and by ``replace``, into the callee's parameter, and not into a
call that does not take it; calls through an imported module, a re-export, ``self`` and a class."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "tests" / "benchmarks"


@pytest.fixture(scope="module")
def walk() -> Any:
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module("bench_walk")
    finally:
        sys.path.remove(str(BENCH))


def _tree(walk: Any, sources: dict[str, str]) -> dict[str, Any]:
    """Modules as ``load`` parses them, from source text instead of a commit."""
    return {name: walk.parse_module(name, text, name == "gpuplace.steps") for name, text in sources.items()}


SOURCES = {
    "gpuplace.jobs.main": """
from dataclasses import replace
import gpuplace.steps.plan as plan
from gpuplace.steps import run

def run_main_job(config):
    checked = replace(config, x=1)
    plan.make(checked.model)
    run(other=2)
    unrelated()

def unrelated():
    pass
""",
    "gpuplace.steps": "from gpuplace.steps.runner import run\n",
    "gpuplace.steps.runner": """
class Runner:
    def __init__(self, what):
        self.go(what)

    def go(self, what):
        pass

def run(other):
    Runner(other)
""",
    "gpuplace.steps.plan": "def make(model):\n    pass\n",
}


def test_the_config_walk_follows_the_value_and_only_it(walk: Any) -> None:
    mods = _tree(walk, SOURCES)
    order = walk.flow(mods, ("gpuplace.jobs.main", "run_main_job", "config"))
    assert order == [("gpuplace.jobs.main", "run_main_job"), ("gpuplace.steps.plan", "make")]


def test_the_call_walk_follows_modules_re_exports_self_and_classes(walk: Any) -> None:
    mods = _tree(walk, SOURCES)
    assert walk.walk(mods) == [
        ("gpuplace.jobs.main", "run_main_job"),
        ("gpuplace.steps.plan", "make"),
        ("gpuplace.steps.runner", "run"),
        ("gpuplace.steps.runner", "Runner.__init__"),
        ("gpuplace.steps.runner", "Runner.go"),
        ("gpuplace.jobs.main", "unrelated"),
    ]
    stays = walk.count_stays(walk.walk(mods))
    assert stays == 4  # main, plan, runner, main
