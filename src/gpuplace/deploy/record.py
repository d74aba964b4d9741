"""``deployment.json``: the only module that writes and reads a :class:`DeploymentRecord` as a file.

The deploy step writes it (the ``deploy_inference`` output, ``gpuplace deploy --out``), and so does the
Kubeflow path's serving step; the load test, the comparison, the tracking step and teardown read it; the
local targets keep one per server under the state directory so teardown finds it by plan or run id.
"""

from __future__ import annotations

import json
from pathlib import Path

from gpuplace.errors import InvalidInput
from gpuplace.types import DeploymentRecord

RECORD_FILE = "deployment.json"


def read_record(path: str | Path, field: str = "deployment") -> DeploymentRecord:
    """A ``deployment.json`` (or the folder holding one), as :func:`save_record` wrote it; an error names
    ``field``."""
    p = Path(path)
    if p.is_dir():
        p = p / RECORD_FILE
    try:
        return DeploymentRecord.from_json_dict(json.loads(p.read_text()))
    except (FileNotFoundError, IsADirectoryError):
        raise InvalidInput(field, str(p), "no such file", "Give gpuplace deploy's deployment.json") from None
    except (json.JSONDecodeError, TypeError, AttributeError, KeyError, ValueError) as e:
        raise InvalidInput(field, str(p), f"is not a deployment record ({e})", "") from None


def save_record(record: DeploymentRecord, path: str | Path) -> Path:
    """Write ``record`` to the file ``path`` (a KFP output artifact, or ``<dir>/deployment.json``)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record.to_json_dict(), indent=2) + "\n")
    return out


def write_record(record: DeploymentRecord, out: str | Path) -> Path:
    """Write ``record`` as ``<out>/deployment.json`` (``out`` a folder, made if missing)."""
    return save_record(record, Path(out) / RECORD_FILE)
