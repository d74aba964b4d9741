"""The Kubeflow path's pod as KFP's driver builds it, from compiled pipelines (the checked-in ones, and small
ones compiled here with kfp 2.17 and kfp-kubernetes): the pod-spec patch carries the plan's placement and
accelerator, merged into the executor template, valid for Kubernetes 1.35.

No ``from __future__ import annotations`` here: KFP reads the components' annotations as types."""

from pathlib import Path
from typing import Any, NamedTuple

import kubernetes_validate
import pytest
import yaml
from kfp import compiler, dsl, kubernetes
from test_manifests import plan_for

from gpuplace.errors import InvalidInput, UnknownName
from gpuplace.inventory import load_inventory
from gpuplace.jobs.submit import compiled_path
from gpuplace.manifests import kfp_fragments
from gpuplace.manifests.kfp_package import Resolver, find_task
from gpuplace.manifests.kfp_pod import LAUNCHER_PATH, kfp_task_pod, load_package

K8S = "1.35.0"


def _fragments() -> dict[str, Any]:
    inv = load_inventory("h100-nvlink")
    return kfp_fragments(plan_for(inv, ("whole",)), inv)


def test_checked_in_serving_task_gets_the_plans_placement() -> None:
    frags = _fragments()
    built = kfp_task_pod(
        compiled_path("orchestration_comparison"),
        "serve-and-load-test",
        arguments={"accelerator_type": "nvidia.com/gpu"},
        task_outputs={"plan-placement": frags, "repeat-runs": {"Output": [0]}},  # one run of the run loop
    )
    kubernetes_validate.validate(built.pod, K8S, strict=True)
    spec = built.pod["spec"]
    assert spec["affinity"] == {"nodeAffinity": frags["node_affinity"]}
    assert spec["tolerations"] == frags["tolerations"]
    assert spec["nodeSelector"] == frags["node_selector"]
    (main,) = spec["containers"]
    assert main["name"] == "main" and main["resources"] == {"limits": {"nvidia.com/gpu": "1"}}
    assert main["command"][0] == LAUNCHER_PATH and main["command"][-1] == "--"
    executor = load_package(compiled_path("orchestration_comparison"))[0]["deploymentSpec"]["executors"]
    container = executor["exec-serve-and-load-test"]["container"]
    assert main["args"] == container["command"] + container["args"]  # the launcher resolves {{$}} at run time
    assert main["image"] == container["image"]
    # From the executor template: the launcher copy, its volume, the downward-API env.
    assert [c["name"] for c in spec["initContainers"]] == ["kfp-launcher"]
    assert {"KFP_POD_NAME", "KFP_POD_UID"} <= {e["name"] for e in main["env"]}
    assert {"name": "kfp-launcher", "mountPath": "/kfp-launcher"} in main["volumeMounts"]
    # The patch itself is what the driver hands to Argo: only the dynamic parts.
    assert set(built.pod_spec_patch) == {"containers", "nodeSelector", "tolerations", "affinity"}
    assert built.parameters["accelerator_type"] == "nvidia.com/gpu" and built.warnings == ()


@dsl.component(base_image="python:3.11")
def plan_out() -> NamedTuple(  # type: ignore[valid-type]
    "Out",
    [("accel", str), ("count", str), ("count_int", int), ("affinity", dict), ("tols", list), ("sel", dict)],
):
    raise NotImplementedError  # compiled, never run


@dsl.component(base_image="python:3.11")
def serve(x: str = "a") -> None:
    raise NotImplementedError


@dsl.pipeline
def placed(image_tag: str = "v1") -> None:
    plan = plan_out()
    task = serve().set_accelerator_type(plan.outputs["accel"]).set_accelerator_limit(plan.outputs["count"])
    task.set_cpu_limit("4").set_memory_limit("16G").set_cpu_request("2")
    kubernetes.add_node_affinity_json(task, plan.outputs["affinity"])
    kubernetes.add_toleration_json(task, plan.outputs["tols"])
    kubernetes.add_node_selector_json(task, plan.outputs["sel"])
    kubernetes.add_toleration(task, key="dedicated", operator="Equal", value="llm", effect="NoSchedule")
    kubernetes.add_node_affinity(
        task,
        match_expressions=[{"key": "gpuplace.io/rack", "operator": "In", "values": ["rack-a0"]}],
        weight=10,
    )
    by_int = serve().set_accelerator_type("nvidia.com/gpu").set_accelerator_limit(plan.outputs["count_int"])
    by_int.set_display_name("by-int")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("kfp") / "placed.yaml"
    compiler.Compiler().compile(placed, str(path))
    return path


PLAN = {
    "accel": "nvidia.com/gpu",
    "count": "4",
    "count_int": 4,
    "affinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["h100-0"]}
                    ]
                }
            ]
        },
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 1,
                "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
            }
        ],
    },
    "tols": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    "sel": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
}


def test_task_outputs_set_accelerator_and_placement(compiled: Path) -> None:
    built = kfp_task_pod(compiled, "serve", task_outputs={"plan-out": PLAN})
    kubernetes_validate.validate(built.pod, K8S, strict=True)
    spec = built.pod["spec"]
    (main,) = spec["containers"]
    assert main["resources"] == {
        "limits": {"cpu": "4", "memory": "16G", "nvidia.com/gpu": "4"},
        "requests": {"cpu": "2"},
    }
    # JSON tolerations (a list) and the static one all land, replacing the pod's.
    assert spec["tolerations"] == [
        *PLAN["tols"],
        {"key": "dedicated", "operator": "Equal", "value": "llm", "effect": "NoSchedule"},
    ]
    affinity = spec["affinity"]["nodeAffinity"]
    assert (
        affinity["requiredDuringSchedulingIgnoredDuringExecution"]
        == PLAN["affinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    )
    assert affinity["preferredDuringSchedulingIgnoredDuringExecution"] == [
        *PLAN["affinity"]["preferredDuringSchedulingIgnoredDuringExecution"],
        {
            "weight": 10,
            "preference": {
                "matchExpressions": [{"key": "gpuplace.io/rack", "operator": "In", "values": ["rack-a0"]}]
            },
        },
    ]
    assert spec["nodeSelector"] == PLAN["sel"]


def test_a_number_for_the_accelerator_count_requests_no_gpu_as_kfps_driver_does(compiled: Path) -> None:
    built = kfp_task_pod(compiled, "serve-2", task_outputs={"plan-out": PLAN})
    (main,) = built.pod["spec"]["containers"]
    assert "nvidia.com/gpu" not in (main["resources"].get("limits") or {})
    assert any("resolved to a int (4)" in w and "make that output a str" in w for w in built.warnings)


def test_missing_inputs_and_unknown_names_are_clear(compiled: Path) -> None:
    with pytest.raises(InvalidInput, match=r"plan-out\.sel.: is an upstream output not given"):
        kfp_task_pod(compiled, "serve", task_outputs={"plan-out": {"accel": "nvidia.com/gpu", "count": "1"}})
    with pytest.raises(UnknownName) as unknown:
        kfp_task_pod(compiled, "srve", task_outputs={"plan-out": PLAN})
    assert "serve" in str(unknown.value)
    with pytest.raises(InvalidInput, match="not parameters of the pipeline"):
        kfp_task_pod(compiled, "serve", arguments={"imagetag": "x"}, task_outputs={"plan-out": PLAN})
    with pytest.raises(InvalidInput, match="not a container task"):
        kfp_task_pod(compiled_path("orchestration_comparison"), "exit-handler-1")


def test_platform_features_it_does_not_model_are_refused(compiled: Path) -> None:
    spec, platform = load_package(compiled)
    executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    executors["exec-serve"]["secretAsEnv"] = [
        {"secretName": "s", "keyToEnv": [{"secretKey": "k", "envVar": "E"}]}
    ]
    with pytest.raises(InvalidInput, match="secretAsEnv"):
        kfp_task_pod(spec, "serve", task_outputs={"plan-out": PLAN}, platform=platform)
    # An empty JSON node selector / toleration resolves to nothing, as the driver skips it.
    executors["exec-serve"].pop("secretAsEnv")
    empty = {**PLAN, "tols": {}, "sel": {}}
    built = kfp_task_pod(spec, "serve", task_outputs={"plan-out": empty}, platform=platform)
    assert built.pod["spec"]["tolerations"] == [
        {"key": "dedicated", "operator": "Equal", "value": "llm", "effect": "NoSchedule"}
    ]
    assert yaml.safe_dump(built.pod)  # plain data all the way down


def test_a_task_in_a_loop_runs_for_one_item_of_it() -> None:
    """orchestration_comparison's serving task runs in a ParallelFor over repeat-runs' output: the driver
    gives each iteration one item, and an iteration the list does not have is refused, naming it."""
    spec, _ = load_package(compiled_path("orchestration_comparison"))
    _, chain = find_task(spec, "serve-and-load-test")
    loop = next(t for t in chain if "parameterIterator" in t)
    item = loop["parameterIterator"]["itemInput"]
    outputs = {"plan-placement": _fragments(), "repeat-runs": {"Output": [1, 2, 3]}}
    assert Resolver(spec, {}, outputs, iteration=2).scope_of(chain)[item] == 3
    with pytest.raises(InvalidInput, match="iteration=3: is not an iteration of loop"):
        Resolver(spec, {}, outputs, iteration=3).scope_of(chain)
    with pytest.raises(InvalidInput, match=r"repeat-runs\.Output"):
        Resolver(spec, {}, {"plan-placement": _fragments()}).scope_of(chain)


def test_the_run_id_placeholder_is_the_runs_id_as_the_driver_resolves_it() -> None:
    """deploy_inference's run_id is ``dsl.PIPELINE_JOB_ID_PLACEHOLDER`` in the compiled YAML: the driver puts
    the run's id there; left as written it is no valid label value, and the deploy is refused."""
    run_id = "7f6c2a9e-0000-4000-8000-000000000001"
    built = kfp_task_pod(compiled_path("llm_placement"), "deploy-inference", run_id=run_id)
    assert built.parameters["run_id"] == run_id
