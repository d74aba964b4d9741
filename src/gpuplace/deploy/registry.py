"""The local registry of what a deploy started on this machine: a local server's record, and the KWOK
stand-in's servers, kept by plan id and by ``run-<run id>`` so that teardown needs only one of them."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from gpuplace.deploy.record import RECORD_FILE, read_record, write_record
from gpuplace.types import DeploymentRecord

STATE_DIR_ENV = "GPUPLACE_STATE_DIR"


def local_registry_path(key: str) -> Path:
    """Where a local deployment's record is kept, by plan id and by ``run-<run id>``, so that
    teardown needs only the plan or the run id: a pipeline's exit handler cannot read the outputs
    of the tasks it guards, but it knows the run id."""
    root = Path(os.environ.get(STATE_DIR_ENV) or Path.home() / ".cache" / "gpuplace")
    return root / "local-deployments" / key / RECORD_FILE


def standin_dir(namespace: str, key: str) -> Path:
    """Where the KWOK stand-in's local servers of a deploy are registered (``key``: plan id or
    ``run-<id>``), one record per pod, so teardown finds them by the plan or the run id."""
    return local_registry_path(f"kwok/{namespace}/{key}").parent


def standin_records(namespace: str, key: str) -> list[tuple[Path, DeploymentRecord]]:
    folder = standin_dir(namespace, key)
    return [(p, read_record(p)) for p in sorted(folder.glob(f"*/{RECORD_FILE}"))]


def register_standin(
    record: DeploymentRecord,
    servers: Mapping[str, DeploymentRecord],
    namespace: str,
    plan_id: str,
    run_id: str,
) -> DeploymentRecord:
    """Keep the stand-in's servers findable by teardown (by plan id and by run id)."""
    for pod, server in servers.items():
        for key in (plan_id, f"run-{run_id}" if run_id else ""):
            if key:
                write_record(server, standin_dir(namespace, key) / pod)
    return record


def stop_standins(namespace: str, keys: list[str]) -> int:
    """Stop the stand-in servers registered under ``keys`` and forget them under every key (a server is
    registered by plan id and by run id)."""
    from gpuplace.deploy.local import teardown_local

    stopped = 0
    for key in keys:
        for path, server in standin_records(namespace, key):
            teardown_local(server)
            pod = path.parent.name
            for twin in standin_dir(namespace, key).parent.glob(f"*/{pod}/{RECORD_FILE}"):
                twin.unlink(missing_ok=True)
            stopped += 1
    return stopped
