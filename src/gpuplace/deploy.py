"""The deploy step's front door: ``gpuplace deploy`` / ``gpuplace teardown`` and the target dispatcher.

``kubernetes`` applies a plan directory with :mod:`gpuplace.k8s`; ``local`` starts an OpenAI-compatible
server on this machine with :mod:`gpuplace.serving.local` (imported only when asked for). Both return a
:class:`DeploymentRecord`, written as ``<out>/deployment.json`` for the load-test step.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from collections.abc import Callable
from pathlib import Path

from gpuplace.errors import InvalidInput
from gpuplace.types import DeploymentRecord

TARGETS = ("kubernetes", "local")
RECORD_FILE = "deployment.json"
STATE_DIR_ENV = "GPUPLACE_STATE_DIR"


def local_registry_path(key: str) -> Path:
    """Where a local deployment's record is kept, by plan id and by ``run-<run id>``, so that
    teardown needs only the plan or the run id: a pipeline's exit handler cannot read the outputs
    of the tasks it guards, but it knows the run id."""
    root = Path(os.environ.get(STATE_DIR_ENV) or Path.home() / ".cache" / "gpuplace")
    return root / "local-deployments" / key / RECORD_FILE


def deploy(
    plan_dir: str | Path,
    *,
    target: str = "kubernetes",
    kubeconfig: str | None = None,
    context: str | None = None,
    namespace: str = "default",
    run_id: str = "",
    timeout_s: float = 300.0,
    on_failure: str = "teardown",
    workdir: str | Path | None = None,
    log: Callable[[str], None] | None = None,
) -> DeploymentRecord:
    """Deploy the plan in ``plan_dir`` to ``target``; see docs/deploy.md."""
    from gpuplace.k8s.plandir import load_plan_dir

    if target not in TARGETS:
        raise InvalidInput("target", target, f"must be one of {', '.join(TARGETS)}")
    bundle = load_plan_dir(plan_dir)
    run_id = run_id or os.environ.get("KFP_RUN_ID", "")
    if target == "local":
        from gpuplace.serving.local import deploy_local  # type: ignore[import-not-found,unused-ignore]

        record: DeploymentRecord = deploy_local(
            bundle.model,
            workdir=Path(workdir or Path(plan_dir) / "local"),
            startup_timeout_s=timeout_s,
            name=bundle.deployment_name,
        )
        for key in (bundle.plan_id, f"run-{run_id}" if run_id else ""):
            if key:
                write_record(record, local_registry_path(key).parent)
        return record
    from gpuplace.k8s import Api, connect, deploy_plan

    api = Api(connect(kubeconfig, context=context))
    try:
        return deploy_plan(
            bundle,
            api=api,
            namespace=namespace,
            run_id=run_id,
            timeout_s=timeout_s,
            on_failure=on_failure,
            log=log,
        )
    finally:
        api.client.close()


def teardown(
    plan_dir: str | Path | None = None,
    *,
    target: str = "kubernetes",
    kubeconfig: str | None = None,
    context: str | None = None,
    namespace: str = "default",
    record: DeploymentRecord | None = None,
    run_id: str = "",
    timeout_s: float = 120.0,
) -> str:
    """Remove what a deploy created — named by the plan, the record, or the run id it was labelled
    with — and return a one-line summary."""
    if target not in TARGETS:
        raise InvalidInput("target", target, f"must be one of {', '.join(TARGETS)}")
    if target == "local":
        registry = None
        if record is None and (plan_dir is not None or run_id):
            from gpuplace.k8s.plandir import load_plan_dir

            key = f"run-{run_id}" if run_id else load_plan_dir(plan_dir or "").plan_id
            registry = local_registry_path(key)
            if not registry.is_file():
                return f"no local server registered for {key}: nothing to stop"
            record = DeploymentRecord.from_json_dict(json.loads(registry.read_text()))
        if record is None:
            raise InvalidInput(
                "record",
                None,
                "the local target needs the deployment record, and none is registered for this plan",
                "Pass --record <out>/deployment.json",
            )
        from gpuplace.serving.local import teardown_local

        teardown_local(record)
        if registry is not None:
            registry.unlink(missing_ok=True)
        return f"stopped local server {record.name} (pid {record.pid})"
    if plan_dir is None and not run_id:
        raise InvalidInput(
            "plan_dir", None, "needed for the kubernetes target", "Give the plan or the run id"
        )
    from gpuplace.k8s import Api, connect, load_plan_dir, teardown_plan, teardown_run

    api = Api(connect(kubeconfig, context=context))
    try:
        if plan_dir is not None:
            result = teardown_plan(load_plan_dir(plan_dir), api=api, namespace=namespace, timeout_s=timeout_s)
        else:
            result = teardown_run(api, namespace=namespace, run_id=run_id, timeout_s=timeout_s)
    finally:
        api.client.close()
    text = f"deleted {len(result.deleted)} objects" + (
        f", {len(result.absent)} already gone" if result.absent else ""
    )
    if result.pods_left:
        text += f"; {len(result.pods_left)} pods still terminating: {', '.join(result.pods_left)}"
    return text


def write_record(record: DeploymentRecord, out: str | Path) -> Path:
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / RECORD_FILE
    path.write_text(json.dumps(record.to_json_dict(), indent=2) + "\n")
    return path


def format_record(record: DeploymentRecord) -> str:
    lines = [f"{'pod':40} {'node':24} {'planned':24} {'phase':9} {'sched s':>8} {'ready s':>8}"]
    for p in record.pods:
        sched = "-" if math.isnan(p.scheduling_s) else f"{p.scheduling_s:.1f}"
        ready = "-" if math.isnan(p.provisioning_s) else f"{p.provisioning_s:.1f}"
        lines.append(f"{p.name:40} {p.node:24} {p.planned_node:24} {p.phase:9} {sched:>8} {ready:>8}")
    if record.pods:
        dist = record.provisioning()
        lines.append(
            f"provisioning (created → ready): p50 {dist.median:.1f} s, max {dist.max:.1f} s "
            f"over {dist.count} pods"
        )
    lines.extend(f"note: {n}" for n in record.notes)
    return "\n".join(lines)


# --- CLI ---------------------------------------------------------------------------------------------------
def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    d = sub.add_parser(
        "deploy", help="deploy a plan directory (kubernetes or local target)", description=__doc__
    )
    d.add_argument("plan_dir", help="directory with plan.json and manifests/ (written by gpuplace plan)")
    d.add_argument("--target", choices=TARGETS, default="kubernetes")
    d.add_argument("--kubeconfig", default=None, help="default: $KUBECONFIG, ~/.kube/config, else in-cluster")
    d.add_argument("--context", default=None)
    d.add_argument("--namespace", default="default")
    d.add_argument("--run-id", default="", help="pipeline run id to label objects with (default $KFP_RUN_ID)")
    d.add_argument("--timeout", type=float, default=300.0, help="deadline for apply + rollout, seconds")
    d.add_argument("--on-failure", choices=("teardown", "rollback", "keep"), default="teardown")
    d.add_argument(
        "--strict-placement", action="store_true", help="exit 1 when a pod is not on its planned node"
    )
    d.add_argument("--out", default=".", help="directory for deployment.json (default: .)")
    d.set_defaults(func=_cmd_deploy)
    t = sub.add_parser("teardown", help="remove what gpuplace deploy created")
    t.add_argument("plan_dir", nargs="?", default=None)
    t.add_argument("--target", choices=TARGETS, default="kubernetes")
    t.add_argument("--kubeconfig", default=None)
    t.add_argument("--context", default=None)
    t.add_argument("--namespace", default="default")
    t.add_argument("--record", default=None, help="deployment.json of the deploy (needed for --target local)")
    t.add_argument(
        "--run-id", default="", help="tear down what was labelled with this run id (no plan needed)"
    )
    t.add_argument("--timeout", type=float, default=120.0)
    t.set_defaults(func=_cmd_teardown)
    r = sub.add_parser("rbac", help="print the deploy step's least-privilege ServiceAccount/Role/RoleBinding")
    r.add_argument("--namespace", default="default")
    r.add_argument("--name", default="gpuplace-deployer")
    r.set_defaults(func=_cmd_rbac)


def _cmd_deploy(args: argparse.Namespace) -> int:
    import sys

    record = deploy(
        args.plan_dir,
        target=args.target,
        kubeconfig=args.kubeconfig,
        context=args.context,
        namespace=args.namespace,
        run_id=args.run_id,
        timeout_s=args.timeout,
        on_failure=args.on_failure,
        workdir=Path(args.out) / "local",
        log=lambda m: print(m, file=sys.stderr, flush=True),
    )
    path = write_record(record, args.out)
    print(format_record(record))
    print(f"wrote {path}")
    return 1 if args.strict_placement and record.mismatches() else 0


def _cmd_teardown(args: argparse.Namespace) -> int:
    record = None
    if args.record:
        record = DeploymentRecord.from_json_dict(json.loads(Path(args.record).read_text()))
    print(
        teardown(
            args.plan_dir,
            target=args.target,
            kubeconfig=args.kubeconfig,
            context=args.context,
            namespace=args.namespace,
            record=record,
            run_id=args.run_id,
            timeout_s=args.timeout,
        )
    )
    return 0


def _cmd_rbac(args: argparse.Namespace) -> int:
    from gpuplace.k8s.rbac import render_yaml

    print(render_yaml(args.namespace, args.name), end="")
    return 0
