"""The inventory of a live cluster: GPU nodes from their Node objects, allocations from running pods.

What a Node object says is read the way the NVIDIA device plugin and GPU Feature Discovery write it
(:mod:`gpuplace.labels`): allocatable ``nvidia.com/gpu`` and ``nvidia.com/mig-<profile>``,
``nvidia.com/gpu.product``/``gpu.memory``/``mig.strategy`` labels, taints, zone and rack labels. GFD
does not label topology, so NUMA node, PCIe switch and NVLink island come from the
``gpuplace.io/gpu-topology`` annotation when present, and are otherwise guessed (GPUs split evenly over
``gpuplace.io/numa-nodes`` NUMA nodes; SXM GPUs of a node share one NVLink island; PCIe switch
unknown). Which MIG slice sits on which physical GPU is not visible either: the annotation's ``mig``
lists say, and without them slices are packed onto the node's partitioned GPUs in order. A GPU is
allocated when a non-terminated pod on the node requests it (the lowest indices first).
:func:`inventory_from_objects` is pure; :func:`inventory_from_cluster` lists the objects through
:mod:`gpuplace.k8s`.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from gpuplace import labels as L
from gpuplace.catalog import GpuCatalog, load_gpu_catalog
from gpuplace.errors import InvalidInput
from gpuplace.inventory.fleetfile import match_product, require_gpus
from gpuplace.types import GpuDevice, GpuSpec, Inventory, Node, Taint
from gpuplace.types.fleet import MIG_STRATEGIES

RACK_LABELS: tuple[str, ...] = (L.RACK, "topology.kubernetes.io/rack", "rack")
ZONE_LABELS: tuple[str, ...] = (L.ZONE, "failure-domain.beta.kubernetes.io/zone")
_SUFFIX = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "m": 1e-3,
    "": 1,
}
_QUANTITY = re.compile(r"^([0-9.]+)(Ki|Mi|Gi|Ti|k|M|G|T|m|)$")
_MIG_PRODUCT = re.compile(r"^(.*)-MIG-(\d+g\.\d+gb)$")


def quantity(value: object, field: str) -> float:
    """A Kubernetes resource quantity (``"96"``, ``"500m"``, ``"1024Gi"``) as a number."""
    m = _QUANTITY.match(str(value).strip())
    try:
        number = float(m.group(1)) if m else None  # the pattern admits a bare "." that float() refuses
    except ValueError:
        number = None
    if m is None or number is None:
        raise InvalidInput(field, value, "is not a Kubernetes quantity", "e.g. 8, 500m, 64Gi")
    return number * _SUFFIX[m.group(2)]


def _first_label(labels: Mapping[str, str], keys: Sequence[str]) -> str:
    return next((labels[k] for k in keys if labels.get(k)), "")


def _topology(annotations: Mapping[str, str], name: str) -> dict[int, Mapping[str, Any]]:
    raw = annotations.get(L.TOPOLOGY_ANNOTATION)
    if not raw:
        return {}
    try:
        entries = json.loads(raw)
        return {int(e["index"]): e for e in entries}
    except (ValueError, KeyError, TypeError):
        raise InvalidInput(
            f"node/{name}.annotations.{L.TOPOLOGY_ANNOTATION}",
            raw,
            "is not a JSON list of {index, numa_node, pcie_switch, nvlink_island}",
            "Fix or remove the annotation",
        ) from None


def _mig_gpu_of(slices: Sequence[str], spec: GpuSpec | None, first_index: int) -> list[int]:
    """Pack slices onto physical GPUs in order, each GPU holding at most its compute slices."""
    sizes = {m.name: m.compute_slices for m in spec.mig_profiles} if spec else {}
    capacity = spec.compute_slices if spec and spec.compute_slices else 7
    index, used, out = first_index, 0, []
    for s in slices:
        need = sizes.get(s, int(s.split("g.")[0]))
        if used + need > capacity:
            index, used = index + 1, 0
        out.append(index)
        used += need
    return out


def _mig_strategy(labels: Mapping[str, str], name: str, warnings: list[str]) -> str:
    """The node's MIG strategy label; an unknown one is read as ``mixed``, with a warning."""
    strategy = labels.get(L.MIG_STRATEGY, "none")
    if strategy not in MIG_STRATEGIES:
        warnings.append(f"node/{name}: label {L.MIG_STRATEGY}={strategy!r} unknown; read as 'mixed'")
        strategy = "mixed"
    return strategy


def _mig_slices(
    alloc: Mapping[str, Any], name: str, strategy: str, mig_match: re.Match[str] | None, whole: int
) -> tuple[int, list[str]]:
    """The whole GPUs and MIG slices the node allocates (under the single strategy its GPUs are slices)."""
    slices: list[str] = []
    if strategy == "single" and mig_match:
        slices = [mig_match.group(2)] * whole
        whole = 0
    for resource, value in sorted(alloc.items()):
        if str(resource).startswith(L.MIG_RESOURCE_PREFIX):
            slices += [str(resource)[len(L.MIG_RESOURCE_PREFIX) :]] * int(
                quantity(value, f"node/{name}.{resource}")
            )
    return whole, slices


def _slice_gpus(
    slices: list[str], topology: Mapping[int, Mapping[str, Any]], spec: GpuSpec | None, first_index: int
) -> tuple[list[str], list[int]]:
    """The slices and their GPU indices: the annotation's layout when it lists exactly them, else packed."""
    layout = [(int(i), str(p)) for i, t in sorted(topology.items()) for p in t.get("mig") or ()]
    if slices and sorted(p for _, p in layout) == sorted(slices):
        slice_gpu = [i for i, _ in layout]
        slices = [p for _, p in layout]
    else:
        slice_gpu = _mig_gpu_of(slices, spec, first_index)
    return slices, slice_gpu


def _mig_devices(
    name: str,
    spec: GpuSpec | None,
    product: str,
    placed: Iterable[tuple[str, int]],
    where: Callable[[int], tuple[int, str, str]],
    strategy: str,
    requested: Counter[str],
) -> list[GpuDevice]:
    """The node's MIG slices as devices, from each one's profile and physical GPU index (``placed``)."""
    gpu_name = spec.name if spec else ""
    taken = requested.get(L.GPU_RESOURCE, 0)
    mig_memory = {m.name: m.memory_gib for m in spec.mig_profiles} if spec else {}
    devices = []
    seen: Counter[str] = Counter()
    for s, index in placed:
        resource = L.GPU_RESOURCE if strategy == "single" else L.MIG_RESOURCE_PREFIX + s
        k = seen[s]
        seen[s] += 1
        numa, switch, _ = where(index)
        in_use = (taken if strategy == "single" else requested.get(resource, 0)) > k
        devices.append(
            GpuDevice(
                id=f"{name}/gpu{index}/{s}-{k}",
                index=index,
                gpu=gpu_name,
                product=product,
                memory_gib=mig_memory.get(s, float(s.split("g.")[1].rstrip("gb"))),
                numa_node=numa,
                pcie_switch=switch,
                mig_profile=s,
                allocated=1.0 if in_use else 0.0,
            )
        )
    return devices


def _taints(obj: Mapping[str, Any]) -> tuple[Taint, ...]:
    """The taints in a Node object's spec."""
    return tuple(
        Taint(
            key=str(t.get("key", "")),
            value=str(t.get("value") or ""),
            effect=str(t.get("effect", "NoSchedule")),
        )
        for t in (obj.get("spec") or {}).get("taints") or ()
    )


def _node(
    obj: Mapping[str, Any],
    catalog: GpuCatalog,
    requested: Counter[str],
    warnings: list[str],
    cpu_requested: float = 0.0,
) -> Node:
    meta = obj.get("metadata") or {}
    name = str(meta.get("name", ""))
    labels: dict[str, str] = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    annotations: dict[str, str] = dict(meta.get("annotations") or {})
    status = obj.get("status") or {}
    alloc = status.get("allocatable") or status.get("capacity") or {}
    strategy = _mig_strategy(labels, name, warnings)
    product = labels.get(L.PRODUCT, "")
    mig_match = _MIG_PRODUCT.match(product)
    base_product = mig_match.group(1) if mig_match else product
    memory_mib = float(labels.get(L.MEMORY) or 0)
    sharing = max(1, int(labels.get(L.REPLICAS) or 1))
    whole = (
        int(quantity(alloc.get(L.GPU_RESOURCE, 0), f"node/{name}.allocatable.{L.GPU_RESOURCE}")) // sharing
    )
    spec = match_product(base_product, catalog, None) if base_product else None
    whole, slices = _mig_slices(alloc, name, strategy, mig_match, whole)
    if (whole or slices) and spec is None:
        warnings.append(
            f"node/{name}: {L.PRODUCT}={product!r} is not in the GPU catalog; its GPUs are kept as unknown "
            "and the planner will not use them"
        )
    topology = _topology(annotations, name)
    numa_nodes = int(annotations.get(L.NUMA_NODES_ANNOTATION) or 1)
    slices, slice_gpu = _slice_gpus(slices, topology, spec, whole)
    physical = whole + len(set(slice_gpu))
    sxm = spec is not None and spec.form_factor.startswith("sxm") and spec.nvlink_gbps > 0

    def where(index: int) -> tuple[int, str, str]:
        t = topology.get(index)
        if t is not None:
            return int(t.get("numa_node", 0)), str(t.get("pcie_switch", "")), str(t.get("nvlink_island", ""))
        return index * numa_nodes // max(physical, 1), "", "nvlink" if sxm else ""

    gpu_name = spec.name if spec else ""
    whole_memory = spec.memory_gib if spec and not memory_mib else memory_mib / 1024
    taken = requested.get(L.GPU_RESOURCE, 0)
    devices = []
    for i in range(whole):
        numa, switch, island = where(i)
        devices.append(
            GpuDevice(
                id=f"{name}/gpu{i}",
                index=i,
                gpu=gpu_name,
                product=base_product,
                memory_gib=whole_memory,
                numa_node=numa,
                pcie_switch=switch,
                nvlink_island=island,
                allocated=min(1.0, max(0.0, (taken - i * sharing) / sharing)),
            )
        )
    placed = zip(slices, slice_gpu, strict=True)
    devices += _mig_devices(name, spec, base_product, placed, where, strategy, requested)
    return Node(
        name=name,
        gpus=tuple(devices),
        labels=MappingProxyType(labels),
        taints=_taints(obj),
        zone=_first_label(labels, ZONE_LABELS),
        rack=_first_label(labels, RACK_LABELS),
        cpu_cores=int(quantity(alloc.get("cpu", 0), f"node/{name}.allocatable.cpu")),
        memory_gib=quantity(alloc.get("memory", 0), f"node/{name}.allocatable.memory") / 2**30,
        cpu_allocated=cpu_requested,
        numa_nodes=numa_nodes,
        mig_strategy=strategy,
        gpu_sharing=sharing,
    )


def pod_gpu_requests(pod: Mapping[str, Any]) -> Counter[str]:
    """GPU extended resources a pod holds: the sum over its containers (limits, else requests)."""
    total: Counter[str] = Counter()
    spec = pod.get("spec") or {}
    for c in spec.get("containers") or ():
        res = c.get("resources") or {}
        merged = {**(res.get("requests") or {}), **(res.get("limits") or {})}
        for key, value in merged.items():
            if key == L.GPU_RESOURCE or str(key).startswith(L.MIG_RESOURCE_PREFIX):
                total[str(key)] += int(quantity(value, f"pod.{key}"))
    return total


def pod_cpu_request(pod: Mapping[str, Any]) -> float:
    """CPU cores a pod requests: its containers' sum, or its largest init container if that is more."""
    spec = pod.get("spec") or {}

    def cores(c: Mapping[str, Any]) -> float:
        return quantity(((c.get("resources") or {}).get("requests") or {}).get("cpu", 0), "pod.cpu")

    main = sum(cores(c) for c in spec.get("containers") or ())
    return max([main, *(cores(c) for c in spec.get("initContainers") or ())])


def _accepted_products(pod: Mapping[str, Any]) -> frozenset[str]:
    """GPU products a pod is constrained to (nodeSelector or required node affinity on the product label)."""
    spec = pod.get("spec") or {}
    selected = (spec.get("nodeSelector") or {}).get(L.PRODUCT)
    if selected:
        return frozenset({str(selected)})
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    products: set[str] = set()
    for term in required.get("nodeSelectorTerms") or ():
        for expr in term.get("matchExpressions") or ():
            if expr.get("key") == L.PRODUCT and expr.get("operator") == "In":
                products.update(str(v) for v in expr.get("values") or ())
    return frozenset(products)


def running_workload(
    nodes: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]]
) -> list[tuple[int, int, int, frozenset[str]]]:
    """Task shapes ``(num_gpu, gpu_milli, cpu_milli, gpu_types)`` of the pods bound and not finished.

    A pod holding ``n`` of a time-sliced node's GPUs (``nvidia.com/gpu.replicas`` = r) is one task of
    a 1/r share when n is 1, else of n whole GPUs; MIG slices are fixed partitions fragmentation does
    not count, so a pod asking only MIG devices is left out. CPU-only pods count (FGD's target
    workload includes them).
    """
    sharing = {
        str((n.get("metadata") or {}).get("name")): max(
            1, int(((n.get("metadata") or {}).get("labels") or {}).get(L.REPLICAS) or 1)
        )
        for n in nodes
    }
    shapes = []
    for pod in pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name or (pod.get("status") or {}).get("phase", "") in ("Succeeded", "Failed"):
            continue
        gpus = pod_gpu_requests(pod)
        whole = gpus.get(L.GPU_RESOURCE, 0)
        if not whole and any(gpus.values()):
            continue
        cpu_milli = round(pod_cpu_request(pod) * 1000)
        share = sharing.get(str(node_name), 1)
        if whole == 1 and share > 1:
            shape = (1, 1000 // share, cpu_milli)
        else:
            shape = (whole, 1000 if whole else 0, cpu_milli)
        shapes.append((*shape, _accepted_products(pod) if whole else frozenset()))
    return shapes


def inventory_from_objects(
    nodes: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]] = (),
    *,
    catalog: GpuCatalog | None = None,
    source: str = "cluster",
) -> Inventory:
    """An inventory from Node and Pod objects as the API returns them (dicts); pure."""
    catalog = catalog or load_gpu_catalog()
    requested: dict[str, Counter[str]] = {}
    cpu: dict[str, float] = {}
    for pod in pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        phase = (pod.get("status") or {}).get("phase", "")
        if node_name and phase not in ("Succeeded", "Failed"):
            requested.setdefault(node_name, Counter()).update(pod_gpu_requests(pod))
            cpu[node_name] = cpu.get(node_name, 0.0) + pod_cpu_request(pod)
    warnings: list[str] = []
    parsed = []
    for obj in sorted(nodes, key=lambda o: str((o.get("metadata") or {}).get("name", ""))):
        name = str((obj.get("metadata") or {}).get("name"))
        parsed.append(_node(obj, catalog, requested.get(name, Counter()), warnings, cpu.get(name, 0.0)))
    names = Counter(n.name for n in parsed)
    twice = sorted(n for n, c in names.items() if c > 1)
    if twice:
        raise InvalidInput("nodes", twice[0], "is listed twice", "Give each Node object once")
    inventory = Inventory(nodes=tuple(n for n in parsed if n.gpus), source=source, warnings=tuple(warnings))
    require_gpus(Inventory(nodes=tuple(parsed)), "cluster")
    return inventory


def _list_objects(client: Any, label_selector: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Node objects (optionally by label selector) and the non-terminated pods of all namespaces."""
    from gpuplace.k8s.api import Api
    from gpuplace.k8s.client import connect

    api = Api(client if client is not None else connect())
    nodes = api.list("v1", "Node", label_selector=label_selector)
    doc = api.request(
        "GET",
        "/api/v1/pods",
        action="list pods in all namespaces",
        query={"fieldSelector": "status.phase!=Succeeded,status.phase!=Failed"},
    )
    pods: list[dict[str, Any]] = doc.get("items") or []
    return nodes, pods


def workload_from_cluster(
    *, client: Any = None, label_selector: str = ""
) -> list[tuple[int, int, int, frozenset[str]]]:
    """:func:`running_workload` of the live cluster."""
    return running_workload(*_list_objects(client, label_selector))


def inventory_from_cluster(
    *, client: Any = None, catalog: GpuCatalog | None = None, label_selector: str = ""
) -> Inventory:
    """List Node objects (optionally by label selector) and non-terminated pods, and read them."""
    nodes, pods = _list_objects(client, label_selector)
    return inventory_from_objects(nodes, pods, catalog=catalog)
