"""Property tests over extender request bodies: any body gets a 200 or a 400, never an exception, quickly.

Arbitrary JSON, arbitrary bytes, and well-shaped requests whose pods and Node objects carry random
quantities, labels and annotations. For a 200, the answer keeps the protocol's invariants: every
candidate node is either passed or failed (once), and priorities are 0–10 for every candidate.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuplace.catalog import load_gpu_catalog
from gpuplace.extender.run import fleet_state
from gpuplace.extender.service import ExtenderService
from gpuplace.extender.state import ClusterState
from gpuplace.inventory import load_inventory

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
quantities = st.one_of(
    st.sampled_from(["1", "2", "4", "8", "0", "-1", "0.5", "500m", "1k", "3Gi", "", "x", "1e3", "9" * 30]),
    st.integers(-5, 10),
    st.floats(-2, 10, allow_nan=False),
    st.text(max_size=6),
)
resources = st.sampled_from(["nvidia.com/gpu", "nvidia.com/mig-3g.40gb", "nvidia.com/mig-1g.10gb", "cpu"])
annotations = st.dictionaries(
    st.sampled_from(
        ["gpuplace.io/require-topology", "gpuplace.io/gpu-models", "gpuplace.io/gpu-assignment", "x"]
    ),
    st.sampled_from(["nvlink", "numa", "pcie-switch", "none", "", "bogus", "L4", "H100-SXM-80GB,A100", "{}"])
    | st.text(max_size=10),
    max_size=3,
)
pods = st.fixed_dictionaries(
    {
        "metadata": st.fixed_dictionaries({"name": st.text(max_size=8), "annotations": annotations}),
        "spec": st.fixed_dictionaries(
            {
                "containers": st.lists(
                    st.fixed_dictionaries(
                        {
                            "name": st.just("c"),
                            "resources": st.fixed_dictionaries(
                                {"limits": st.dictionaries(resources, quantities, max_size=2)}
                            ),
                        }
                    ),
                    max_size=3,
                )
            }
        ),
    }
)
FLEET = fleet_state(load_inventory("mixed-a100-h100-l4"), ClusterState(catalog=load_gpu_catalog()))
NAMES = FLEET.node_names()
node_names = st.lists(st.sampled_from([*NAMES, "ghost", "x" * 253]), max_size=12)
node_objects = st.lists(
    st.fixed_dictionaries(
        {
            "metadata": st.fixed_dictionaries(
                {
                    "name": st.text(min_size=1, max_size=12),
                    "labels": st.dictionaries(
                        st.sampled_from(
                            ["nvidia.com/gpu.product", "nvidia.com/mig.strategy", "nvidia.com/gpu.replicas"]
                        ),
                        st.sampled_from(
                            ["NVIDIA-L4", "NVIDIA-H100-80GB-HBM3", "mixed", "single", "2", "0", "?"]
                        ),
                    ),
                    "annotations": st.dictionaries(
                        st.sampled_from(["gpuplace.io/gpu-topology", "gpuplace.io/numa-nodes"]),
                        st.sampled_from(['[{"index":0,"numa_node":1}]', "[{", "2", "x", "[]"]),
                    ),
                }
            ),
            "status": st.fixed_dictionaries(
                {"allocatable": st.dictionaries(resources | st.just("memory"), quantities, max_size=3)}
            ),
        }
    ),
    max_size=6,
    unique_by=lambda n: n["metadata"]["name"],
)


def check(svc: ExtenderService, verb: str, body: bytes, candidates: list[str] | None) -> None:
    status, out = svc.handle(verb, body)
    assert status in (200, 400), out
    if status == 400:
        assert out["Error"].startswith(f"gpuplace {verb}: ")
        return
    if candidates is None:
        return
    if verb == "filter":
        passed = (
            out["NodeNames"]
            if out["NodeNames"] is not None
            else [n["metadata"]["name"] for n in out["Nodes"]["items"]]
        )
        failed = list(out["FailedNodes"]) + list(out["FailedAndUnresolvableNodes"])
        assert sorted(passed + failed) == sorted(set(candidates))
    else:
        assert [h["Host"] for h in out] == candidates
        assert all(0 <= h["Score"] <= 10 for h in out)


FAST = settings(max_examples=150, deadline=2000, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(st.binary(max_size=200))
def test_any_bytes(body: bytes) -> None:
    for verb in ("filter", "prioritize", "bind"):
        check(ExtenderService(ClusterState()), verb, body, None)


@FAST
@given(json_values)
def test_any_json(value: Any) -> None:
    for verb in ("filter", "prioritize", "bind"):
        check(ExtenderService(ClusterState()), verb, json.dumps(value).encode(), None)


@FAST
@given(pods, node_names, st.sampled_from(["filter", "prioritize"]))
def test_random_pods_over_the_fleet(pod: dict[str, Any], names: list[str], verb: str) -> None:
    body = json.dumps({"Pod": pod, "NodeNames": names}).encode()
    check(ExtenderService(FLEET), verb, body, names if len(set(names)) == len(names) else None)


@FAST
@given(pods, node_objects, st.sampled_from(["filter", "prioritize"]))
def test_random_node_objects(pod: dict[str, Any], nodes: list[dict[str, Any]], verb: str) -> None:
    body = json.dumps({"Pod": pod, "Nodes": {"items": nodes}}).encode()
    check(ExtenderService(ClusterState()), verb, body, [n["metadata"]["name"] for n in nodes])
