"""Installing CustomResourceDefinitions from YAML files (the upstream CRDs a test validates emitted forms
against): create each, wait until the API server says it is ``Established`` and serves its kinds.

A CRD that exists already is left as it is (its spec is the same upstream file). Objects are created,
not applied: a server-side apply would add the managed fields of megabyte-sized schemas for nothing.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from gpuplace.errors import InvalidInput
from gpuplace.k8s.api import Api
from gpuplace.k8s.errors import Conflict, NotFound
from gpuplace.k8s.retry import Deadline

CRD_API = "apiextensions.k8s.io/v1"


def read_crds(files: Iterable[Path]) -> list[dict[str, Any]]:
    """The CustomResourceDefinitions in ``files`` (other documents are an error naming the file)."""
    out = []
    for f in files:
        # libyaml's loader when built in: the serving CRDs are megabytes of schema.
        for doc in yaml.load_all(f.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
            if doc is None:
                continue
            if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                raise InvalidInput(str(f), doc.get("kind") if isinstance(doc, dict) else doc, "is not a CRD")
            out.append(doc)
    return out


def _established(crd: dict[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def install_crds(api: Api, files: Iterable[Path], *, timeout_s: float) -> list[str]:
    """Create the CRDs of ``files`` and wait until each is established and its served versions are
    discoverable, within ``timeout_s`` from when the files are read; the names of the CRDs."""
    crds = read_crds(files)
    deadline = Deadline(timeout_s)
    for crd in crds:
        with contextlib.suppress(Conflict):  # already installed
            api.create(crd, deadline=deadline)
    for crd in crds:
        name = crd["metadata"]["name"]
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        versions = [v["name"] for v in crd["spec"]["versions"] if v.get("served")]
        while True:
            stored = api.get(CRD_API, "CustomResourceDefinition", name, deadline=deadline)
            served = _established(stored)
            if served:
                try:
                    for v in versions:
                        api.resource(f"{group}/{v}", kind, deadline=deadline)
                except NotFound:
                    served = False
            if served:
                break
            if deadline.expired:
                raise TimeoutError(f"CRD {name} was not established and served in time")
            time.sleep(0.2)
    return [c["metadata"]["name"] for c in crds]
