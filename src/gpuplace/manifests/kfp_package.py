"""A compiled KFP pipeline package read as KFP's driver reads it: the task's DAG position and its input
parameters resolved from the run's arguments, the root defaults and upstream tasks' outputs.

Used by :mod:`gpuplace.manifests.kfp_pod` to build the Kubeflow path's task pod. Pure functions over the
package's plain YAML data; what stands in for the backend (ML Metadata's upstream outputs) is passed in.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from gpuplace.errors import InvalidInput, UnknownName

# One input-parameter placeholder (a "channel") as the whole value, or anywhere in a string.
CHANNEL = re.compile(r"^\{\{\$\.inputs\.parameters\['([^']+)'\]\}\}$")
JOB_UUID = "{{$.pipeline_job_uuid}}"  # the run's id, resolved by the driver
_PLACEHOLDER = re.compile(r"\{\{\$\.inputs\.parameters\['([^']+)'\]\}\}")


def load_package(path: str | Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(pipeline spec, platform spec) of a compiled pipeline YAML (the platform document may be absent)."""
    p = Path(path)
    try:
        docs = [d for d in yaml.safe_load_all(p.read_text()) if d is not None]
    except (OSError, yaml.YAMLError) as e:
        raise InvalidInput("pipeline_package", str(p), f"cannot be read as YAML ({e})") from e
    if not docs or not isinstance(docs[0], dict) or "root" not in docs[0]:
        raise InvalidInput("pipeline_package", str(p), "is not a compiled KFP pipeline (no root)")
    platform = docs[1] if len(docs) > 1 and isinstance(docs[1], dict) else {}
    return docs[0], platform


def find_task(spec: Mapping[str, Any], task: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The task and the chain of DAG tasks enclosing it (outermost first)."""
    components = spec.get("components") or {}

    def walk(
        dag: Mapping[str, Any], chain: list[dict[str, Any]]
    ) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        for name, t in (dag.get("tasks") or {}).items():
            if name == task:
                return t, chain
            comp = components.get((t.get("componentRef") or {}).get("name", "")) or {}
            if "dag" in comp:
                found = walk(comp["dag"], [*chain, t])
                if found:
                    return found
        return None

    found = walk((spec.get("root") or {}).get("dag") or {}, [])
    if found is None:
        names: list[str] = []

        def collect(dag: Mapping[str, Any]) -> None:
            for name, t in (dag.get("tasks") or {}).items():
                names.append(name)
                comp = components.get((t.get("componentRef") or {}).get("name", "")) or {}
                if "dag" in comp:
                    collect(comp["dag"])

        collect((spec.get("root") or {}).get("dag") or {})
        raise UnknownName("task", task, tuple(sorted(names)))
    return found


def defaults(definitions: Mapping[str, Any]) -> dict[str, Any]:
    return {
        k: p["defaultValue"]
        for k, p in ((definitions.get("parameters") or {}).items())
        if "defaultValue" in p
    }


class Resolver:
    """Input parameters as the driver resolves them: pipeline arguments over root defaults, upstream
    task outputs, runtime constants with placeholders."""

    def __init__(
        self,
        spec: Mapping[str, Any],
        arguments: Mapping[str, Any],
        outputs: Mapping[str, Mapping[str, Any]],
        iteration: int = 0,
        run_id: str = "",
    ):
        self.spec = spec
        self.outputs = outputs
        self.run_id = run_id  # what the driver puts for {{$.pipeline_job_uuid}} ("": left as written)
        self.iteration = iteration  # which item of every enclosing ParallelFor loop the task runs for
        root_defs = (spec.get("root") or {}).get("inputDefinitions") or {}
        unknown = sorted(set(arguments) - set(root_defs.get("parameters") or {}))
        if unknown:
            raise InvalidInput("arguments", unknown, "are not parameters of the pipeline")
        self.root = {**defaults(root_defs), **dict(arguments)}

    def scope_of(self, chain: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        scope = self.root
        for dag_task in chain:
            comp = (self.spec.get("components") or {})[dag_task["componentRef"]["name"]]
            scope = {**defaults(comp.get("inputDefinitions") or {}), **self.inputs(dag_task, scope)}
            iterator = dag_task.get("parameterIterator")
            if iterator:  # a ParallelFor: the driver gives each iteration's DAG one item of the list
                scope[iterator["itemInput"]] = self.loop_item(iterator, scope, dag_task)
        return scope

    def loop_item(
        self, iterator: Mapping[str, Any], scope: Mapping[str, Any], dag_task: Mapping[str, Any]
    ) -> Any:
        source = iterator.get("items") or {}
        where = f"loop {(dag_task.get('taskInfo') or {}).get('name', '')}"
        items = scope.get(source["inputParameter"]) if "inputParameter" in source else source.get("raw")
        if isinstance(items, str):
            try:
                items = json.loads(items)
            except ValueError as e:
                raise InvalidInput(where, items, f"is not a JSON list of loop items ({e})") from e
        if not isinstance(items, list):
            raise InvalidInput(where, items, "is not a list of loop items")
        if not 0 <= self.iteration < len(items):
            raise InvalidInput(
                "iteration", self.iteration, f"is not an iteration of {where} ({len(items)} items)"
            )
        return items[self.iteration]

    def value(self, param: Mapping[str, Any], scope: Mapping[str, Any], where: str) -> Any:
        if "componentInputParameter" in param:
            name = param["componentInputParameter"]
            if name not in scope:
                raise InvalidInput(where, name, "is an input no argument or default provides")
            return scope[name]
        if "taskOutputParameter" in param:
            out = param["taskOutputParameter"]
            producer, key = out.get("producerTask", ""), out.get("outputParameterKey", "")
            if key not in (self.outputs.get(producer) or {}):
                raise InvalidInput(
                    where,
                    f"{producer}.{key}",
                    "is an upstream output not given",
                    "Pass it in task_outputs (what the upstream task produced)",
                )
            return self.outputs[producer][key]
        if "runtimeValue" in param:
            return (param["runtimeValue"] or {}).get("constant")
        raise InvalidInput(where, sorted(param), "is an input kind this stand-in does not resolve")

    def inputs(self, task: Mapping[str, Any], scope: Mapping[str, Any]) -> dict[str, Any]:
        specs = (task.get("inputs") or {}).get("parameters") or {}
        plain = {
            k: self.value(p, scope, f"task input {k}") for k, p in specs.items() if "runtimeValue" not in p
        }
        out = dict(plain)
        for k, p in specs.items():
            if "runtimeValue" in p:
                constant = self.value(p, scope, f"task input {k}")
                if isinstance(constant, str) and self.run_id:
                    constant = constant.replace(JOB_UUID, self.run_id)  # dsl.PIPELINE_JOB_ID_PLACEHOLDER
                out[k] = substitute(constant, plain) if isinstance(constant, str) else constant
        return out


def substitute(text: str, values: Mapping[str, Any]) -> Any:
    whole = CHANNEL.match(text)
    if whole and whole.group(1) in values:
        return values[whole.group(1)]
    return _PLACEHOLDER.sub(lambda m: str(values.get(m.group(1), m.group(0))), text)
