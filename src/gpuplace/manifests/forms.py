"""The forms one plan is emitted in (``gpuplace plan --emit``), what each can express, and the refusals.

=================  ==================================================================  ==================
form               objects                                                             file
=================  ==================================================================  ==================
``manifests``      Deployment, Service, PodDisruptionBudget (device plugin GPUs)       ``manifests/``
``dra``            DRA claims (template, or shared claims) + Deployment(s)             ``dra.yaml``
``kserve``         KServe ``InferenceService`` (v1beta1, custom container)             ``kserve.yaml``
``kserve-llmisvc`` KServe ``LLMInferenceService`` (v1alpha2), router with scheduler    ``kserve-llmisvc.yaml``
``llm-d``          ``InferencePool`` (v1) + endpoint picker (config, Service, RBAC)    ``llm-d.yaml``
``kueue``          Topology, ResourceFlavor, ClusterQueue, LocalQueue, queued workload ``kueue.yaml``
``lws``            ``LeaderWorkerSet`` (+ ``ComputeDomain`` for multi-node NVLink)      ``lws.yaml``
=================  ==================================================================  ==================

Every form but ``manifests`` goes to ``alternatives/`` (not applied by ``gpuplace deploy``). The default
is today's: ``manifests,dra,kserve``; for a plan whose replicas span nodes (a tensor-parallel group over
the nodes of one multi-node NVLink domain) it is ``lws``, the only default form that can run it
(:func:`forms_for`). A form named in ``--emit`` that cannot express the plan is refused
before anything is written, with the reason (:func:`refusal`); of the default set it is left out with a
note. The reasons: a replica that spans nodes in a form whose pod runs on one
node (use ``lws`` or ``kserve-llmisvc``), a MIG slice or GPU share in ``lws`` (they never span nodes), a
Kubernetes version without the DRA API the claims need (``resource.k8s.io/v1``: 1.34 and later;
consumable capacity: 1.36 and later), a shared GPU another workload already uses in part unless consumable
capacity is asked for (``--gpu-sharing consumable-capacity``: a DRA claim shares its device only with the
pods that reference it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from gpuplace.errors import InvalidInput
from gpuplace.manifests.builders import (
    ManifestSet,
    ServingOptions,
    deployment,
    inference_service,
    pod_disruption_budget,
    service,
)
from gpuplace.manifests.dra_claims import (
    CONSUMABLE,
    CONSUMABLE_CAPACITY,
    SHARING_NEEDS,
    TIME_SLICING,
    check_sharing,
    dra_notes,
    dra_objects,
    needs_capacity,
)
from gpuplace.manifests.kserve_llm import llm_inference_service
from gpuplace.manifests.kueue import kueue_objects
from gpuplace.manifests.llmd import llmd_objects
from gpuplace.manifests.lws import compute_domain, leader_worker_set, nodes_per_replica, nvlink_cliques
from gpuplace.types import Inventory
from gpuplace.types.plan import PlacementPlan

FORMS = ("manifests", "dra", "kserve", "kserve-llmisvc", "llm-d", "kueue", "lws")
DEFAULT_EMIT = ("manifests", "dra", "kserve")
MULTI_NODE_DEFAULT = "lws"  # the default form for replicas that span nodes
MANIFESTS = "manifests"
DEFAULT_KUBE_VERSION = "1.35"
DRA_V1 = (1, 34)  # resource.k8s.io/v1 served (DRA GA)
SINGLE_NODE_FORMS = frozenset({"manifests", "dra", "kserve"})  # a pod per replica, on one node


@dataclass(frozen=True, slots=True)
class EmitOptions:
    """Which forms to write and what the target cluster serves."""

    forms: tuple[str, ...] = DEFAULT_EMIT
    kube_version: str = DEFAULT_KUBE_VERSION  # the cluster's Kubernetes minor, e.g. "1.35"
    router: bool = True  # kserve-llmisvc: KServe's managed Gateway route and scheduler (EPP)
    explicit: bool = False  # the forms were named (--emit): a form that cannot express the plan is an error
    sharing: str = TIME_SLICING  # dra: how replicas on one GPU share it (dra_claims.SHARING_MODES)

    def __post_init__(self) -> None:
        kube_minor(self.kube_version)
        parse_forms(self.forms)
        check_sharing(self.sharing)


def parse_forms(forms: str | Iterable[str]) -> tuple[str, ...]:
    """``"kserve-llmisvc,llm-d"`` (or a sequence) → the forms in :data:`FORMS` order; "" = the default."""
    names = [f.strip() for f in (forms.split(",") if isinstance(forms, str) else forms) if f.strip()]
    if not names:
        return DEFAULT_EMIT
    unknown = [n for n in names if n not in FORMS]
    if unknown:
        raise InvalidInput("emit", ",".join(unknown), "is not a form", f"Choose from {','.join(FORMS)}")
    return tuple(f for f in FORMS if f in names)


def kube_minor(version: str) -> tuple[int, int]:
    text = version.strip().lstrip("v")
    parts = text.split(".")
    try:
        major, minor = int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        raise InvalidInput("kube_version", version, "is not a Kubernetes version", "e.g. 1.35") from None
    return major, minor


def refusal(
    plan: PlacementPlan, inventory: Inventory, form: str, kube_version: str, sharing: str = TIME_SLICING
) -> InvalidInput | None:
    """Why ``form`` cannot express ``plan`` on Kubernetes ``kube_version`` (a shared GPU shared by
    ``sharing``); None when it can."""
    size = nodes_per_replica(plan)
    minor = kube_minor(kube_version)
    if size > 1 and form in SINGLE_NODE_FORMS:
        return InvalidInput(
            "emit",
            form,
            f"a replica of this plan spans {size} nodes and {form} runs each replica as one pod on one node",
            "Emit lws (LeaderWorkerSet) or kserve-llmisvc (its worker runs through LWS)",
        )
    if form == "lws" and plan.chosen.kind != "whole":
        return InvalidInput(
            "emit",
            form,
            f"a {plan.chosen.kind} shape ({plan.chosen.label}) is part of one GPU and never spans nodes; "
            "LeaderWorkerSet groups are for replicas that span nodes",
            "Emit manifests or dra for this plan",
        )
    if form == "dra" and minor < DRA_V1:
        return InvalidInput(
            "emit",
            form,
            f"Kubernetes {kube_version} does not serve resource.k8s.io/v1 (DRA is GA from "
            f"{DRA_V1[0]}.{DRA_V1[1]}), which the claims use",
            "Pass the --kube-version of a newer cluster, or emit manifests (device plugin)",
        )
    if form == "dra" and plan.chosen.kind == "shared":
        return _sharing_refusal(plan, inventory, sharing, kube_version)
    return None


def _sharing_refusal(
    plan: PlacementPlan, inventory: Inventory, sharing: str, kube_version: str
) -> InvalidInput | None:
    """Why the ``dra`` form cannot share the plan's GPUs by ``sharing``; None when it can."""
    needed = f"{CONSUMABLE_CAPACITY[0]}.{CONSUMABLE_CAPACITY[1]}"
    if sharing == CONSUMABLE:
        if kube_minor(kube_version) >= CONSUMABLE_CAPACITY:
            return None
        return InvalidInput(
            "gpu_sharing",
            sharing,
            f"needs {SHARING_NEEDS[CONSUMABLE]}; Kubernetes {kube_version} is older than {needed}",
            "Pass the --kube-version of a cluster that serves it, or share by time-slicing (the default)",
        )
    busy = needs_capacity(plan, inventory)
    if not busy:
        return None
    return InvalidInput(
        "emit",
        "dra",
        f"the plan shares {', '.join(busy)}, which another workload already uses in part; a DRA claim "
        f"shares its device only with the pods that reference it, so joining that GPU needs consumable "
        f"capacity, which --gpu-sharing {sharing} does not ask for",
        f"Pass --gpu-sharing {CONSUMABLE} (it needs {SHARING_NEEDS[CONSUMABLE]}), or emit manifests "
        "(device-plugin sharing)",
    )


def forms_for(plan: PlacementPlan, emit: EmitOptions) -> EmitOptions:
    """The forms to write for ``plan``: those named; of the default set, ``lws`` added when a replica spans
    nodes (the default single-node forms are then left out with their reason, :func:`check_forms`)."""
    if emit.explicit or nodes_per_replica(plan) < 2 or MULTI_NODE_DEFAULT in emit.forms:
        return emit
    return replace(emit, forms=parse_forms((*emit.forms, MULTI_NODE_DEFAULT)))


def check_forms(plan: PlacementPlan, inventory: Inventory, emit: EmitOptions) -> dict[str, str]:
    """Refuse, with the reason, a form asked for by name that cannot express ``plan``; of the default set,
    leave such a form out (form → why, for the plan's notes), ``manifests`` only for a plan that spans
    nodes (the default writes ``lws`` for it). A TP group never crosses an NVLink domain."""
    spans = nodes_per_replica(plan) > 1
    if spans:
        nvlink_cliques(plan, inventory)
    left_out: dict[str, str] = {}
    for form in emit.forms:
        why = refusal(plan, inventory, form, emit.kube_version, emit.sharing)
        if why is None:
            continue
        if emit.explicit or (form == MANIFESTS and not spans):
            raise why
        left_out[form] = f"{why.problem}. {why.fix}"
    return left_out


def build_manifests(
    plan: PlacementPlan,
    inventory: Inventory,
    options: ServingOptions | None = None,
    emit: EmitOptions | None = None,
) -> ManifestSet:
    """Every requested form of ``plan``: ``manifests`` to apply, the others as alternatives; a default form
    that cannot express the plan is left out, with the reason in ``left_out``."""
    options = options or ServingOptions()
    emit = forms_for(plan, emit or EmitOptions())
    left_out = check_forms(plan, inventory, emit)
    apply: dict[str, tuple[dict[str, Any], ...]] = {}
    alternatives: dict[str, tuple[dict[str, Any], ...]] = {}
    for form in emit.forms:
        if form in left_out:
            continue
        if form == MANIFESTS:
            apply = {
                "10-deployment.yaml": (deployment(plan, inventory, options),),
                "20-service.yaml": (service(plan),),
                "30-pdb.yaml": (pod_disruption_budget(plan),),
            }
        else:
            alternatives[f"{form}.yaml"] = tuple(_form(form, plan, inventory, options, emit))
    written = tuple(f for f in emit.forms if f not in left_out)
    notes = dra_notes(plan, inventory, emit.sharing) if "dra" in written else ()
    return ManifestSet(apply=apply, alternatives=alternatives, left_out=left_out, forms=written, notes=notes)


def _form(
    form: str, plan: PlacementPlan, inventory: Inventory, options: ServingOptions, emit: EmitOptions
) -> list[dict[str, Any]]:
    if form == "dra":
        return dra_objects(plan, inventory, options, sharing=emit.sharing)
    if form == "kserve":
        return [inference_service(plan, inventory, options)]
    if form == "kserve-llmisvc":
        domain = [compute_domain(plan)] if nodes_per_replica(plan) > 1 else []
        return [*domain, llm_inference_service(plan, inventory, options, router=emit.router)]
    if form == "llm-d":
        return llmd_objects(plan)
    if form == "kueue":
        return kueue_objects(plan, inventory, options)
    return leader_worker_set(plan, inventory, options)
