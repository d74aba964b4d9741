"""Whether any node of the cluster could ever take a pod, as kube-scheduler's static filters see it.

An unschedulable pod is only *waiting* when some node would take it once other pods go (``1 Insufficient
nvidia.com/gpu`` on a node whose GPUs are taken); it can *never* be scheduled when no node passes the
filters that do not depend on what else runs: the node selector, required node affinity, untolerated
``NoSchedule``/``NoExecute`` taints, and requests above the node's allocatable. :func:`could_ever_fit`
answers that from the Node objects (a pod with DRA claims is assumed to fit: whether its claims can be
allocated depends on the other claims). Pure functions over the API's objects.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

_QUANTITY = re.compile(r"^([0-9.]+)([a-zA-Z]*)$")
_SCALE = {"": 1.0, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2.0**10, "Mi": 2.0**20}
_SCALE |= {"Gi": 2.0**30, "Ti": 2.0**40}


def _amount(value: object) -> float | None:
    m = _QUANTITY.match(str(value).strip())
    if m is None or m.group(2) not in _SCALE:
        return None
    try:
        return float(m.group(1)) * _SCALE[m.group(2)]
    except ValueError:
        return None


def pod_requests(pod: Mapping[str, Any]) -> dict[str, float]:
    """What the pod's containers ask for (a limit stands for a missing request, as the API defaults it);
    init containers count with their largest request."""
    spec = pod.get("spec") or {}
    total: dict[str, float] = {}

    def asks(container: Mapping[str, Any]) -> dict[str, float]:
        resources = container.get("resources") or {}
        merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        return {k: a for k, v in merged.items() if (a := _amount(v)) is not None}

    for c in spec.get("containers") or ():
        for k, v in asks(c).items():
            total[k] = total.get(k, 0.0) + v
    for c in spec.get("initContainers") or ():
        for k, v in asks(c).items():
            total[k] = max(total.get(k, 0.0), v)
    return total


def _expression_matches(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, op, values = expr.get("key", ""), expr.get("operator", ""), list(expr.get("values") or ())
    if op == "In":
        return labels.get(key) in values
    if op == "NotIn":
        return labels.get(key) not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    return True  # Gt/Lt: not judged here


def _affinity_matches(pod: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    spec = pod.get("spec") or {}
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    terms = required.get("nodeSelectorTerms") or ()
    if not terms:
        return True
    fields = {"metadata.name": meta.get("name", "")}
    return any(
        all(_expression_matches(e, labels) for e in t.get("matchExpressions") or ())
        and all(_expression_matches(e, fields) for e in t.get("matchFields") or ())
        for t in terms
    )


def _tolerates(pod: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    for t in (pod.get("spec") or {}).get("tolerations") or ():
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        if t.get("operator") == "Exists" and not t.get("key"):
            return True
        if t.get("key") == taint.get("key") and (
            t.get("operator") == "Exists" or t.get("value", "") == taint.get("value", "")
        ):
            return True
    return False


def fits_node(pod: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """Whether ``node`` would take ``pod`` were nothing else running on it."""
    if (node.get("spec") or {}).get("unschedulable"):
        return False
    if not _affinity_matches(pod, node):
        return False
    for taint in (node.get("spec") or {}).get("taints") or ():
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(pod, taint):
            return False
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    for resource, wanted in pod_requests(pod).items():
        have = _amount(allocatable.get(resource, 0))
        if wanted > 0 and (have is None or have < wanted):
            return False
    return True


def could_ever_fit(pod: Mapping[str, Any], nodes: Iterable[Mapping[str, Any]]) -> bool:
    if (pod.get("spec") or {}).get("resourceClaims"):
        return True
    return any(fits_node(pod, n) for n in nodes)
