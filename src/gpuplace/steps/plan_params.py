"""The plan step's parameters: one table (:data:`PARAMS`, a :mod:`gpuplace.params` table, in the groups
``gpuplace plan --help`` shows), and the typed values it is read into.

``gpuplace plan`` makes its flags from the table, the ``plan_placement`` component's signature is checked
against it (tests/unit/test_step_params.py), and :func:`plan_request`, :func:`serving_options` and
:func:`emit_options` read either's values by its names into what :func:`gpuplace.steps.plan.run_plan_step`
takes: the edges' spellings (SLO in milliseconds, comma lists, ``GPU=USD`` prices, ``""`` for a default)
are parsed here, once; the planner and the manifests take typed values. Light to import (no planner, no
plan directory at the top), as every ``gpuplace`` command builds its flags from it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpuplace.errors import InvalidInput
from gpuplace.params import REQUIRED, Param, defaults, parse_as
from gpuplace.types.plan import (
    DEFAULT_FIT_THRESHOLD,
    DEFAULT_MAX_LOAD_SHARE,
    KINDS,
    MARGINS,
    Slo,
)
from gpuplace.types.precision import Precision
from gpuplace.types.workload import Traffic

if TYPE_CHECKING:
    from gpuplace.catalog import GpuCatalog
    from gpuplace.manifests import EmitOptions, ServingOptions
    from gpuplace.planner.request import PlanRequest

INPUTS: tuple[Param, ...] = (
    Param("model", str, REQUIRED, "the model to place: the preset (or config.json) the profile measured"),
    Param(
        "profile",
        str,
        "",
        "profile Parquet written by `gpuplace profile`: calibrates its own GPU model (default: "
        "GPU-class efficiency defaults for every GPU)",
        component=False,  # the component's profile is an artifact
    ),
    Param(
        "operators",
        str,
        "",
        "operator table written by `gpuplace profile --operators` on one GPU: its measured kernels price "
        "that GPU class instead of its defaults (the others keep theirs)",
        component=False,  # the component's table is an artifact
    ),
    Param(
        "inventory",
        str,
        "mixed-a100-h100-l4",
        "bundled fleet name, fleet YAML, Alibaba node CSV, 'cluster', or 'local' (this machine, "
        "planned with --engine-steps)",
    ),
    Param(
        "engine_steps",
        str,
        "",
        "the local engine's measured step time (`gpuplace profile --engine-steps --out FILE`); "
        "needed for --inventory local",
        component=False,  # an artifact there
    ),
)
SLO_AND_TRAFFIC: tuple[Param, ...] = (
    Param("slo_tpot_ms", float, REQUIRED, "p99 time per output token target, ms", unit="ms"),
    Param("slo_ttft_ms", float, REQUIRED, "p99 time to first token target, ms", unit="ms"),
    Param("rate", float, REQUIRED, "target request rate, requests/s", unit="req/s"),
    Param("prompt_tokens", str, "512", "prompt length: N, uniform:LO:HI or normal:MEAN:STD"),
    Param("output_tokens", str, "128", "output length, same forms"),
    Param("trace", str, "", "a trace CSV (Azure LLM trace layout) whose length mix to plan for"),
)
SHAPES_AND_COST: tuple[Param, ...] = (
    Param("kinds", str, ",".join(KINDS), "shapes to consider"),
    Param(
        "gpus",
        str,
        "",
        "catalog GPU names to allow, comma-separated (default: all in the fleet)",
        component=False,
    ),
    Param(
        "dtype",
        str,
        "bf16",
        "weights: bf16, or fp8 (W8A8, vLLM's --quantization fp8; needs FP8 tensor cores: Ada, "
        "Hopper, Blackwell)",
        choices=("bf16", "fp8"),
    ),
    Param(
        "kv_cache_dtype",
        str,
        "auto",
        "KV cache: auto (the model's dtype) or fp8 (vLLM's --kv-cache-dtype fp8; half the bytes)",
        choices=("auto", "fp8"),
    ),
    Param(
        "price",
        list,
        [],
        "override a catalog price (repeatable)",
        metavar="GPU=USD_PER_HOUR",
        component=False,  # the component's prices are a JSON object
    ),
    Param("prices", dict, {}, "USD per GPU-hour by catalog GPU name, overriding the catalog", cli=False),
    Param("gpu_catalog", str, "", "a gpus.csv to use instead of the bundled one", component=False),
    Param("fit_threshold", float, DEFAULT_FIT_THRESHOLD, "reject placements whose GPU-fit score is lower"),
    Param(
        "max_load_share",
        float,
        None,
        "--inventory local: plan at most this share of the local engine's measured capacity (default: "
        f"{DEFAULT_MAX_LOAD_SHARE} on a CPU, where it admits without a cap and collapsed above it, 1 on a "
        "GPU, where no collapse was measured; docs/placement.md)",
        component=False,
    ),
    Param(
        "margin",
        str,
        "none",
        "band: judge the SLO on the prediction's error band, its slow edge for the GPU's class "
        "(docs/benchmarks/published.md); none: on the prediction itself",
        choices=MARGINS,
        component=False,
    ),
    Param(
        "task_mix",
        str,
        "",
        "fragmentation task mix GPUS:WEIGHT,... (default: the fleet's own workload)",
        component=False,
    ),
    Param(
        "workload",
        str,
        "",
        "a pod-list CSV (Alibaba format) to measure fragmentation against",
        component=False,
    ),
    Param("breach_penalty_usd", float, 0.0, "cost of one SLA breach, USD", unit="USD"),
)
SERVING: tuple[Param, ...] = (
    Param("name", str, "", "Deployment name (default: gpuplace-<model>)", component=False),
    Param("image", str, "", "serving image (default: vLLM's OpenAI server, pinned)"),
    Param("model_path", str, "", "what the server loads (default: --model)", component=False),
    Param("numa_align", bool, False, "size CPUs to the GPUs' NUMA node share"),
    Param("priority_class", str, "", "priorityClassName of the serving pods", component=False),
)


@dataclass(frozen=True, slots=True)
class ServingValues:
    """:data:`SERVING`'s values, typed: one field per row, read by :func:`~gpuplace.params.parse_as` (its
    defaults are the table's alone)."""

    name: str
    image: str
    model_path: str
    numa_align: bool
    priority_class: str


FORMS: tuple[Param, ...] = (
    Param(
        "emit",
        str,
        "",
        "forms to write, comma-separated: manifests, dra, kserve, kserve-llmisvc, llm-d, kueue, lws "
        "(default: manifests,dra,kserve); manifests/ holds the manifests form, alternatives/<form>.yaml "
        "the others",
        component=False,
    ),
    Param(
        "kube_version",
        str,
        "",
        "the target cluster's Kubernetes version, for the DRA API the claims need (default 1.35)",
        component=False,
    ),
    Param(
        "gpu_sharing",
        str,
        "time-slicing",
        "dra: how replicas the plan puts on one GPU share it: time-slicing (the driver's default, as "
        "priced; no feature gate), mps (the driver's MPSSupport gate) or consumable-capacity (a claim per "
        "replica for its share of the GPU's memory: the driver's ConsumableShares gate, Kubernetes 1.36+)",
        component=False,
    ),
    Param(
        "no_router",
        bool,
        False,
        "kserve-llmisvc: leave out the router (Gateway route and scheduler)",
        component=False,
    ),
)


@dataclass(frozen=True, slots=True)
class FormsValues:
    """:data:`FORMS`'s values, typed: one field per row, read by :func:`~gpuplace.params.parse_as` (its
    defaults are the table's alone)."""

    emit: str
    kube_version: str
    gpu_sharing: str
    no_router: bool


PARAMS: tuple[Param, ...] = (*INPUTS, *SLO_AND_TRAFFIC, *SHAPES_AND_COST, *SERVING, *FORMS)


@dataclass(frozen=True, slots=True)
class PlanValues:
    """:data:`PARAMS`'s values, typed: one field per row, read by :func:`~gpuplace.params.parse_as` (its
    defaults are the table's alone)."""

    model: str
    profile: str
    operators: str
    inventory: str
    engine_steps: str
    slo_tpot_ms: float
    slo_ttft_ms: float
    rate: float
    prompt_tokens: str
    output_tokens: str
    trace: str
    kinds: str
    gpus: str
    dtype: str
    kv_cache_dtype: str
    price: list[str]
    prices: dict[str, float]
    gpu_catalog: str
    fit_threshold: float
    max_load_share: float | None
    margin: str
    task_mix: str
    workload: str
    breach_penalty_usd: float
    name: str
    image: str
    model_path: str
    numa_align: bool
    priority_class: str
    emit: str
    kube_version: str
    gpu_sharing: str
    no_router: bool


_DEFAULTS = defaults(PARAMS)


def plan_request(
    params: Mapping[str, Any], catalog: GpuCatalog, trace_lengths: Sequence[tuple[int, int]] = ()
) -> PlanRequest:
    """What to plan for, from :data:`PARAMS` by name (``gpuplace plan``'s flags or the ``plan_placement``
    component's parameters; other keys ignored): the SLO in milliseconds (0 is no bound, which a plan
    refuses), comma lists, ``GPU=USD`` prices (``price``) or a JSON object of them (``prices``); a
    ``trace`` comes with its rows' (prompt, output) lengths, read by the caller."""
    from gpuplace.planner.fragmentation import DEFAULT_LLM_MIX, parse_mix
    from gpuplace.planner.request import PlanRequest

    p = parse_as(PlanValues, PARAMS, params)
    precision = Precision.parse(p.dtype, p.kv_cache_dtype)
    gpus = tuple(catalog.get(g, field="gpus").name for g in _names(p.gpus))
    for name in gpus:  # a GPU the user named explicitly cannot silently drop out of the plan
        refusal = precision.unsupported_on(catalog.get(name))
        if refusal:
            fp8_weights = precision.fp8_weights
            raise InvalidInput(
                "dtype" if fp8_weights else "kv_cache_dtype",
                precision.weights if fp8_weights else precision.kv_cache,
                f"--gpus names {refusal}",
                "Serve in bf16 (--dtype bf16 --kv-cache-dtype auto), or name Ada, Hopper or Blackwell GPUs",
            )
    prices = {**parse_prices(p.price), **p.prices}
    mix = p.task_mix
    return PlanRequest(
        model=p.model,
        # 0 ms is "no bound", as for a load test; a plan needs every bound (PlanRequest says so).
        slo=Slo.from_ms(ttft_ms=p.slo_ttft_ms, tpot_ms=p.slo_tpot_ms).with_rate(p.rate),
        traffic=Traffic.parse(
            p.prompt_tokens or _DEFAULTS["prompt_tokens"],  # "": the default, as a KFP parameter spells it
            p.output_tokens or _DEFAULTS["output_tokens"],
            trace=p.trace,
        ),
        trace_lengths=tuple(trace_lengths),
        deployment_name=p.name,
        fit_threshold=p.fit_threshold,
        prices_usd_per_hour={catalog.get(n, field="prices").name: float(v) for n, v in prices.items()},
        kinds=_names(p.kinds or _DEFAULTS["kinds"]),
        gpus=gpus,
        precision=precision,
        task_mix=parse_mix(mix) if mix else DEFAULT_LLM_MIX,
        task_mix_source="given" if mix else "default mix",
        breach_penalty_usd=p.breach_penalty_usd,
        margin=p.margin or _DEFAULTS["margin"],
        max_load_share=p.max_load_share,
    )


def serving_options(params: Mapping[str, Any]) -> ServingOptions:
    """How the plan's servers run, from :data:`PARAMS` by name; ``""`` takes the serving default."""
    from gpuplace.manifests import VLLM_IMAGE, ServingOptions

    p = parse_as(ServingValues, SERVING, params)
    return ServingOptions(
        image=p.image or VLLM_IMAGE,
        model_path=p.model_path,
        numa_align=p.numa_align,
        priority_class=p.priority_class,
    )


def emit_options(params: Mapping[str, Any]) -> EmitOptions:
    """The forms to write, the target's Kubernetes version and how a shared GPU is shared there, from
    :data:`PARAMS` by name (``emit`` a comma list, "" = the default forms)."""
    from gpuplace.manifests import EmitOptions
    from gpuplace.manifests.forms import DEFAULT_KUBE_VERSION, parse_forms

    p = parse_as(FormsValues, FORMS, params)
    return EmitOptions(
        forms=parse_forms(_names(p.emit)),
        explicit=bool(p.emit),
        kube_version=p.kube_version or DEFAULT_KUBE_VERSION,
        router=not p.no_router,
        sharing=p.gpu_sharing or "time-slicing",
    )


def parse_prices(items: Sequence[str]) -> dict[str, float]:
    """``["H100-SXM5-80GB=4.5", ...]`` → ``{"H100-SXM5-80GB": 4.5}``."""
    prices = {}
    for item in items:
        name, _, value = str(item).partition("=")
        try:
            prices[name.strip()] = float(value)
        except ValueError:
            raise InvalidInput(
                "price", item, "is not GPU=USD_PER_HOUR", "e.g. --price H100-SXM5-80GB=4.5"
            ) from None
    return prices


def _names(text: str) -> tuple[str, ...]:
    """A comma list's names, blanks left out."""
    return tuple(n.strip() for n in text.split(",") if n.strip())
