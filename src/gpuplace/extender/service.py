"""The extender's verbs on request bodies: filter, prioritize and bind, independent of HTTP.

Each verb takes the raw body and returns ``(status, answer)``. A body that is not the protocol's shape
(malformed JSON, unknown envelope fields, no ``Pod``, neither ``Nodes`` nor ``NodeNames``, more nodes
than the limit) is a 400 with a message naming the field. A well-formed request whose pod asks for
something unusable (a fractional GPU count, an unknown topology requirement) is answered 200 with every
node failed for that reason, because kube-scheduler shows filter reasons in the pod's events but throws
a non-200 body away. Nodes the extender cannot use (no GPU labels, unreadable) fail one by one.
Decisions of recent pods are kept for ``GET /stats`` (how tests and operators see what it scored).
"""

from __future__ import annotations

import json
import threading
from collections import Counter, OrderedDict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from gpuplace.errors import InvalidInput
from gpuplace.extender.fit import ASSIGNMENT_ANNOTATION, assignment_annotation, pod_request, scores
from gpuplace.extender.state import ClusterState, PodGpus
from gpuplace.extender.wire import ExtenderArgs, ExtenderBindingArgs, pod_dict
from gpuplace.types.extender import GpuRequest, NodeFit

if TYPE_CHECKING:
    from gpuplace.k8s import Api

VERBS: tuple[str, ...] = ("filter", "prioritize", "bind")
DEFAULT_MAX_NODES = 5000  # the largest cluster Kubernetes supports
HISTORY = 1000  # pods whose decisions /stats keeps
ANSWERS = 64  # (verb, request shape, node list) answers kept while the cluster does not change
BIND_TIMEOUT_S = 10.0


class BadRequest(Exception):
    """The body is not an extender request; the message names the field."""


def _validation_message(err: ValidationError) -> str:
    parts = []
    for e in err.errors()[:5]:
        where = ".".join(str(p) for p in e["loc"]) or "body"
        parts.append(f"{where}: {e['msg']}")
    more = f" (and {err.error_count() - 5} more)" if err.error_count() > 5 else ""
    return "; ".join(parts) + more


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as e:
        raise BadRequest(f"body: not JSON ({e})") from None


class ExtenderService:
    """filter / prioritize / bind over a :class:`ClusterState`; ``api`` is needed for bind only."""

    def __init__(
        self, state: ClusterState, *, api: Api | None = None, max_nodes: int = DEFAULT_MAX_NODES
    ) -> None:
        self.state = state
        self.api = api
        self.max_nodes = max_nodes
        self.calls: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._decisions: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._requests: OrderedDict[str, GpuRequest] = OrderedDict()
        # Encoded answers by (verb, request shape, node names): kube-scheduler sends filter and then
        # prioritize for one pod with the same nodes, and nothing in them depends on the pod's name.
        self._answers: OrderedDict[tuple[str, GpuRequest, tuple[str, ...]], tuple[int, bytes, Any]] = (
            OrderedDict()
        )

    # --- bookkeeping ------------------------------------------------------------------------------
    def _remember(self, key: str, **fields: Any) -> None:
        with self._lock:
            entry = self._decisions.pop(key, {})
            entry.update(fields)
            self._decisions[key] = entry
            while len(self._decisions) > HISTORY:
                self._decisions.popitem(last=False)

    def _remember_request(self, key: str, req: GpuRequest) -> None:
        with self._lock:
            self._requests[key] = req
            self._requests.move_to_end(key)
            while len(self._requests) > HISTORY:
                self._requests.popitem(last=False)

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {
                "calls": dict(self.calls),
                "bad_requests": dict(self.errors),
                "nodes": len(self.state.node_names()),
                "synced": self.state.synced.is_set(),
                "pods": dict(self._decisions),
            }

    # --- entry point --------------------------------------------------------------------------------
    def handle(self, verb: str, body: bytes) -> tuple[int, Any]:
        """Answer one POST as a JSON-able value; never raises for any body."""
        status, answer = self.respond(verb, body)
        return status, json.loads(answer) if isinstance(answer, bytes) else answer

    def respond(self, verb: str, body: bytes) -> tuple[int, Any]:
        """Answer one POST: a JSON-able value, or the answer already encoded (bytes); never raises."""
        self.calls[verb] += 1
        try:
            if verb == "bind":
                return 200, self.bind(body)
            args, raw = self._args(body)
            if args.NodeNames is not None:
                return 200, self._cached(verb, args, raw)
            return 200, (self.filter(args, raw) if verb == "filter" else self.prioritize(args, raw))
        except BadRequest as e:
            self.errors[verb] += 1
            return 400, {"Error": f"gpuplace {verb}: {e}"}

    def _cached(self, verb: str, args: ExtenderArgs, raw: Mapping[str, Any]) -> bytes:
        """A NodeNames answer, encoded, reused while no node or pod changed since it was computed."""
        key = f"{args.Pod.metadata.namespace or 'default'}/{args.Pod.metadata.name}"
        try:
            req = pod_request(pod_dict(args.Pod))
        except InvalidInput:
            return json.dumps(
                self.filter(args, raw) if verb == "filter" else self.prioritize(args, raw)
            ).encode()
        names = tuple(args.NodeNames or ())
        now = self.state.changes
        with self._lock:
            hit = self._answers.get((verb, req, names))
        if hit is not None and hit[0] == now:
            self._remember_request(key, req)
            self._remember(key, **hit[2])
            return hit[1]
        answer, decision = self._filter(args, raw) if verb == "filter" else self._prioritize(args, raw)
        encoded = json.dumps(answer, separators=(",", ":")).encode()
        with self._lock:
            self._answers[(verb, req, names)] = (now, encoded, decision)
            while len(self._answers) > ANSWERS:
                self._answers.popitem(last=False)
        return encoded

    def _args(self, body: bytes) -> tuple[ExtenderArgs, Mapping[str, Any]]:
        raw = _json(body)
        try:
            args = ExtenderArgs.model_validate(raw)
        except ValidationError as e:
            raise BadRequest(_validation_message(e)) from None
        items = args.Nodes.items if args.Nodes is not None else None
        count = (
            len(args.NodeNames) if args.NodeNames is not None else len(items) if items is not None else None
        )
        if count is None:
            raise BadRequest(
                "NodeNames / Nodes.items: neither given; send one (NodeNames when nodeCacheCapable)"
            )
        if count > self.max_nodes:
            field = "NodeNames" if args.NodeNames is not None else "Nodes.items"
            raise BadRequest(f"{field}: {count} nodes, more than the limit of {self.max_nodes} (--max-nodes)")
        return args, raw

    def _candidates(self, args: ExtenderArgs, raw: Mapping[str, Any]) -> list[str]:
        if args.NodeNames is not None:
            return list(args.NodeNames)
        objs: Sequence[Mapping[str, Any]] = raw["Nodes"]["items"]
        for obj in objs:
            self.state.ensure_node(obj)
        return [str(o["metadata"]["name"]) for o in objs]

    def _fits(
        self, args: ExtenderArgs, names: Sequence[str]
    ) -> tuple[str, list[NodeFit], list[tuple[float, ...] | None] | None]:
        pod = pod_dict(args.Pod)
        key = f"{args.Pod.metadata.namespace or 'default'}/{args.Pod.metadata.name}"
        try:
            req = pod_request(pod)
        except InvalidInput as e:
            reason = f"gpuplace: pod {key}: {e}"
            return key, [NodeFit(n, reason=reason, unresolvable=True) for n in names], None
        self._remember_request(key, req)
        fits, keys = self.state.fits_and_keys(names, req)
        return key, fits, keys

    # --- verbs ----------------------------------------------------------------------------------------
    def filter(self, args: ExtenderArgs, raw: Mapping[str, Any]) -> dict[str, Any]:
        return self._filter(args, raw)[0]

    def prioritize(self, args: ExtenderArgs, raw: Mapping[str, Any]) -> list[dict[str, Any]]:
        return self._prioritize(args, raw)[0]

    def _filter(self, args: ExtenderArgs, raw: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        names = self._candidates(args, raw)
        key, fits, _ = self._fits(args, names)
        passing = [f.node for f in fits if f.fits]
        failed = {f.node: f.reason for f in fits if not f.fits and not f.unresolvable}
        unresolvable = {f.node: f.reason for f in fits if not f.fits and f.unresolvable}
        decision = {
            "filtered": len(names),
            "passed": len(passing),
            "reasons": sorted(set(failed.values()) | set(unresolvable.values()))[:5],
        }
        self._remember(key, **decision)
        result: dict[str, Any] = {
            "Nodes": None,
            "NodeNames": None,
            "FailedNodes": failed,
            "FailedAndUnresolvableNodes": unresolvable,
            "Error": "",
        }
        if args.NodeNames is not None:
            result["NodeNames"] = passing
        else:
            keep = set(passing)
            items = [o for o in raw["Nodes"]["items"] if o["metadata"]["name"] in keep]
            result["Nodes"] = {"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": items}
        return result, decision

    def _prioritize(
        self, args: ExtenderArgs, raw: Mapping[str, Any]
    ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        names = self._candidates(args, raw)
        key, fits, keys = self._fits(args, names)
        priority = scores(fits, keys)
        top = max(priority.values(), default=0)
        decision = {"scores": priority, "best": sorted(n for n, s in priority.items() if s == top and s > 0)}
        self._remember(key, **decision)
        return [{"Host": n, "Score": priority[n]} for n in names], decision

    def bind(self, body: bytes) -> dict[str, str]:
        raw = _json(body)
        try:
            args = ExtenderBindingArgs.model_validate(raw)
        except ValidationError as e:
            raise BadRequest(_validation_message(e)) from None
        key = f"{args.PodNamespace}/{args.PodName}"
        if self.api is None:
            return {
                "Error": "gpuplace bind: no Kubernetes API connection (serve with --kubeconfig or in-cluster)"
            }
        try:
            req = self._requests.get(key) or pod_request(
                self.api.get("v1", "Pod", args.PodName, args.PodNamespace)
            )
        except Exception as e:  # any failure is the scheduler's to retry, reported in Error
            return {"Error": f"gpuplace bind {key}: {e}"}
        # Choosing and recording the devices is one step under the lock: two binds to one node in flight
        # must not be given the same GPUs.
        with self.state.lock:
            fit = self.state.fit(args.Node, req)
            if not fit.fits:
                return {"Error": f"gpuplace bind {key} to {args.Node}: {fit.reason}"}
            if req.count:
                self.state.put_pod(key, PodGpus(args.Node, {req.resource: req.count}, fit.devices))
        binding = {
            "apiVersion": "v1",
            "kind": "Binding",
            # The API server copies a Binding's annotations onto the pod, so the record and the bind
            # are one write.
            "metadata": {
                "name": args.PodName,
                "namespace": args.PodNamespace,
                **({"uid": args.PodUID} if args.PodUID else {}),
                "annotations": {ASSIGNMENT_ANNOTATION: assignment_annotation(args.Node, fit.devices)},
            },
            "target": {"apiVersion": "v1", "kind": "Node", "name": args.Node},
        }
        from gpuplace.k8s.retry import Deadline

        try:
            self.api.request(
                "POST",
                f"/api/v1/namespaces/{args.PodNamespace}/pods/{args.PodName}/binding",
                action=f"bind pod {key} to {args.Node}",
                body=binding,
                deadline=Deadline(BIND_TIMEOUT_S),
            )
        except Exception as e:  # reported to kube-scheduler, which retries the pod
            self.state.remove_pod(key)
            return {"Error": f"gpuplace bind {key} to {args.Node}: {e}"}
        self._remember(key, bound=args.Node, devices=list(fit.devices))
        return {"Error": ""}
