"""gpuplace.k8s without a cluster: error mapping, retries under a deadline, labels,
rollout status, placement matching, pod timestamps and the RBAC Role.

The ApiException objects here are the kubernetes client's own class, built as the client builds them from
an HTTP response; no API server is involved (the control-plane tests in tests/integration do that).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import MaxRetryError, NewConnectionError

from gpuplace.errors import InvalidInput
from gpuplace.k8s import errors
from gpuplace.k8s.labelling import labelled
from gpuplace.k8s.measure import pair_with_plan
from gpuplace.k8s.rbac import deployer_rbac
from gpuplace.k8s.retry import Deadline, with_retries
from gpuplace.k8s.rollout import deployment_progress
from gpuplace.labels import PLAN_LABEL, REPLICA_LABEL, RUN_LABEL
from gpuplace.types import DeploymentRecord, PodRecord
from gpuplace.types.deploy import DraDevice
from gpuplace.types.plan import Placement


def _api_exc(
    status: int, reason: str = "", message: str = "", headers: dict[str, str] | None = None
) -> ApiException:
    e = ApiException(status=status, reason=reason)
    e.body = json.dumps(
        {"kind": "Status", "reason": reason, "message": message, "details": {"kind": "deployments"}}
    )
    e.headers = headers or {}
    return e


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (404, errors.NotFound),
        (409, errors.Conflict),
        (422, errors.Invalid),
        (400, errors.Invalid),
        (403, errors.Forbidden),
        (401, errors.Forbidden),
        (429, errors.Throttled),
        (500, errors.ServerError),
        (503, errors.ServerError),
    ],
)
def test_status_codes_map_to_the_hierarchy(status: int, cls: type[errors.KubeError]) -> None:
    err = errors.translate(_api_exc(status, "Why", "the message"), "apply Deployment/x")
    assert type(err) is cls
    assert err.status == status
    assert "apply Deployment/x" in str(err) and "the message" in str(err)
    assert err.retryable == (status in (429, 500, 503))


def test_connection_errors_are_unreachable_and_retryable() -> None:
    cause = MaxRetryError(None, "/api", NewConnectionError(None, "refused"))  # type: ignore[arg-type]
    err = errors.translate(cause, "get Node/a")
    assert isinstance(err, errors.Unreachable) and err.retryable


def test_throttled_reads_retry_after() -> None:
    err = errors.translate(_api_exc(429, "TooManyRequests", headers={"Retry-After": "3"}), "x")
    assert isinstance(err, errors.Throttled) and err.retry_after_s == 3.0


def test_invalid_lists_causes() -> None:
    e = ApiException(status=422, reason="Unprocessable")
    e.body = json.dumps(
        {
            "reason": "Invalid",
            "message": "bad",
            "details": {"causes": [{"field": "spec.replicas", "message": "must be >= 0"}]},
        }
    )
    err = errors.translate(e, "apply")
    assert isinstance(err, errors.Invalid)
    assert err.causes == ["spec.replicas: must be >= 0"]


def test_retries_5xx_then_succeeds_and_chains() -> None:
    calls: list[float] = []
    sleeps: list[float] = []

    def attempt(timeout_s: float) -> str:
        calls.append(timeout_s)
        if len(calls) < 3:
            raise _api_exc(503, "ServiceUnavailable")
        return "ok"

    assert with_retries(attempt, action="get", deadline=Deadline(30), sleep=sleeps.append) == "ok"
    assert len(calls) == 3 and sleeps == [0.1, 0.2]
    assert all(0.5 <= t <= 30 for t in calls)


def test_does_not_retry_client_errors() -> None:
    calls = []

    def attempt(_t: float) -> None:
        calls.append(1)
        raise _api_exc(403, "Forbidden", "no")

    with pytest.raises(errors.Forbidden) as info:
        with_retries(attempt, action="apply", deadline=Deadline(30), sleep=lambda _s: None)
    assert len(calls) == 1
    assert isinstance(info.value.__cause__, ApiException)


def test_throttled_waits_retry_after() -> None:
    sleeps: list[float] = []
    state = {"n": 0}

    def attempt(_t: float) -> int:
        state["n"] += 1
        if state["n"] == 1:
            raise _api_exc(429, "TooManyRequests", headers={"Retry-After": "2"})
        return state["n"]

    assert with_retries(attempt, action="x", deadline=Deadline(30), sleep=sleeps.append) == 2
    assert sleeps == [2.0]


def test_gives_up_at_the_deadline_with_the_last_error() -> None:
    def attempt(_t: float) -> None:
        raise _api_exc(429, "TooManyRequests", headers={"Retry-After": "5"})

    with pytest.raises(errors.Throttled, match="gave up after 1 tries within the 1 s deadline"):
        with_retries(attempt, action="x", deadline=Deadline(1), sleep=lambda _s: None)


def _dep(
    generation: int, observed: int, want: int, updated: int, total: int, available: int
) -> dict[str, object]:
    return {
        "metadata": {"name": "llm", "generation": generation},
        "spec": {"replicas": want},
        "status": {
            "observedGeneration": observed,
            "updatedReplicas": updated,
            "replicas": total,
            "availableReplicas": available,
        },
    }


@pytest.mark.parametrize(
    ("dep", "complete"),
    [
        (_dep(2, 2, 3, 3, 3, 3), True),
        (_dep(2, 1, 3, 3, 3, 3), False),  # controller has not seen the new spec
        (_dep(2, 2, 3, 2, 3, 3), False),  # one old pod left
        (_dep(2, 2, 3, 3, 4, 3), False),  # surge pod still there
        (_dep(2, 2, 3, 3, 3, 2), False),
    ],
)
def test_rollout_completion(dep: dict[str, object], complete: bool) -> None:
    done, line = deployment_progress(dep)
    assert done is complete
    assert line.startswith("Deployment llm: ")


def _placed(replica: int, node: str, gpu_ids: tuple[str, ...] = ()) -> Placement:
    return Placement(replica, node, gpu_ids, "single", None, 1.0, 0.0)


def test_labels_tie_objects_to_plan_and_run_but_templates_only_to_the_plan() -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "llm", "namespace": "other"},
        "spec": {"template": {"metadata": {"labels": {"app": "llm"}}, "spec": {}}},
    }
    dep = labelled(deployment, "p1", "run-7")
    assert dep["metadata"]["labels"] == {
        "app.kubernetes.io/managed-by": "gpuplace",
        PLAN_LABEL: "p1",
        RUN_LABEL: "run-7",
    }
    assert "namespace" not in dep["metadata"]
    assert dep["spec"]["template"]["metadata"]["labels"] == {
        "app": "llm",
        "app.kubernetes.io/managed-by": "gpuplace",
        PLAN_LABEL: "p1",
    }
    assert PLAN_LABEL not in json.dumps(deployment)  # the input is not mutated


def _pod(name: str, node: str, replica: int | None = None) -> dict[str, object]:
    labels = {REPLICA_LABEL: str(replica)} if replica is not None else {}
    return {"metadata": {"name": name, "labels": labels}, "spec": {"nodeName": node}}


def test_pairing_with_the_plan_prefers_the_planned_node() -> None:
    placements = (_placed(0, "a", ("a/0",)), _placed(1, "b", ("b/0",)), _placed(2, "c", ("c/0",)))
    pods = [_pod("p1", "b"), _pod("p2", "a"), _pod("p3", "x")]
    out = pair_with_plan(pods, placements)
    assert (out["p1"].node, out["p1"].gpu_ids) == ("b", ("b/0",))
    assert out["p2"].node == "a"
    assert out["p3"].node == "c"  # the pod on x is checked against c's placement: a mismatch


def test_pairing_with_the_plan_uses_replica_labels() -> None:
    placements = (_placed(0, "a"), _placed(1, "b"))
    out = pair_with_plan([_pod("p1", "a", 1), _pod("p2", "b", 0)], placements)
    assert out["p1"].node == "b" and out["p2"].node == "a"


def test_a_pod_record_counts_a_node_mismatch_even_without_stored_mismatches() -> None:
    assert PodRecord("p", node="x", planned_node="a").misplaced
    assert not PodRecord("p", node="a", planned_node="a").misplaced
    assert PodRecord("p", node="a", planned_node="a", mismatches=("claim outside the plan",)).misplaced


def test_deployment_json_keeps_the_raw_dra_allocation_beside_the_gpu_id() -> None:
    """What the API said (driver, pool, device) survives deployment.json beside the inventory id."""
    raw = DraDevice("gpu.nvidia.com", "h100-a-0", "gpu-0", "h100-a-0/gpu0", claim="c-1", request="gpus")
    unknown = DraDevice("gpu.nvidia.com", "h100-a-0", "gpu-9")  # the slice no longer says which GPU
    pod = PodRecord("p", node="h100-a-0", gpu_ids=("h100-a-0/gpu0",), dra_devices=(raw, unknown))
    record = DeploymentRecord("kubernetes", "d", "ns", "http://x", "m", True, pods=(pod,), gpu_api="dra")
    data = json.loads(json.dumps(record.to_json_dict()))
    assert data["pods"][0]["dra_devices"][0] == {
        "driver": "gpu.nvidia.com", "pool": "h100-a-0", "device": "gpu-0", "gpu_id": "h100-a-0/gpu0",
        "claim": "c-1", "request": "gpus",
    }  # fmt: skip
    assert DeploymentRecord.from_json_dict(data) == record
    older = json.loads(json.dumps(record.to_json_dict()))
    del older["pods"][0]["dra_devices"]  # a record written before the field: no devices, not an error
    assert DeploymentRecord.from_json_dict(older).pods[0].dra_devices == ()


def test_rbac_role_is_minimal_and_only_resource_slices_are_read_cluster_wide() -> None:
    sa, role, binding, cluster_role, cluster_binding = deployer_rbac("ns1")
    assert (sa["kind"], role["kind"], binding["kind"]) == ("ServiceAccount", "Role", "RoleBinding")
    verbs = {v for r in role["rules"] for v in r["verbs"]}
    assert verbs <= {"get", "list", "watch", "create", "patch", "delete"}
    assert not any("secrets" in r["resources"] or "*" in r["resources"] for r in role["rules"])
    # teardown lists what was labelled (by plan or run id) in every kind a plan holds; a crash is explained
    # with the container's last log lines
    granted = {
        (g, res): set(r["verbs"]) for r in role["rules"] for g in r["apiGroups"] for res in r["resources"]
    }
    for group, kind in [("apps", "deployments"), ("", "services"), ("policy", "poddisruptionbudgets")]:
        assert {"get", "list", "create", "patch", "delete"} <= granted[(group, kind)], kind
    assert granted[("resource.k8s.io", "resourceclaims")] >= {"list", "delete"}
    assert granted[("", "pods/log")] == {"get"}
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "gpuplace-deployer", "namespace": "ns1"}
    ]
    # cluster-wide: read ResourceSlices, nothing else
    assert cluster_role["rules"] == [
        {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"], "verbs": ["get", "list"]}
    ]
    assert cluster_binding["roleRef"]["name"] == cluster_role["metadata"]["name"] == "gpuplace-deployer-ns1"


def test_deploy_dispatcher_rejects_unknown_targets_and_local_teardown_needs_a_record(tmp_path: Path) -> None:
    from gpuplace.deploy import teardown
    from gpuplace.steps.deploy import run_deploy_step
    from gpuplace.steps.teardown import run_teardown_step

    # refused before the plan directory (here: none) is read, and before anything is written
    with pytest.raises(InvalidInput, match="target='nomad'"):
        run_deploy_step(tmp_path, tmp_path / "deployment.json", {"target": "nomad"})
    with pytest.raises(InvalidInput, match="target='nomad'"):
        run_teardown_step(tmp_path, {"target": "nomad"})
    assert not (tmp_path / "deployment.json").exists()
    with pytest.raises(InvalidInput, match="record=None"):
        teardown(target="local")


def test_record_is_printed_with_provisioning_summary() -> None:
    from gpuplace.deploy import format_record
    from gpuplace.types import DeploymentRecord

    pods = (
        PodRecord(
            "a", node="n1", planned_node="n1", created_at_s=0, scheduled_at_s=1, ready_at_s=2, serving_at_s=3
        ),
        PodRecord(
            "b", node="n2", planned_node="n1", created_at_s=0, scheduled_at_s=1, ready_at_s=2, serving_at_s=5
        ),
    )
    record = DeploymentRecord("kubernetes", "llm", "ns", "", "tiny", True, pods, notes=("x",))
    text = format_record(record)
    assert "p50 4.00 s, max 5.00 s over 2 pods" in text
    assert "note: x" in text


def test_unschedulable_reads_the_pod_scheduled_condition() -> None:
    from gpuplace.k8s.rollout import unschedulable

    refused = {
        "status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
    }
    assert unschedulable(refused)
    assert not unschedulable({"status": {"conditions": [{"type": "PodScheduled", "status": "True"}]}})
    assert not unschedulable({})


def test_stand_in_servers_are_registered_by_plan_and_run_and_forgotten_under_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpuplace.deploy.registry import register_standin, standin_records, stop_standins
    from gpuplace.types import DeploymentRecord

    monkeypatch.setenv("GPUPLACE_STATE_DIR", str(tmp_path))
    server = DeploymentRecord(
        "local", "kwok-p0", "", "http://127.0.0.1:1", "m", True
    )  # no pid: nothing to kill
    record = DeploymentRecord("kubernetes", "llm", "ns", "http://127.0.0.1:1", "m", True)
    register_standin(record, {"p0": server}, "ns", "plan1", "r1")
    assert len(standin_records("ns", "plan1")) == 1 == len(standin_records("ns", "run-r1"))
    assert stop_standins("ns", ["run-r1"]) == 1
    assert standin_records("ns", "plan1") == [] == standin_records("ns", "run-r1")
