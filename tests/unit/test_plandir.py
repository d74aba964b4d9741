"""The plan directory contract (gpuplace.plandir): one writer, one reader, and bad input named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuplace.errors import InvalidInput
from gpuplace.plandir import read_plan_dir
from tests.support.plans import sample_plan, write_raw_manifest, write_sample_plan, yaml_docs

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: llm, namespace: other}
spec:
  replicas: 2
  selector: {matchLabels: {app: llm}}
  template:
    metadata: {labels: {app: llm}}
    spec: {containers: [{name: c, image: x}]}
---
apiVersion: v1
kind: Service
metadata: {name: llm}
spec: {ports: [{port: 8000}], selector: {app: llm}}
"""


def _written(tmp_path: Path) -> Path:
    plan = sample_plan(plan_id="p1", nodes=("a", "b"), gpus=1)
    write_sample_plan(tmp_path, plan, {"10-deployment.yaml": yaml_docs(DEPLOYMENT)})
    return tmp_path


def test_round_trip_gives_the_typed_plan_back(tmp_path: Path) -> None:
    plan = sample_plan(plan_id="p1", nodes=("a", "b"), gpus=2)
    write_sample_plan(tmp_path, plan, {"10-deployment.yaml": yaml_docs(DEPLOYMENT)})
    read = read_plan_dir(tmp_path)
    assert read.plan == plan
    assert read.serving.gpus_per_replica == 2 and read.serving.replicas == 2
    assert [m["kind"] for m in read.manifests] == ["Deployment", "Service"]
    assert [w["metadata"]["name"] for w in read.workloads()] == ["llm"]
    # The same directory, given as its plan.json, reads the same.
    assert read_plan_dir(tmp_path / "plan.json").plan == plan
    assert not (tmp_path / "plan.json.tmp").exists()


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda d: d.pop("plan_id"), "plan.json:plan_id"),
        (lambda d: d.pop("serving"), "plan.json:serving"),
        (lambda d: d["slo"].update(tpot_p99_s=-1), "tpot_p99_s"),
        (lambda d: d.update(kfp=[1]), "plan.json:kfp"),
    ],
)
def test_a_bad_plan_json_is_refused_naming_the_field(tmp_path: Path, edit: object, field: str) -> None:
    root = _written(tmp_path)
    data = json.loads((root / "plan.json").read_text())
    edit(data)  # type: ignore[operator]
    (root / "plan.json").write_text(json.dumps(data))
    with pytest.raises(InvalidInput) as info:
        read_plan_dir(root)
    assert field in info.value.field


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("kind: Deployment\nmetadata: {name: a}\n", "10-deployment.yaml[0].apiVersion"),
        ("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n", "kind"),
        ("a: [\n", "10-deployment.yaml"),
        ("apiVersion: v1\nkind: Service\nmetadata: {}\n", "metadata.name"),
    ],
)
def test_bad_manifests_are_refused_naming_the_file(tmp_path: Path, text: str, field: str) -> None:
    root = _written(tmp_path)
    write_raw_manifest(root, "10-deployment.yaml", text)
    with pytest.raises(InvalidInput) as info:
        read_plan_dir(root)
    assert field in info.value.field


def test_missing_plan_dir_and_plan_json(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match=r"no such directory"):
        read_plan_dir(tmp_path / "nope")
    with pytest.raises(InvalidInput, match=r"has no plan\.json"):
        read_plan_dir(tmp_path)
    root = _written(tmp_path / "p")
    (root / "plan.json").write_text("{not json")
    with pytest.raises(InvalidInput, match="not valid JSON"):
        read_plan_dir(root)


def test_no_manifests_is_refused(tmp_path: Path) -> None:
    root = _written(tmp_path)
    for f in (root / "manifests").glob("*.yaml"):
        f.unlink()
    with pytest.raises(InvalidInput, match=r"no \*\.yaml files"):
        read_plan_dir(root)


def test_a_plan_without_a_serving_spec_is_not_written(tmp_path: Path) -> None:
    from dataclasses import replace

    with pytest.raises(InvalidInput, match="serving"):
        write_sample_plan(tmp_path, replace(sample_plan(), serving=None), {})
    assert not (tmp_path / "plan.json").exists()
