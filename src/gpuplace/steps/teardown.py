"""The teardown step: what a deploy created, named by its plan directory, its deployment record or the run id
it was labelled with, removed.

Shared by ``gpuplace teardown`` and the ``teardown_inference`` component (a pipeline's exit handler, which
knows only the run id), through its parameter table :data:`PARAMS` (:mod:`gpuplace.params`): reads the
plan directory (:mod:`gpuplace.plandir`) and the record (:mod:`gpuplace.deploy.record`) when given, then
:func:`gpuplace.deploy.teardown` on those values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuplace.deploy import TARGETS, check_target, teardown
from gpuplace.deploy.record import read_record
from gpuplace.params import Param, parse_as
from gpuplace.plandir import read_plan_dir
from gpuplace.steps.deploy import CONNECTION

PARAMS: tuple[Param, ...] = (
    Param(
        "run_id",
        str,
        "",
        "tear down what was labelled with this run id (no plan needed)",
    ),
    Param("target", str, "kubernetes", "where it was deployed", choices=TARGETS),
    Param("namespace", str, "default", "namespace it was deployed into"),
    *CONNECTION,
    Param("timeout_s", float, 120.0, "deadline for deleting and waiting, seconds", "--timeout", unit="s"),
)


@dataclass(frozen=True, slots=True)
class TeardownValues:
    """:data:`PARAMS`'s values, typed: one field per row, read by :func:`~gpuplace.params.parse_as` (its
    defaults are the table's alone)."""

    run_id: str
    target: str
    namespace: str
    kubeconfig: str
    context: str
    timeout_s: float


def run_teardown_step(
    plan_dir: str | Path | None,
    params: Mapping[str, Any],
    *,
    record: str | Path | None = None,
    record_field: str = "record",
    in_cluster: bool = False,
) -> str:
    """Tear down; the one-line summary. ``params``: :data:`PARAMS` by name (other keys ignored); an empty
    ``kubeconfig`` means in-cluster when ``in_cluster`` (a KFP task) and the kubernetes target.
    ``record_field`` names the record's parameter in errors."""
    p = parse_as(TeardownValues, PARAMS, params)
    check_target(p.target)
    kubeconfig = p.kubeconfig or ("in-cluster" if in_cluster and p.target == "kubernetes" else None)
    return teardown(
        read_plan_dir(plan_dir) if plan_dir else None,
        target=p.target,
        kubeconfig=kubeconfig,
        context=p.context or None,
        namespace=p.namespace,
        record=read_record(record, record_field) if record else None,
        run_id=p.run_id,
        timeout_s=p.timeout_s,
    )
