"""Every deploy target in one place, behind :func:`deploy` and :func:`teardown`, on a plan directory
already read (:mod:`gpuplace.steps.deploy` and :mod:`gpuplace.steps.teardown` read it).

``kubernetes`` applies a plan directory with :mod:`gpuplace.k8s` (the only module that calls the API);
``local`` starts the plan's model in an OpenAI-compatible server on this machine (:mod:`.local`);
:mod:`.inline` is the Kubeflow path's serving step, which serves inside its own task. Every target
returns a :class:`DeploymentRecord`, which :mod:`.record` writes as ``deployment.json`` for the next steps.
Heavy modules are imported only when their target is asked for.
"""

from __future__ import annotations

from gpuplace.deploy.dispatch import RUNTIMES, TARGETS, check_target, deploy, runtime_kind, teardown
from gpuplace.deploy.record import RECORD_FILE, read_record, save_record, write_record
from gpuplace.deploy.registry import STATE_DIR_ENV, local_registry_path, standin_dir, standin_records
from gpuplace.deploy.summary import deploy_metrics, format_record, provisioning_split

__all__ = [
    "RECORD_FILE",
    "RUNTIMES",
    "STATE_DIR_ENV",
    "TARGETS",
    "check_target",
    "deploy",
    "deploy_metrics",
    "format_record",
    "local_registry_path",
    "provisioning_split",
    "read_record",
    "runtime_kind",
    "save_record",
    "standin_dir",
    "standin_records",
    "teardown",
    "write_record",
]
