"""What KFP's launcher does to start a task's component in its pod, done here because the launcher binary
(``ghcr.io/kubeflow/kfp-launcher``) cannot be had on a machine that reaches no image registry.

KFP's v2 launcher (``backend/src/v2/component/launcher_v2.go``) receives the executor input from the
driver, resolves the component's command and args (``{{$}}`` becomes the executor input as JSON), and runs
them in the task's container; the component's Python executor (``kfp.dsl.executor_main``) then reads its
inputs from the executor input, writes every output artifact to the local path of its URI (``gs://`` →
``/gcs/``) and every output parameter to its ``outputFile``. Afterwards the launcher uploads the
artifacts and records them in ML Metadata: none of that runs here.

:func:`executor_input` writes the executor input the driver would give (parameter values, input
artifacts by URI, an output URI under ``root_uri`` for every output artifact, an ``outputFile`` per output
parameter), and :func:`launched_pod` turns the task pod :func:`gpuplace.manifests.kfp_pod.kfp_task_pod`
built into the pod the launcher would leave behind: the same container, image and resources, with the
component's own command and resolved args in place of the launcher's, and no launcher init container.
Pure functions over plain YAML data.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from typing import Any

OUTPUT_DIR = "/tmp/kfp_outputs"


def executor_input(
    component: Mapping[str, Any],
    parameters: Mapping[str, Any],
    *,
    root_uri: str,
    input_artifacts: Mapping[str, str | Sequence[str]] | None = None,
    output_dir: str = OUTPUT_DIR,
) -> dict[str, Any]:
    """The executor input for ``component`` (its spec from the compiled pipeline). An input artifact is
    one URI, or a list of them for an input that collects a loop's outputs (``Input[list[Artifact]]``,
    ``dsl.Collected``). Parameter values are written as the driver's protobuf JSON writes them: a whole
    number without a fraction (``2``, not ``2.0``), so an ``int`` parameter gets an int. Output parameters
    go to files under ``output_dir`` (the launcher's is :data:`OUTPUT_DIR`)."""
    outputs = component.get("outputDefinitions") or {}
    inputs = component.get("inputDefinitions") or {}
    artifacts_in = {}
    for name, uris in (input_artifacts or {}).items():
        kind = ((inputs.get("artifacts") or {}).get(name) or {}).get("artifactType") or {}
        listed = [uris] if isinstance(uris, str) else list(uris)
        artifacts_in[name] = {
            "artifacts": [
                {
                    "name": f"{name}-{i}" if len(listed) > 1 else name,
                    "type": dict(kind),
                    "uri": u,
                    "metadata": {},
                }
                for i, u in enumerate(listed)
            ]
        }
    artifacts_out = {
        name: {
            "artifacts": [
                {
                    "name": name,
                    "type": dict(d.get("artifactType") or {}),
                    "uri": f"{root_uri}/{name}",
                    "metadata": {},
                }
            ]
        }
        for name, d in (outputs.get("artifacts") or {}).items()
    }
    parameters_out = {
        name: {"outputFile": f"{output_dir}/{name}"} for name in outputs.get("parameters") or {}
    }
    return {
        "inputs": {
            "parameterValues": {k: protojson_number(v) for k, v in parameters.items()},
            "artifacts": artifacts_in,
        },
        "outputs": {
            "artifacts": artifacts_out,
            "parameters": parameters_out,
            "outputFile": f"{output_dir}/output_metadata.json",
        },
    }


def protojson_number(value: Any) -> Any:
    """``value`` as protobuf's JSON writes a ``google.protobuf.Value`` (the driver's parameter values): a
    number is a double, written without a fraction when it is whole; lists and structs likewise inside."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [protojson_number(v) for v in value]
    if isinstance(value, dict):
        return {k: protojson_number(v) for k, v in value.items()}
    return value


def resolve_args(args: list[str], executor: Mapping[str, Any]) -> list[str]:
    """The component's args with ``{{$}}`` (the whole executor input) resolved, as the launcher does."""
    text = json.dumps(executor, separators=(",", ":"), sort_keys=True)
    return [a.replace("{{$}}", text) for a in args]


def launched_pod(
    task_pod: Mapping[str, Any],
    executor: Mapping[str, Any],
    *,
    image: str = "",
    image_pull_policy: str = "Never",
) -> dict[str, Any]:
    """``task_pod`` (from :func:`~gpuplace.manifests.kfp_pod.kfp_task_pod`) as it runs once the launcher has
    started the component: ``main`` runs the component's command and resolved args (``image``, when given,
    replaces the compiled one: a locally built image), the launcher's init container and volume are gone."""
    pod = copy.deepcopy(dict(task_pod))
    spec = pod["spec"]
    spec.pop("initContainers", None)
    spec["volumes"] = [v for v in spec.get("volumes") or () if v.get("name") != "kfp-launcher"]
    (main,) = [c for c in spec["containers"] if c["name"] == "main"]
    component_args = list(main.get("args") or ())
    main["command"], main["args"] = component_args[:1], resolve_args(component_args[1:], executor)
    main["volumeMounts"] = [m for m in main.get("volumeMounts") or () if m.get("name") != "kfp-launcher"]
    if image:
        main["image"] = image
    main["imagePullPolicy"] = image_pull_policy
    return pod
