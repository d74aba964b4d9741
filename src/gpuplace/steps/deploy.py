"""The deploy step: a plan directory in, the deployment record (``deployment.json``) out.

Shared by ``gpuplace deploy`` and the ``deploy_inference`` component. :data:`PARAMS` is its parameter table
(:mod:`gpuplace.params`): the CLI's flags come from it, the component's signature is checked against it,
and :func:`run_deploy_step` reads either's values by its names. The step reads the plan directory once
(:mod:`gpuplace.plandir`), deploys it (:func:`gpuplace.deploy.deploy`, on that value) and writes the record
through :mod:`gpuplace.deploy.record` — also when the placement check fails, so the failed step's output
shows where the pods are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuplace.deploy import RUNTIMES, TARGETS, check_target, deploy
from gpuplace.deploy.record import save_record
from gpuplace.params import Param, parse_as
from gpuplace.plandir import read_plan_dir
from gpuplace.types import DeploymentRecord

ON_FAILURE = ("teardown", "rollback", "keep")
GPU_APIS = ("auto", "dra", "device-plugin")

# How a step reaches the cluster (deploy and teardown alike).
CONNECTION: tuple[Param, ...] = (
    Param(
        "kubeconfig",
        str,
        "",
        "kubeconfig file (default: $KUBECONFIG, ~/.kube/config, else in-cluster; a task: in-cluster)",
    ),
    Param("context", str, "", "kubeconfig context (default: the current one)", component=False),
)

PARAMS: tuple[Param, ...] = (
    Param("target", str, "kubernetes", "where to deploy", choices=TARGETS),
    Param("namespace", str, "default", "namespace to deploy into"),
    *CONNECTION,
    Param("run_id", str, "", "pipeline run id to label objects with (default: $KFP_RUN_ID)"),
    Param("timeout_s", float, 300.0, "deadline for apply + rollout, seconds", "--timeout", unit="s"),
    Param(
        "on_failure",
        str,
        "teardown",
        "what to do with applied objects when the rollout fails",
        choices=ON_FAILURE,
    ),
    Param(
        "gpu_api",
        str,
        "auto",
        "how pods get GPUs: dra claims each replica's planned devices (placement measured per GPU); "
        "device-plugin uses nvidia.com/gpu (node level only); auto: dra when the DRA driver publishes "
        "every planned GPU",
        choices=GPU_APIS,
    ),
    Param(
        "runtime",
        str,
        "auto",
        "what serves the pods: kubelet (a real cluster; first request through the API server's pod "
        "proxy), standin (KWOK: a local engine per pod on this machine), none (do not wait for the first "
        "request: provisioning unknown); auto: standin on a gpuplace testenv, else kubelet",
        choices=RUNTIMES,
    ),
    Param(
        "allow_misplacement",
        bool,
        False,
        "keep a deployment whose pods are not where the plan put them (default: fail and clean up)",
    ),
    Param("create_namespace", bool, False, "create the namespace when it does not exist"),
    Param("path", str, "", 'the orchestration path this deploy is ("native" in a comparison)', cli=False),
    Param(
        "port",
        int,
        0,
        "--target local: the server's port on 127.0.0.1 (0: any free port; the record and the "
        "printed endpoint say which)",
        component=False,
    ),
)


@dataclass(frozen=True, slots=True)
class DeployValues:
    """:data:`PARAMS`'s values, typed: one field per row, read by :func:`~gpuplace.params.parse_as` (its
    defaults are the table's alone)."""

    target: str
    namespace: str
    kubeconfig: str
    context: str
    run_id: str
    timeout_s: float
    on_failure: str
    gpu_api: str
    runtime: str
    allow_misplacement: bool
    create_namespace: bool
    path: str
    port: int


def run_deploy_step(
    plan_dir: str | Path,
    record_path: str | Path,
    params: Mapping[str, Any],
    *,
    in_cluster: bool = False,
    workdir: str | Path | None = None,
    log: Callable[[str], None] | None = None,
) -> DeploymentRecord:
    """Deploy the plan in ``plan_dir`` with ``params`` (:data:`PARAMS` by name; other keys ignored) and
    write the record to the file ``record_path``, also when
    :class:`~gpuplace.k8s.measure.PlacementMismatch` is raised. An empty ``kubeconfig`` means in-cluster
    when ``in_cluster`` (a KFP task) and the kubernetes target, else the default kubeconfig."""
    from gpuplace.k8s.measure import PlacementMismatch

    p = parse_as(DeployValues, PARAMS, params)
    check_target(p.target, p.port)
    kubeconfig = p.kubeconfig or ("in-cluster" if in_cluster and p.target == "kubernetes" else None)
    planned = read_plan_dir(plan_dir)
    try:
        record = deploy(
            planned,
            target=p.target,
            kubeconfig=kubeconfig,
            context=p.context or None,
            namespace=p.namespace,
            run_id=p.run_id,
            timeout_s=p.timeout_s,
            on_failure=p.on_failure,
            workdir=workdir,
            log=log,
            gpu_api=p.gpu_api,
            create_namespace=p.create_namespace,
            allow_misplacement=p.allow_misplacement,
            runtime=p.runtime,
            path=p.path,
            port=p.port,
        )
    except PlacementMismatch as e:
        save_record(e.record, record_path)
        raise
    save_record(record, record_path)
    return record
