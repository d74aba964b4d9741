"""The serving spec: what one plan runs, the same on every orchestration path.

A :class:`ServingSpec` holds the engine, its image and command-line arguments (with the engine
parameters the prediction assumed), the model source, the GPU resource and count per replica (the
tensor-parallel degree), the MIG profile or time-sliced share, and the replica count. The planner step
writes it into ``plan.json``; the manifests render it; each deploy target records the spec it actually
ran, and the comparison refuses a verdict when two paths' specs differ (:meth:`differences`).
Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from gpuplace.errors import InvalidInput

ENGINES = ("vllm", "transformers")


@dataclass(frozen=True, slots=True)
class ServingSpec:
    """One replica's server and how many replicas run it."""

    engine: str  # "vllm" on clusters, "transformers" (continuous batching) on the local target
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

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise InvalidInput("serving.engine", self.engine, f"must be one of {', '.join(ENGINES)}", "")
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
        data = asdict(self)
        data["args"] = list(self.args)
        return data

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> ServingSpec:
        known = {f.name: data[f.name] for f in fields(cls) if f.name in data}
        known["args"] = tuple(str(a) for a in known.get("args") or ())
        if "gpu_share" in known:
            known["gpu_share"] = float(known["gpu_share"])
        return cls(**known)


def _show(value: object) -> str:
    return " ".join(value) if isinstance(value, tuple) else repr(value)
