"""plan_placement: the wiring called directly on a real profile, and the real component under kfp.local.

The profile is a real CPU profile of the ``tiny`` preset made once per module (seconds)."""

import json
from pathlib import Path

import pytest
import yaml

from gpuplace.components.placement.discover_inventory.tests.test_component import _Out
from gpuplace.components.placement.plan_placement import plan_placement
from gpuplace.plandir import read_plan_dir


@pytest.fixture(scope="module")
def tiny_profile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from gpuplace.profiling import ProfileConfig, run_profile, save_profile

    profile = run_profile(
        ProfileConfig(
            model="tiny", device="cpu", batch_sizes=(1,), prompt_tokens=(16,), output_tokens=(4,), repeats=2
        ).validated()
    )
    path = tmp_path_factory.mktemp("profile") / "tiny.parquet"
    save_profile(profile, path)
    return path


def test_python_func_writes_plan_manifests_metrics_and_fragments(tmp_path: Path, tiny_profile: Path) -> None:
    plan_dir, cand, metrics = _Out(tmp_path / "plan"), _Out(tmp_path / "cand.md"), _Out(tmp_path / "m")
    out = plan_placement.python_func(
        profile=_Out(tiny_profile),
        plan=plan_dir,
        candidates=cand,
        metrics=metrics,
        model="tiny",
        slo_tpot_ms=50,
        slo_ttft_ms=2000,
        rate=5,
        inventory="h100-nvlink",
    )
    plan = read_plan_dir(plan_dir.path).plan
    assert out.plan_id == plan.plan_id == plan_dir.metadata["plan_id"]
    assert out.node_affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
        "matchExpressions"
    ][0]["values"] == list(plan.nodes)
    assert out.tolerations[0]["key"] == "nvidia.com/gpu"
    assert metrics.logged["replicas"] == plan.replicas and metrics.logged["cost_usd_per_month"] > 0
    assert "| shape |" in Path(cand.path).read_text()
    docs = list(yaml.safe_load_all((Path(plan_dir.path) / "manifests" / "10-deployment.yaml").read_text()))
    assert docs[0]["kind"] == "Deployment"
    assert json.loads((Path(plan_dir.path) / "plan.json").read_text())["kfp"]["node_selector"]


def test_python_func_plans_in_fp8_when_asked(tmp_path: Path) -> None:
    plan_dir = _Out(tmp_path / "plan")
    slo = {"slo_tpot_ms": 50, "slo_ttft_ms": 2000, "rate": 2}
    outs = {"candidates": _Out(tmp_path / "cand.md"), "metrics": _Out(tmp_path / "m")}
    precision = {"dtype": "fp8", "kv_cache_dtype": "fp8"}
    plan_placement.python_func(
        plan=plan_dir, model="llama-3.1-8b", inventory="h100-nvlink", **slo, **outs, **precision
    )
    plan = read_plan_dir(plan_dir.path).plan
    assert plan.engine is not None and plan.engine.precision.label == "fp8 + fp8 KV"
    assert plan.serving is not None and "--quantization" in plan.serving.args


def test_python_func_rejects_a_profile_of_another_model(tmp_path: Path, tiny_profile: Path) -> None:
    with pytest.raises(ValueError, match="model='mistral-7b'"):
        plan_placement.python_func(
            profile=_Out(tiny_profile),
            plan=_Out(tmp_path / "p"),
            candidates=_Out(tmp_path / "c"),
            metrics=_Out(tmp_path / "m"),
            model="mistral-7b",
            slo_tpot_ms=50,
            slo_ttft_ms=2000,
            rate=5,
        )
    assert not (tmp_path / "p").exists()


@pytest.mark.integration
def test_runs_under_the_local_runner(kfp_local: Path, tiny_profile: Path) -> None:
    from kfp import dsl

    from gpuplace.components.placement.discover_inventory import discover_inventory

    @dsl.pipeline
    def plan_pipeline(profile_uri: str):  # type: ignore[no-untyped-def]  # KFP reads the annotation
        profile = dsl.importer(artifact_uri=profile_uri, artifact_class=dsl.Dataset)
        inv = discover_inventory(source="mixed-a100-h100-l4")
        plan_placement(
            profile=profile.output,
            inventory_json=inv.outputs["inventory"],
            model="tiny",
            slo_tpot_ms=50.0,
            slo_ttft_ms=2000.0,
            rate=5.0,
        )

    plan_pipeline(profile_uri=str(tiny_profile))
    plans = list(kfp_local.glob("**/plan-placement/plan/plan.json"))
    assert len(plans) == 1 and read_plan_dir(plans[0]).plan.model == "tiny"


def test_python_func_takes_the_profiles_operator_table_and_an_empty_one_as_none(tmp_path: Path) -> None:
    """The profile task's ``operators`` output: empty when it measured none (the plan is then the one made
    without it), else a table, which prices its GPU class (here the H200's real table on an H200 fleet)."""
    repo = Path(__file__).resolve().parents[4]
    fleet = tmp_path / "h200.yaml"
    fleet.write_text(
        "schema: gpuplace.io/fleet/v1\nname: h200-test\ndescription: one 8×H200 host\n"
        "defaults: {cpu_cores: 192, memory_gib: 2048, numa_nodes: 2}\n"
        "nodes:\n  - name: h200-{i}\n    count: 1\n    gpus:\n"
        "      - {product: NVIDIA-H200, count: 8, numa_node: 0, nvlink_island: nvswitch}\n"
    )
    empty = tmp_path / "operators"
    empty.write_text("")
    ids = {}
    for name, table in (
        ("none", None),
        ("empty", empty),
        ("h200", repo / "docs/benchmarks/gpu/2026-12-04/operators.json"),
    ):
        plan_dir = _Out(tmp_path / name)
        out = plan_placement.python_func(
            plan=plan_dir,
            candidates=_Out(tmp_path / f"{name}.md"),
            metrics=_Out(tmp_path / f"{name}.m"),
            operators=_Out(table) if table is not None else None,
            model="llama-3.1-8b",
            slo_tpot_ms=50,
            slo_ttft_ms=2000,
            rate=5,
            inventory=str(fleet),
        )
        ids[name] = out.plan_id
        notes = read_plan_dir(plan_dir.path).plan.notes
        assert any("kernels measured on it" in n for n in notes) == (name == "h200"), notes
    assert ids["none"] == ids["empty"] != ids["h200"]
