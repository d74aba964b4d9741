"""The serving engines' registry (gpuplace.types.engines): an engine is looked up by the name a plan
records, never compared as a string, and what the rest of gpuplace asks of it comes from there."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import pytest

from gpuplace.errors import InvalidInput
from gpuplace.types.engines import (
    CLUSTER_ENGINE,
    ENGINES,
    LOCAL_ENGINE,
    TRANSFORMERS,
    VLLM,
    engine_of,
    engine_of_command,
)
from tests.unit.test_architecture import REPO, _literals, _mapped_modules, _modules

# Literals that spell an engine's name for another reason: the load tester's way of forcing the output
# length with vLLM's sampling extension (ignore_eos, min_tokens), which other OpenAI servers accept too.
NOT_AN_ENGINE = {"gpuplace.loadtest.client": {"vllm"}}


def _engine_literals(path: Path) -> set[str]:
    """The engine names a module writes as a str or bytes literal (docstrings left out)."""
    words = set(ENGINES) | {e.process_word.decode() for e in ENGINES.values()}
    spelled = {
        node.value.decode(errors="replace")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and isinstance(node.value, bytes)
    }
    return {v for v in {*_literals(path), *spelled} if v in words}


def test_no_engine_name_is_written_outside_the_registry() -> None:
    """``== "vllm"``, ``"vllm" in command``, ``engine="transformers"``, ``["vllm", "serve"]``: each is a
    literal of the engine's name, and each is an engine fact the registry holds."""
    written = {
        f"{name}: {sorted(found)}"
        for name, path in {**_modules(), **_mapped_modules()}.items()
        if name != "gpuplace.types.engines"
        and (found := _engine_literals(path) - NOT_AN_ENGINE.get(name, set()))
    }
    assert not written, "look the engine up in gpuplace.types.engines: " + "; ".join(sorted(written))


def test_the_engine_check_sees_a_comparison_and_a_command(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        '"""Prose may name vllm and transformers."""\n'
        'in_pod = spec.engine == "transformers"\n'
        'cmd = ["vllm", "serve", *args]\n'
        'alive = any(b"transformers" in part for part in cmdline)\n'
    )
    assert _engine_literals(module) == {"transformers", "vllm"}


def test_an_unknown_engine_is_refused_by_name() -> None:
    with pytest.raises(InvalidInput) as e:
        engine_of("sglang")
    assert "serving.engine" in str(e.value) and "sglang" in str(e.value) and "vllm" in str(e.value)
    from tests.support.plans import sample_plan

    spec = sample_plan().serving
    assert spec is not None
    with pytest.raises(InvalidInput, match=r"serving\.engine"):
        replace(spec, engine="sglang")


def test_each_engine_is_registered_once_with_a_referee_that_exists() -> None:
    assert ENGINES == {"vllm": VLLM, "transformers": TRANSFORMERS}
    assert CLUSTER_ENGINE is VLLM and not VLLM.runs_here and VLLM.serves_in_task_pod
    assert LOCAL_ENGINE is TRANSFORMERS and TRANSFORMERS.runs_here and not TRANSFORMERS.serves_in_task_pod
    for engine in ENGINES.values():
        assert (REPO / engine.referee).is_file(), engine.referee
    # the image is the release the engine parameters record, spelled once: its version
    assert VLLM.image == "vllm/vllm-openai:v" + VLLM.version and TRANSFORMERS.image == ""


def test_a_pods_command_names_its_engine() -> None:
    assert engine_of_command("vllm serve") is VLLM
    assert engine_of_command("/bin/sh -c exec gpuplace-serve") is None  # gpuplace's serve script
    assert engine_of_command("") is None


def test_the_manifests_and_the_local_spec_take_the_engine_from_the_registry(tmp_path: Path) -> None:
    """A cluster plan's pods start the cluster engine's command in its image; a plan of this machine is
    the local engine's, and a live server is recognised by the local engine's word."""
    from gpuplace.deploy.served import local_engine
    from gpuplace.inventory import load_inventory
    from tests.support.plans import local_plan_dir, rendered_plan_dir, sample_plan

    planned = rendered_plan_dir(
        tmp_path / "cluster", sample_plan(nodes=("h100-a-0",)), load_inventory("h100-nvlink")
    )
    (container,) = {
        c["image"] + " " + " ".join(c["command"])
        for m in planned.workloads()
        for c in m["spec"]["template"]["spec"]["containers"]
    }
    assert container == f"{CLUSTER_ENGINE.image} {' '.join(CLUSTER_ENGINE.command)}"
    assert engine_of(planned.serving.engine) is CLUSTER_ENGINE
    local = local_plan_dir(tmp_path / "local", "node-a")
    assert engine_of(local.serving.engine) is LOCAL_ENGINE
    assert local_engine("tiny", local.serving) == ("cpu", local.serving.args)  # its own arguments, as planned
