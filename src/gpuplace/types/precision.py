"""The precision a replica serves in: its weights (bf16, or FP8 W8A8) and its KV cache (the model's dtype,
or FP8).

:class:`Precision` is carried by the plan request, the engine parameters the prediction assumed and so the
serving spec. The memory model reads :attr:`Precision.weight_bytes` (bytes per parameter of the linear
layers; embeddings and the LM head stay bf16, as vLLM's FP8 methods leave them) and
:attr:`Precision.kv_bytes`; the step-time model also reads whether the linear layers run on FP8 tensor
cores (:attr:`Precision.fp8_weights`); the manifests pass :meth:`Precision.vllm_args`, spelt as vLLM's
``vllm serve`` spells them (``--quantization fp8``, ``--kv-cache-dtype fp8``). bf16 with the KV cache in
the model's dtype (``auto``) is the default, so a plan that names no precision is what it always was.
Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuplace.errors import InvalidInput
from gpuplace.types.catalog import GpuSpec

WEIGHT_DTYPES: tuple[str, ...] = ("bf16", "fp8")
KV_CACHE_DTYPES: tuple[str, ...] = ("auto", "fp8")
_BYTES = {"bf16": 2, "auto": 2, "fp8": 1}  # "auto": the KV cache in the model's dtype, bf16


@dataclass(frozen=True, slots=True)
class Precision:
    """Weights ``bf16`` or ``fp8`` (W8A8: FP8 weights and per-token FP8 activations on the linear layers)
    and a KV cache ``auto`` (the model's dtype) or ``fp8``."""

    weights: str = "bf16"
    kv_cache: str = "auto"

    def __post_init__(self) -> None:
        if self.weights not in WEIGHT_DTYPES:
            raise InvalidInput(
                "dtype", self.weights, f"must be one of {', '.join(WEIGHT_DTYPES)}", "The default is bf16"
            )
        if self.kv_cache not in KV_CACHE_DTYPES:
            raise InvalidInput(
                "kv_cache_dtype",
                self.kv_cache,
                f"must be one of {', '.join(KV_CACHE_DTYPES)}",
                "The default is auto (the model's dtype)",
            )

    @classmethod
    def parse(cls, dtype: object = None, kv_cache_dtype: object = None) -> Precision:
        """From the edges' spelling (``--dtype``, ``--kv-cache-dtype``); None or "" is the default."""
        weights = str(dtype or "bf16").strip().lower()
        return cls(weights=weights, kv_cache=str(kv_cache_dtype or "auto").strip().lower())

    @property
    def fp8_weights(self) -> bool:
        return self.weights == "fp8"

    @property
    def uses_fp8(self) -> bool:
        return self.weights == "fp8" or self.kv_cache == "fp8"

    @property
    def weight_bytes(self) -> int:
        """Bytes per parameter of the linear layers (embeddings and the LM head stay 2)."""
        return _BYTES[self.weights]

    @property
    def kv_bytes(self) -> int:
        """Bytes per cached K or V element."""
        return _BYTES[self.kv_cache]

    @property
    def label(self) -> str:
        """``bf16``, ``fp8``, ``bf16 + fp8 KV``, ``fp8 + fp8 KV``."""
        return self.weights + (" + fp8 KV" if self.kv_cache == "fp8" else "")

    def unsupported_on(self, spec: GpuSpec) -> str:
        """Why ``spec`` cannot serve in this precision ("" when it can): FP8 needs FP8 tensor cores
        (Ada, Hopper, Blackwell: a catalog ``fp8_tflops`` above 0)."""
        if self.uses_fp8 and spec.fp8_tflops <= 0:
            what = "FP8 weights" if self.fp8_weights else "an FP8 KV cache"
            return (
                f"{spec.name} ({spec.architecture}) has no FP8 tensor cores (fp8_tflops 0 in the catalog), "
                f"so it cannot serve {what}"
            )
        return ""

    def vllm_args(self) -> list[str]:
        """``vllm serve`` flags for this precision; none for the default (bf16, KV cache ``auto``).

        ``--quantization fp8`` is vLLM's dynamic FP8 (W8A8) quantisation of a bf16 checkpoint; a
        checkpoint already quantised (llm-compressor's) carries its own method in its config."""
        args = ["--quantization", "fp8"] if self.fp8_weights else []
        return args + (["--kv-cache-dtype", "fp8"] if self.kv_cache == "fp8" else [])

    def to_json_dict(self) -> dict[str, str]:
        return {"weights": self.weights, "kv_cache": self.kv_cache}

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any] | None) -> Precision:
        data = data or {}
        return cls(weights=str(data.get("weights") or "bf16"), kv_cache=str(data.get("kv_cache") or "auto"))


BF16 = Precision()
