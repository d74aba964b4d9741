"""The serving spec: what one plan runs, the same on every orchestration path, with the engine parameters
the prediction assumed.

:class:`EngineParams` is what a continuous-batching engine is configured with (vLLM's names) plus the
KV-cache capacity those settings leave, each value with its source; the serving model simulates exactly
these values. A :class:`ServingSpec` holds the engine, its image and command-line arguments (the engine
parameters rendered into them), the engine parameters themselves, the model source, the GPU resource
and count per replica (the tensor-parallel degree), the MIG profile or time-sliced share, and the replica
count. The planner step writes it into ``plan.json``; the manifests render it; each deploy target records
the spec it actually ran, and the comparison refuses a verdict when two paths' specs differ
(:meth:`ServingSpec.differences`). Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from gpuplace.errors import InvalidInput
from gpuplace.types.engines import VLLM, engine_of
from gpuplace.types.precision import BF16, Precision

VLLM_VERSION = VLLM.version  # the release whose defaults the engine parameters record (types.engines)


ENGINE_FIELDS: tuple[str, ...] = (
    "max_num_batched_tokens",
    "max_num_seqs",
    "block_size",
    "gpu_memory_utilization",
    "max_model_len",
    "enable_chunked_prefill",
    "num_gpu_blocks",
)


class _Sources(dict[str, str]):
    """A read-only field → source mapping. A dict (not a ``MappingProxyType``), so that
    ``dataclasses.asdict`` and ``copy.deepcopy`` of a record holding the engine parameters (a
    ``DeploymentRecord``'s serving spec) work; every mutator refuses."""

    def _refuse(self, *args: object, **kwargs: object) -> None:
        raise TypeError("engine parameter sources are read-only")

    __setitem__ = __delitem__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse  # type: ignore[assignment]
    __ior__ = _refuse  # type: ignore[assignment]

    def __reduce__(self) -> tuple[type, tuple[dict[str, str]]]:
        return type(self), (dict(self),)

    def __deepcopy__(self, memo: dict[int, object]) -> _Sources:
        return self  # immutable


def frozen_sources(mapping: Mapping[str, str] | None) -> Mapping[str, str]:
    """A read-only copy of a field → source mapping, so the frozen value types stay frozen."""
    return _Sources(mapping or {})


def _positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInput(name, value, "must be a positive integer", "")


@dataclass(frozen=True, slots=True)
class EngineParams:
    """Scheduler settings of one replica and the KV-cache capacity they leave (vLLM's names).

    ``num_gpu_blocks`` is derived (KV memory ÷ bytes of one block), not a flag gpuplace passes:
    vLLM measures its own, and forcing ours could run out of memory on a device that has less free.
    """

    max_num_batched_tokens: int  # token budget of one step (prefill chunks + one token per decode)
    max_num_seqs: int  # requests running at once
    block_size: int  # tokens per KV-cache block
    gpu_memory_utilization: float  # share of device memory the engine may use
    max_model_len: int  # longest prompt + output one request may have
    enable_chunked_prefill: bool  # prompts split across steps, mixed with decodes (vLLM V1: always)
    num_gpu_blocks: int  # KV-cache capacity in blocks, per replica
    sources: Mapping[str, str] = field(default_factory=dict)  # field name -> where its value came from
    # weights and KV-cache dtype the memory and step-time models assumed (vLLM's --quantization and
    # --kv-cache-dtype); bf16 with the KV cache in the model's dtype by default
    precision: Precision = BF16
    # vLLM V0's multi-step scheduling (``--num-scheduler-steps``, vLLM 0.6–0.10): a decode batch runs
    # this many steps per scheduler call, new requests join only between runs, and the engine's CPU work
    # is paid once per run. Removed with the V0 engine: 1 for every engine gpuplace deploys; it models
    # published runs of vLLM 0.6 (docs/serving-model.md, "Multi-step scheduling")
    num_scheduler_steps: int = 1
    # vLLM V1's asynchronous scheduling (its AsyncScheduler, on by default on a GPU): step k+1 is scheduled
    # while step k runs, so an arrival is seen a step later and a finished request holds its slot and blocks
    # a step longer (docs/serving-model.md); simulated when set. vllm_engine_params sets it (vllm serve's
    # default); off here, the engine-neutral value: transformers' continuous batching schedules in line
    async_scheduling: bool = False

    def __post_init__(self) -> None:
        for name in (
            "max_num_batched_tokens",
            "max_num_seqs",
            "block_size",
            "max_model_len",
            "num_scheduler_steps",
        ):
            _positive_int(name, getattr(self, name))
        if not isinstance(self.async_scheduling, bool):
            raise InvalidInput("async_scheduling", self.async_scheduling, "must be true or false", "")
        if self.async_scheduling and self.num_scheduler_steps != 1:
            raise InvalidInput(
                "async_scheduling",
                True,
                f"with num_scheduler_steps={self.num_scheduler_steps}: multi-step is V0's, asynchronous "
                "scheduling V1's",
                "Set one of them",
            )
        if isinstance(self.num_gpu_blocks, bool) or not isinstance(self.num_gpu_blocks, int):
            raise InvalidInput("num_gpu_blocks", self.num_gpu_blocks, "must be an integer", "")
        if self.num_gpu_blocks < 0:
            raise InvalidInput(
                "num_gpu_blocks",
                self.num_gpu_blocks,
                "is negative: the weights and the runtime reserve do not fit the memory",
                "Use a GPU with more memory or a higher tensor-parallel degree",
            )
        u = self.gpu_memory_utilization
        if not isinstance(u, int | float) or not 0 < u <= 1:
            raise InvalidInput(
                "gpu_memory_utilization",
                u,
                "must be in (0, 1]",
                f"vLLM {VLLM_VERSION}'s default is 1.0 (with its extensible KV cache)",
            )
        if self.max_num_batched_tokens < self.max_num_seqs:
            # vLLM's SchedulerConfig refuses this too: a step must fit one token of every sequence.
            raise InvalidInput(
                "max_num_batched_tokens",
                self.max_num_batched_tokens,
                f"is below max_num_seqs={self.max_num_seqs}",
                "Raise max_num_batched_tokens or lower max_num_seqs",
            )
        if not self.enable_chunked_prefill and self.max_num_batched_tokens < self.max_model_len:
            raise InvalidInput(
                "max_num_batched_tokens",
                self.max_num_batched_tokens,
                f"is below max_model_len={self.max_model_len} without chunked prefill",
                "Enable chunked prefill or raise max_num_batched_tokens",
            )
        object.__setattr__(self, "sources", frozen_sources(self.sources))

    def with_changes(self, changes: Mapping[str, Any]) -> EngineParams:
        """These parameters as another run set them (a published run of an older vLLM), each change
        checked as the fields are; the KV cache, precision and sources are not changed this way."""
        allowed = {f.name for f in fields(EngineParams)} - {"sources", "precision", "num_gpu_blocks"}
        unknown = sorted(set(changes) - allowed)
        if unknown:
            raise InvalidInput(
                "engine_changes",
                unknown,
                "are not engine parameters a prediction may change",
                f"Use some of {', '.join(sorted(allowed))}",
            )
        sources = {**self.sources, **{k: "set for this prediction" for k in changes}}
        changes = dict(changes)
        if changes.get("num_scheduler_steps", 1) != 1 and "async_scheduling" not in changes:
            # multi-step is V0's engine, which had no asynchronous scheduling (vLLM's default since V1)
            changes["async_scheduling"] = False
            sources["async_scheduling"] = "off with multi-step scheduling: vLLM V0 had none"
        return replace(self, **changes, sources=sources)

    @property
    def kv_capacity_tokens(self) -> int:
        return self.num_gpu_blocks * self.block_size

    def to_vllm_args(self) -> list[str]:
        """``vllm serve`` flags that make the deployed engine schedule as the model assumed."""
        if self.num_scheduler_steps != 1:
            raise InvalidInput(
                "num_scheduler_steps",
                self.num_scheduler_steps,
                "is multi-step scheduling, which vLLM removed with its V0 engine: "
                f"vLLM {VLLM_VERSION} has no --num-scheduler-steps",
                "Deploy with num_scheduler_steps=1 (multi-step only models published runs of vLLM 0.6)",
            )
        return [
            "--max-num-batched-tokens",
            str(self.max_num_batched_tokens),
            "--max-num-seqs",
            str(self.max_num_seqs),
            "--block-size",
            str(self.block_size),
            # below 1.0 only (a time-sliced share): 1.0 is what vLLM 0.34 resolves an unset value to with its
            # extensible KV cache; passed, it would also hold where vLLM falls back to estimate-based sizing
            # (a driver without virtual memory management), whose own default there is 0.92
            *(
                ["--gpu-memory-utilization", f"{self.gpu_memory_utilization:g}"]
                if self.gpu_memory_utilization < 1.0
                else []
            ),
            "--max-model-len",
            str(self.max_model_len),
            # explicit either way: vLLM's own default (on where compatible) must not decide for the plan
            "--async-scheduling" if self.async_scheduling else "--no-async-scheduling",
            "--enable-chunked-prefill" if self.enable_chunked_prefill else "--no-enable-chunked-prefill",
            *self.precision.vllm_args(),
        ]

    def to_transformers_serve_args(self) -> list[str]:
        """``transformers serve --continuous-batching`` flags for the same budget and cache.

        transformers exposes no ``max_num_seqs`` (its ``max_requests_per_batch`` is not a CLI flag) and
        always chunks prompts; the local target's model must use the engine's own values for those.
        """
        return [
            "--continuous-batching",
            "--cb-block-size",
            str(self.block_size),
            "--cb-num-blocks",
            str(self.num_gpu_blocks),
            "--cb-max-batch-tokens",
            str(self.max_num_batched_tokens),
        ]

    def to_json_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {name: getattr(self, name) for name in ENGINE_FIELDS}
        data["kv_capacity_tokens"] = self.kv_capacity_tokens
        data["sources"] = dict(self.sources)
        data["precision"] = self.precision.to_json_dict()
        if self.num_scheduler_steps != 1:  # written only when set: plans (and their ids) stay as they were
            data["num_scheduler_steps"] = self.num_scheduler_steps
        if self.async_scheduling:
            data["async_scheduling"] = True
        return data

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> EngineParams:
        missing = [name for name in ENGINE_FIELDS if name not in data]
        if missing:
            raise InvalidInput("engine", sorted(missing), "missing from the engine parameters", "")
        return cls(
            max_num_batched_tokens=int(data["max_num_batched_tokens"]),
            max_num_seqs=int(data["max_num_seqs"]),
            block_size=int(data["block_size"]),
            gpu_memory_utilization=float(data["gpu_memory_utilization"]),
            max_model_len=int(data["max_model_len"]),
            enable_chunked_prefill=bool(data["enable_chunked_prefill"]),
            num_gpu_blocks=int(data["num_gpu_blocks"]),
            sources={str(k): str(v) for k, v in (data.get("sources") or {}).items()},
            precision=Precision.from_json_dict(data.get("precision")),  # absent in plans before 2026-12
            num_scheduler_steps=int(data.get("num_scheduler_steps", 1)),
            async_scheduling=bool(data.get("async_scheduling", False)),
        )


@dataclass(frozen=True, slots=True)
class ServingSpec:
    """One replica's server and how many replicas run it."""

    engine: str  # a registered engine's name (types.engines): vLLM on clusters, transformers locally
    image: str  # container image; "" for a process on this machine
    model: str  # the model the plan is for (a preset name, a config.json or a model directory)
    model_source: str  # what the server loads: a Hugging Face id, a path in the image, or a local dir
    served_model_name: str  # the `model` field requests must carry
    args: tuple[str, ...]  # the engine's command-line arguments, engine parameters included
    gpu_resource: str  # "nvidia.com/gpu", "nvidia.com/mig-<profile>", a DRA device class, "" = none
    gpus_per_replica: int  # devices of gpu_resource per replica; the TP degree for whole GPUs
    tensor_parallel: int = 1
    mig_profile: str = ""
    gpu_share: float = 1.0  # fraction of one GPU for a time-sliced share
    replicas: int = 1
    port: int = 8000  # 0: a local server on a free port of this machine
    # the engine parameters the prediction assumed, rendered into ``args``; None when read back from a
    # running server, whose command line is all there is
    engine_params: EngineParams | None = None

    def __post_init__(self) -> None:
        engine_of(self.engine)  # a registered engine, or refused by name
        for name in ("gpus_per_replica", "tensor_parallel", "replicas", "port"):
            value = getattr(self, name)
            # 0 GPUs: the local engine on a CPU; port 0: a local server on any free port
            if not isinstance(value, int) or value < (0 if name in ("gpus_per_replica", "port") else 1):
                raise InvalidInput(f"serving.{name}", value, "must be a positive integer", "")
        if not 0 < self.gpu_share <= 1:
            raise InvalidInput("serving.gpu_share", self.gpu_share, "must be in (0, 1]", "")

    def differences(self, other: ServingSpec) -> tuple[str, ...]:
        """``"field: a ≠ b"`` for every field where two specs differ; empty when they serve the same."""
        out = []
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if a != b:
                out.append(f"{f.name}: {_show(a)} ≠ {_show(b)}")
        return tuple(out)

    def to_json_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["args"] = list(self.args)
        data["engine_params"] = self.engine_params.to_json_dict() if self.engine_params else None
        return data

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> ServingSpec:
        known = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        known["args"] = tuple(str(a) for a in known.get("args") or ())
        if "gpu_share" in known:
            known["gpu_share"] = float(known["gpu_share"])
        engine = known.get("engine_params")
        known["engine_params"] = EngineParams.from_json_dict(engine) if engine else None
        return cls(**known)


def _show(value: object) -> str:
    return " ".join(value) if isinstance(value, tuple) else repr(value)
