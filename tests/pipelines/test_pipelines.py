"""The compiled pipelines: their shape, the Kubeflow path's run-time placement, and staleness."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from gpuplace.jobs.submit import compiled_path, pipeline_names, pipeline_parameters


def _spec(name: str) -> list[dict[str, Any]]:
    return list(yaml.safe_load_all(compiled_path(name).read_text()))


def test_both_pipelines_are_checked_in() -> None:
    assert pipeline_names() == ("llm_placement", "orchestration_comparison")
    for name in pipeline_names():
        assert compiled_path(name).is_file()


def test_llm_placement_steps_and_exit_handler() -> None:
    spec = _spec("llm_placement")[0]
    tasks = spec["root"]["dag"]["tasks"]
    assert {"profile-latency", "discover-inventory", "plan-placement", "teardown-inference"} <= set(tasks)
    assert tasks["teardown-inference"]["triggerPolicy"]["strategy"] == "ALL_UPSTREAM_TASKS_COMPLETED"
    inner = spec["components"]["comp-exit-handler-1"]["dag"]["tasks"]
    assert {"deploy-inference", "load-test", "track-run"} <= set(inner)
    profile_exec = spec["deploymentSpec"]["executors"]["exec-profile-latency"]["container"]
    assert profile_exec["resources"]["accelerator"]["resourceCount"] == "1"
    assert tasks["profile-latency"]["taskInfo"]["name"] == "profile latency"  # display names


def test_every_parameter_has_a_default_and_a_description() -> None:
    for name in pipeline_names():
        spec = _spec(name)[0]
        params = spec["root"]["inputDefinitions"]["parameters"]
        assert set(params) == set(pipeline_parameters(name))
        for pname, p in params.items():
            assert "defaultValue" in p, f"{name}.{pname} has no default"
            assert p.get("description"), f"{name}.{pname} has no description"


def test_kubeflow_path_is_placed_from_the_plan_at_run_time() -> None:
    docs = _spec("orchestration_comparison")
    platform = docs[1]["platforms"]["kubernetes"]["deploymentSpec"]["executors"]["exec-serve-and-load-test"]
    for field, output in (
        ("nodeAffinity", "node_affinity"),
        ("tolerations", "tolerations"),
        ("nodeSelector", "node_selector"),
    ):
        text = yaml.safe_dump(platform[field])
        assert "plan-placement" in text and output in text, (field, platform[field])


@pytest.mark.parametrize("name", ["llm_placement", "orchestration_comparison"])
def test_components_use_versioned_images(name: str) -> None:
    import gpuplace

    version = gpuplace.__version__.split("+")[0]
    for executor in _spec(name)[0]["deploymentSpec"]["executors"].values():
        assert executor["container"]["image"].endswith(f":{version}")
