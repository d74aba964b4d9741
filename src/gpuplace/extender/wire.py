"""The extender protocol's request bodies (``k8s.io/kube-scheduler/extender/v1``) as pydantic models.

Field names are the Go structs' (they have no JSON tags, so ``Pod``, ``Nodes``, ``NodeNames``, ...).
The envelopes forbid unknown fields — a misspelt ``NodeName`` must not read as "no nodes" — while the
Kubernetes objects inside them allow any field, since a Pod or Node carries far more than the extender
reads; only the parts it reads are typed. Node objects themselves stay plain dicts: the inventory
reader parses them, and a filter answer echoes them back unchanged.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

Name = Annotated[str, StringConstraints(min_length=1, max_length=253)]
Quantity = str | int | float


class _Envelope(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Object(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ObjectMeta(_Object):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    annotations: dict[str, str] | None = None


class Resources(_Object):
    requests: dict[str, Quantity] | None = None
    limits: dict[str, Quantity] | None = None


class Container(_Object):
    name: str = ""
    resources: Resources | None = None


class PodSpec(_Object):
    containers: list[Container] | None = None
    initContainers: list[Container] | None = None  # the Kubernetes field name
    nodeName: str | None = None


class Pod(_Object):
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PodSpec = Field(default_factory=PodSpec)


class NodeMeta(_Object):
    name: Name
    resourceVersion: str | None = None


class NodeItem(_Object):
    metadata: NodeMeta


class NodeList(_Object):
    items: list[NodeItem] | None = None


class ExtenderArgs(_Envelope):
    """What kube-scheduler POSTs to the filter and prioritize verbs."""

    Pod: Pod
    Nodes: NodeList | None = None
    NodeNames: list[Name] | None = None


class ExtenderBindingArgs(_Envelope):
    """What kube-scheduler POSTs to the bind verb."""

    PodName: Name
    PodNamespace: Name
    PodUID: str = ""
    Node: Name


def pod_dict(pod: Pod) -> dict[str, Any]:
    """The typed parts of a pod as the plain dict :func:`gpuplace.extender.fit.pod_request` reads."""
    return pod.model_dump(exclude_none=True)
