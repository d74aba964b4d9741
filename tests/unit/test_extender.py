"""The extender's decisions, state and configuration, without HTTP: pods and nodes as the API serves them."""

from __future__ import annotations

import json
from typing import Any

import kubernetes_validate
import pytest
import yaml

from gpuplace.catalog import load_gpu_catalog
from gpuplace.errors import InvalidInput
from gpuplace.extender import config as cfg
from gpuplace.extender.fit import ASSIGNMENT_ANNOTATION, node_fit, pod_request, read_assignment, scores
from gpuplace.extender.run import fleet_state
from gpuplace.extender.service import ExtenderService
from gpuplace.extender.state import ClusterState, PodGpus, allocate
from gpuplace.inventory import parse_fleet
from gpuplace.labels import GPU_RESOURCE as GPU
from gpuplace.labels import mig_profile_of
from gpuplace.planner.fragmentation import DEFAULT_LLM_MIX, FragmentationModel
from gpuplace.planner.placement import FleetState, best_gpu_set, fit_score
from gpuplace.testenv.nodes import node_object
from gpuplace.types import Inventory
from gpuplace.types.extender import GpuRequest

H100 = "NVIDIA-H100-80GB-HBM3"
L4 = "NVIDIA-L4"


def fleet(nodes: list[dict[str, Any]]) -> Inventory:
    return parse_fleet({"schema": "gpuplace.io/fleet/v1", "nodes": nodes}, "test", load_gpu_catalog())


def hgx(name: str, allocated: list[int] | None = None) -> dict[str, Any]:
    """8 H100: two NVLink islands of 4 (one per NUMA node), a PCIe switch per pair."""
    alloc = allocated or [0] * 8
    return {
        "name": name,
        "numa_nodes": 2,
        "gpus": [
            {
                "product": H100,
                "count": 4,
                "numa_node": 0,
                "pcie_switch": ["s0", "s0", "s1", "s1"],
                "nvlink_island": "isl0",
                "allocated": alloc[:4],
            },
            {
                "product": H100,
                "count": 4,
                "numa_node": 1,
                "pcie_switch": ["s2", "s2", "s3", "s3"],
                "nvlink_island": "isl1",
                "allocated": alloc[4:],
            },
        ],
    }


def pcie(name: str) -> dict[str, Any]:
    """4 L4 on PCIe, no NVLink, two NUMA nodes."""
    return {
        "name": name,
        "numa_nodes": 2,
        "gpus": [
            {"product": L4, "count": 2, "numa_node": 0, "pcie_switch": "s0"},
            {"product": L4, "count": 2, "numa_node": 1, "pcie_switch": "s1"},
        ],
    }


def pod(gpus: object = 1, *, resource: str = "nvidia.com/gpu", **annotations: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ns", "annotations": annotations},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {resource: gpus}}}]},
    }


def state_of(*nodes: dict[str, Any]) -> ClusterState:
    return fleet_state(fleet(list(nodes)), ClusterState())


# --- pod requests -------------------------------------------------------------------------------------
def test_pod_request_reads_resources_and_annotations() -> None:
    req = pod_request(
        pod("4", **{"gpuplace.io/require-topology": "nvlink", "gpuplace.io/gpu-models": "H100-SXM-80GB, L4"})
    )
    assert req == GpuRequest("nvidia.com/gpu", 4, "nvlink", ("h100-sxm-80gb", "l4"))
    assert pod_request({"spec": {"containers": [{"name": "c"}]}}).count == 0
    mig = pod_request(pod(1, resource="nvidia.com/mig-3g.40gb"))
    assert (mig_profile_of(mig.resource), mig.count) == ("3g.40gb", 1)


def test_init_containers_count_as_the_larger_need() -> None:
    p = pod(2)
    p["spec"]["initContainers"] = [{"name": "i", "resources": {"limits": {"nvidia.com/gpu": "3"}}}]
    assert pod_request(p).count == 3


@pytest.mark.parametrize("value", ["0.5", "500m", "-1", "lots", 1.5])
def test_fractional_or_negative_gpu_requests_are_invalid_and_name_the_field(value: object) -> None:
    with pytest.raises(InvalidInput) as e:
        pod_request(pod(value))
    assert "pod.spec.containers[0].resources.nvidia.com/gpu" in str(e.value)


def test_unknown_topology_offers_the_known_ones() -> None:
    with pytest.raises(InvalidInput) as e:
        pod_request(pod(2, **{"gpuplace.io/require-topology": "nvlnk"}))
    assert "'nvlink'" in str(e.value) and "require-topology" in str(e.value)


def test_two_kinds_of_gpu_resource_are_invalid() -> None:
    p = pod(1)
    p["spec"]["containers"].append({"name": "d", "resources": {"limits": {"nvidia.com/mig-1g.10gb": "1"}}})
    with pytest.raises(InvalidInput, match="more than one kind"):
        pod_request(p)


# --- node fit -------------------------------------------------------------------------------------------
def test_nvlink_requirement_uses_the_planner_gpu_set_and_refuses_pcie_only_nodes() -> None:
    inv = fleet([hgx("nv", [1, 1, 0, 0, 0, 0, 0, 0]), pcie("pc")])
    frag = FragmentationModel(DEFAULT_LLM_MIX)
    req = GpuRequest(GPU, count=4, topology="nvlink")
    nv = node_fit(inv.node("nv"), req, frag)
    # island 0 has only 2 free: the set is island 1, exactly what the planner's best_gpu_set picks there.
    free1 = [g for g in inv.node("nv").gpus if g.nvlink_island == "isl1"]
    expected = best_gpu_set(free1, 4)
    assert expected is not None
    assert nv.fits and nv.devices == tuple(g.id for g in expected) and nv.interconnect == "nvlink"
    pc = node_fit(inv.node("pc"), req, frag)
    assert not pc.fits and pc.unresolvable and "no NVLink island with 4 GPUs" in pc.reason


def test_busy_island_is_a_resolvable_failure() -> None:
    inv = fleet([hgx("nv", [1, 0, 0, 0, 0, 1, 0, 0])])
    fit = node_fit(
        inv.node("nv"), GpuRequest(GPU, count=4, topology="nvlink"), FragmentationModel(DEFAULT_LLM_MIX)
    )
    assert not fit.fits and not fit.unresolvable and "6 of 8 GPUs free" in fit.reason


@pytest.mark.parametrize(
    ("topology", "count", "fits"),
    [
        ("numa", 2, True),
        ("pcie-switch", 2, True),
        ("numa", 3, False),
        ("pcie-switch", 3, False),
        ("none", 4, True),
    ],
)
def test_numa_and_pcie_switch_requirements(topology: str, count: int, fits: bool) -> None:
    inv = fleet([pcie("pc")])
    fit = node_fit(
        inv.node("pc"), GpuRequest(GPU, count=count, topology=topology), FragmentationModel(DEFAULT_LLM_MIX)
    )
    assert fit.fits is fits
    if fits and count == 2:
        assert fit.interconnect == "pcie-switch"


def test_gpu_model_constraint_matches_catalog_name_or_product() -> None:
    inv = fleet([hgx("nv"), pcie("pc")])
    frag = FragmentationModel(DEFAULT_LLM_MIX)
    by_product = GpuRequest(GPU, count=1, models=(L4.lower(),))
    assert node_fit(inv.node("pc"), by_product, frag).fits
    miss = node_fit(inv.node("nv"), by_product, frag)
    assert not miss.fits and miss.unresolvable and "no GPU of model" in miss.reason
    name = inv.node("nv").gpus[0].gpu.lower()
    assert node_fit(inv.node("nv"), GpuRequest(GPU, count=1, models=(name,)), frag).fits


def test_mig_requests_need_a_free_slice_of_that_profile() -> None:
    inv = fleet(
        [
            {
                "name": "mig",
                "mig_strategy": "mixed",
                "gpus": [{"product": "NVIDIA-A100-SXM4-80GB", "count": 1, "mig": ["3g.40gb", "3g.40gb"]}],
            }
        ]
    )
    node = inv.node("mig")
    frag = FragmentationModel(DEFAULT_LLM_MIX)
    one = node_fit(node, GpuRequest("nvidia.com/mig-3g.40gb", 1), frag)
    assert one.fits and one.interconnect == "mig" and len(one.devices) == 1
    assert not node_fit(node, GpuRequest("nvidia.com/mig-3g.40gb", 3), frag).fits
    assert not node_fit(node, GpuRequest("nvidia.com/mig-1g.10gb", 1), frag).fits
    taken = allocate(node, [PodGpus("mig", {"nvidia.com/mig-3g.40gb": 2})])
    busy = node_fit(taken, GpuRequest("nvidia.com/mig-3g.40gb", 1), frag)
    assert not busy.fits and not busy.unresolvable


def test_fit_score_and_fragmentation_are_the_planners() -> None:
    inv = fleet([hgx("nv", [1, 1, 1, 0, 0, 0, 0, 0])])
    frag = FragmentationModel(DEFAULT_LLM_MIX)
    fit = node_fit(inv.node("nv"), GpuRequest(GPU, count=1), frag)
    planner = FleetState.of(inv.nodes, frag)
    delta = planner.delta(inv.node("nv"), dict.fromkeys(fit.devices, 1.0))
    assert fit.frag_delta_gpus == pytest.approx(delta)
    assert fit.fit_score == pytest.approx(fit_score(0.0, 0.0, "single", delta, 1.0))


def test_scores_rank_fits_best_first_and_misfits_zero() -> None:
    # Node "full" has one GPU left: filling it removes a fragment; "empty" would break up a whole node.
    inv = fleet([hgx("full", [1, 1, 1, 1, 1, 1, 1, 0]), hgx("empty"), pcie("pc")])
    frag = FragmentationModel(DEFAULT_LLM_MIX)
    req = GpuRequest(GPU, count=1, models=(H100.lower(),))
    fits = [node_fit(n, req, frag) for n in inv.nodes]
    got = scores(fits)
    assert got == {"full": 10, "empty": 9, "pc": 0}
    assert fits[0].frag_delta_gpus < fits[1].frag_delta_gpus


def test_time_sliced_nodes_count_slots() -> None:
    inv = fleet(
        [{"name": "ts", "time_slicing": 2, "gpus": [{"product": L4, "count": 2, "allocated": [0.5, 0]}]}]
    )
    node = inv.node("ts")
    frag = FragmentationModel(DEFAULT_LLM_MIX)
    one = node_fit(node, GpuRequest(GPU, count=1), frag)
    assert one.fits and one.interconnect == "shared" and one.devices == ("ts/gpu0",)  # the fuller GPU first
    assert node_fit(node, GpuRequest(GPU, count=3), frag).fits
    assert not node_fit(node, GpuRequest(GPU, count=4), frag).fits
    assert node_fit(node, GpuRequest(GPU, count=2, topology="nvlink"), frag).unresolvable


# --- state ------------------------------------------------------------------------------------------------
def bound(
    name: str, node: str, gpus: int, devices: list[str] | None = None, phase: str = "Running"
) -> dict[str, Any]:
    p = pod(str(gpus))
    p["metadata"]["name"] = name
    p["spec"]["nodeName"] = node
    p["status"] = {"phase": phase}
    if devices is not None:
        p["metadata"]["annotations"][ASSIGNMENT_ANNOTATION] = json.dumps({"node": node, "devices": devices})
    return p


def test_pods_take_recorded_devices_else_the_lowest_indices() -> None:
    st = state_of(hgx("nv"))
    st.set_pod(bound("a", "nv", 2, ["nv/gpu6", "nv/gpu7"]))
    st.set_pod(bound("b", "nv", 1))
    st.set_pod(bound("done", "nv", 4, phase="Succeeded"))
    state = st.state("nv")
    assert not isinstance(state, str)
    assert [g.index for g in state.gpus if g.allocated] == [0, 6, 7]
    st.remove_pod("ns/a")
    state = st.state("nv")
    assert not isinstance(state, str)
    assert [g.index for g in state.gpus if g.allocated] == [0]


def test_assignment_for_another_node_is_ignored() -> None:
    raw = {ASSIGNMENT_ANNOTATION: json.dumps({"node": "x", "devices": ["x/gpu0"]})}
    assert read_assignment(raw, "y") == () and read_assignment(raw, "x") == ("x/gpu0",)
    assert read_assignment({ASSIGNMENT_ANNOTATION: "{not json"}, "x") == ()


def test_fits_are_memoised_until_the_node_changes() -> None:
    st = state_of(hgx("nv"))
    req = GpuRequest(GPU, count=8)
    first = st.fit("nv", req)
    assert st.fit("nv", req) is first
    st.set_pod(bound("a", "nv", 1))
    after = st.fit("nv", req)
    assert first.fits and not after.fits


def test_a_change_recomputes_that_node_only_and_invalidates_cached_answers() -> None:
    st = state_of(hgx("a"), hgx("b"))
    req = GpuRequest(GPU, count=1)
    a, b = st.fits(["a", "b"], req)
    service = ExtenderService(st)
    body = args(pod(1), ["a", "b"])
    first = service.respond("prioritize", body)[1]
    assert isinstance(first, bytes) and service.respond("prioritize", body)[1] is first  # no change: reused
    st.set_pod(bound("x", "a", 7))
    a2, b2 = st.fits(["a", "b"], req)
    assert a2 is not a and b2 is b  # only the changed node is computed again
    again = service.respond("prioritize", body)[1]
    assert again is not first and json.loads(again) != json.loads(first)
    # Each pod's decision is kept under its own name, cached answer or not.
    other = pod(1)
    other["metadata"]["name"] = "q"
    service.respond("filter", args(pod(1), ["a", "b"]))
    service.respond("filter", args(other, ["a", "b"]))
    decisions = service.stats()["pods"]
    assert decisions["ns/p"]["passed"] == decisions["ns/q"]["passed"] == 2
    assert "bound" not in decisions["ns/q"]


def test_nodes_without_gpus_or_unknown_fail_with_a_reason() -> None:
    st = ClusterState()
    st.set_node({"metadata": {"name": "cpu"}, "status": {"allocatable": {"cpu": "8", "memory": "16Gi"}}})
    fit = st.fit("cpu", GpuRequest(GPU, count=1))
    assert not fit.fits and fit.unresolvable and "no GPUs" in fit.reason
    unknown = st.fit("ghost", GpuRequest(GPU, count=1))
    assert not unknown.fits and not unknown.unresolvable
    st.set_node({"metadata": {"name": "bad"}, "status": {"allocatable": {"nvidia.com/gpu": "many"}}})
    assert "unreadable" in st.fit("bad", GpuRequest(GPU, count=1)).reason


# --- service verbs (no HTTP) ------------------------------------------------------------------------------
def args(p: dict[str, Any], names: list[str]) -> bytes:
    return json.dumps({"Pod": p, "NodeNames": names}).encode()


def test_filter_and_prioritize_answer_in_the_go_field_names() -> None:
    svc = ExtenderService(state_of(hgx("nv", [1, 1, 1, 1, 1, 1, 1, 0]), hgx("nv2"), pcie("pc")))
    status, out = svc.handle(
        "filter", args(pod("4", **{"gpuplace.io/require-topology": "nvlink"}), ["nv", "nv2", "pc"])
    )
    assert status == 200
    assert set(out) == {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes", "Error"}
    assert out["NodeNames"] == ["nv2"]
    assert set(out["FailedNodes"]) == {"nv"} and set(out["FailedAndUnresolvableNodes"]) == {"pc"}
    status, pri = svc.handle("prioritize", args(pod("1"), ["nv", "nv2", "pc"]))
    assert status == 200 and pri[0] == {"Host": "nv", "Score": 10}
    assert all(0 <= h["Score"] <= 10 for h in pri)
    assert svc.stats()["pods"]["ns/p"]["best"] == ["nv"]


def test_filter_with_full_node_objects_echoes_them() -> None:
    inv = fleet([hgx("nv"), pcie("pc")])
    svc = ExtenderService(ClusterState())
    body = {
        "Pod": pod("4", **{"gpuplace.io/require-topology": "nvlink"}),
        "Nodes": {"items": [node_object(n) for n in inv.nodes]},
    }
    status, out = svc.handle("filter", json.dumps(body).encode())
    assert status == 200 and out["NodeNames"] is None
    assert [n["metadata"]["name"] for n in out["Nodes"]["items"]] == ["nv"]
    assert out["Nodes"]["items"][0] == node_object(inv.node("nv"))


def test_a_bad_pod_fails_every_node_with_the_reason_not_a_500() -> None:
    svc = ExtenderService(state_of(hgx("nv")))
    status, out = svc.handle("filter", args(pod("0.5"), ["nv"]))
    assert status == 200 and out["NodeNames"] == []
    assert "whole number" in out["FailedAndUnresolvableNodes"]["nv"]


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        (b"{not json", "not JSON"),
        (b"[]", "body"),
        (json.dumps({"NodeNames": ["a"]}).encode(), "Pod"),
        (json.dumps({"Pod": {}, "NodeNames": ["a"], "Extra": 1}).encode(), "Extra"),
        (json.dumps({"Pod": {}}).encode(), "neither given"),
        (json.dumps({"Pod": {}, "NodeNames": [""]}).encode(), "NodeNames.0"),
        (
            json.dumps({"Pod": {}, "Nodes": {"items": [{"metadata": {}}]}}).encode(),
            "Nodes.items.0.metadata.name",
        ),
        (b"[" * 100_000 + b"]" * 100_000, "not JSON"),
    ],
)
def test_malformed_requests_are_400_naming_the_field(body: bytes, needle: str) -> None:
    status, out = ExtenderService(ClusterState()).handle("filter", body)
    assert status == 400 and needle in out["Error"]


def test_ten_thousand_nodes_is_over_the_limit() -> None:
    svc = ExtenderService(ClusterState())
    names = [f"n{i}" for i in range(10_000)]
    status, out = svc.handle("prioritize", args(pod("1"), names))
    assert status == 400 and "10000 nodes, more than the limit of 5000" in out["Error"]
    nodes = {"Pod": pod("1"), "Nodes": {"items": [{"metadata": {"name": n}} for n in names]}}
    status, out = svc.handle("filter", json.dumps(nodes).encode())
    assert status == 400 and "Nodes.items" in out["Error"]


def test_bind_without_an_api_reports_an_error_to_the_scheduler() -> None:
    svc = ExtenderService(ClusterState())
    body = json.dumps({"PodName": "p", "PodNamespace": "ns", "PodUID": "u", "Node": "n"}).encode()
    status, out = svc.handle("bind", body)
    assert status == 200 and "no Kubernetes API connection" in out["Error"]
    status, out = svc.handle("bind", b'{"PodName": "p"}')
    assert status == 400 and "PodNamespace" in out["Error"]


# --- configuration and manifests --------------------------------------------------------------------------
def test_scheduler_configuration_has_the_extender_stanza() -> None:
    conf = cfg.scheduler_configuration(cfg.ExtenderSettings(scheduler_name="gpu", weight=7))
    ext = conf["extenders"][0]
    assert conf["kind"] == "KubeSchedulerConfiguration" and conf["profiles"] == [{"schedulerName": "gpu"}]
    assert ext["urlPrefix"] == "http://127.0.0.1:8888/gpuplace"
    assert (ext["filterVerb"], ext["prioritizeVerb"], ext["bindVerb"], ext["weight"]) == (
        "filter",
        "prioritize",
        "bind",
        7,
    )
    assert ext["nodeCacheCapable"] and ext["ignorable"] and ext["httpTimeout"] == "5s"
    assert ext["managedResources"] == [{"name": "nvidia.com/gpu", "ignoredByScheduler": False}]
    assert "bindVerb" not in cfg.extender_stanza(cfg.ExtenderSettings(bind=False))


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"url": "127.0.0.1:8888"}, "url"),
        ({"weight": 0}, "weight"),
        ({"managed_resources": ("cpu",)}, "managed_resources"),
    ],
)
def test_bad_settings_name_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInput, match=field):
        cfg.ExtenderSettings(**kwargs)


def test_manifests_validate_against_the_kubernetes_schemas() -> None:
    docs = cfg.manifests(namespace="gpu-system", image="example.com/gpuplace:1")
    assert [d["kind"] for d in docs] == [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "Service",
    ]
    for doc in docs:
        kubernetes_validate.validate(doc, "1.34.0", strict=True)
    rendered = list(yaml.safe_load_all(cfg.render(docs)))
    assert rendered == docs
    with pytest.raises(InvalidInput, match="replicas"):
        cfg.manifests(replicas=2)


def test_a_node_claiming_billions_of_gpus_is_refused_not_built() -> None:
    st = ClusterState()
    st.set_node({"metadata": {"name": "huge"}, "status": {"allocatable": {"nvidia.com/gpu": "3Gi"}}})
    fit = st.fit("huge", GpuRequest(GPU, count=1))
    assert not fit.fits and "more than 4096 devices" in fit.reason
