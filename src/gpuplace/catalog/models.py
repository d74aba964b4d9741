"""Model-architecture presets (Hugging Face ``config.json`` files, no weights) and their shapes.

A model is named one of three ways, and :func:`resolve_model` tells them apart: a preset name from
``data/models/`` (``llama-3.1-8b``), a path to a ``config.json``, or a local weights directory that
holds one. Only the architecture is read here; building the torch module is the profiler's job.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from gpuplace.errors import InvalidInput, UnknownName
from gpuplace.types import ModelArch

MODELS_DIR = Path(__file__).parent / "data" / "models"
# Keys a decoder-only config must have for gpuplace to reason about its latency and memory.
REQUIRED_KEYS: tuple[str, ...] = (
    "model_type",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "vocab_size",
)
# Families whose parameter count gpuplace computes from the config (and checks against torch).
LLAMA_LIKE: frozenset[str] = frozenset({"llama", "mistral", "qwen2", "qwen3"})


@dataclass(frozen=True, slots=True)
class ModelSource:
    """Where a model comes from: the config to build it from and, for a weights directory, the path."""

    name: str
    kind: str  # "preset", "config" or "weights"
    config: Mapping[str, Any]
    weights_dir: Path | None = None


def model_preset_names() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in MODELS_DIR.glob("*.json")))


def _read_config(path: Path, field: str, value: str) -> dict[str, Any]:
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise InvalidInput(
            field,
            value,
            f"{path} is not valid JSON ({e.msg} at line {e.lineno} column {e.colno})",
            "Fix the file",
        ) from None
    if not isinstance(raw, dict):
        raise InvalidInput(
            field, value, f"{path} holds a {type(raw).__name__}, not an object", "Fix the file"
        )
    return raw


def resolve_model(spec: str, *, field: str = "model") -> ModelSource:
    """Find the config for a preset name, a ``config.json`` path or a weights directory."""
    path = Path(spec).expanduser()
    if spec.endswith(".json") or path.is_file():
        if not path.is_file():
            raise InvalidInput(
                field, spec, "no such file", "Give a preset name, a config.json or a model directory"
            )
        config = _read_config(path, field, spec)
        kind, weights_dir = "config", None
    elif path.is_dir():
        config_path = path / "config.json"
        if not config_path.is_file():
            raise InvalidInput(
                field, spec, "directory has no config.json", "Point at a Hugging Face model directory"
            )
        config = _read_config(config_path, field, spec)
        kind, weights_dir = "weights", path
    elif ("/" in spec or spec.startswith(".")) and not (MODELS_DIR / f"{spec}.json").is_file():
        raise InvalidInput(
            field, spec, "no such file or directory", "Give a preset name, a config.json or a directory"
        )
    else:
        preset = MODELS_DIR / f"{spec}.json"
        if not preset.is_file():
            raise UnknownName(field, spec, model_preset_names())
        config = _read_config(preset, field, spec)
        kind, weights_dir = "preset", None
    config.pop("_gpuplace", None)
    validate_config(config, field=field, value=spec)
    return ModelSource(name=spec, kind=kind, config=MappingProxyType(config), weights_dir=weights_dir)


def load_model_config(spec: str) -> dict[str, Any]:
    """The (validated) config dict of a preset, config.json or weights directory."""
    return dict(resolve_model(spec).config)


def _positive_int(config: Mapping[str, Any], key: str, field: str, value: str) -> int:
    v = config.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise InvalidInput(f"{field}.{key}", v, f"must be a positive integer (in {value})", "Fix the config")
    return v


def validate_config(config: Mapping[str, Any], *, field: str = "model", value: str = "") -> None:
    """Reject a config that lacks what gpuplace needs, naming the key."""
    missing = [k for k in REQUIRED_KEYS if k not in config]
    if missing:
        raise InvalidInput(
            f"{field}.{missing[0]}",
            None,
            f"missing from the config of {value or 'the model'} (missing: {', '.join(missing)})",
            "Use a decoder-only Hugging Face config.json",
        )
    for key in REQUIRED_KEYS[1:]:
        _positive_int(config, key, field, value)
    heads = int(config["num_attention_heads"])
    kv = config.get("num_key_value_heads") or heads
    _positive_int({"num_key_value_heads": kv}, "num_key_value_heads", field, value)
    if heads % int(kv):
        raise InvalidInput(
            f"{field}.num_key_value_heads", kv, f"does not divide num_attention_heads={heads}", ""
        )
    if not config.get("head_dim") and int(config["hidden_size"]) % heads:
        raise InvalidInput(
            f"{field}.hidden_size",
            config["hidden_size"],
            f"is not a multiple of num_attention_heads={heads}",
            "",
        )


def count_params(config: Mapping[str, Any]) -> int | None:
    """Parameter count of a Llama-family config, or None for families gpuplace does not model."""
    if config.get("model_type") not in LLAMA_LIKE:
        return None
    h = int(config["hidden_size"])
    i = int(config["intermediate_size"])
    v = int(config["vocab_size"])
    layers = int(config["num_hidden_layers"])
    nh = int(config["num_attention_heads"])
    nkv = int(config.get("num_key_value_heads") or nh)
    hd = int(config.get("head_dim") or h // nh)
    family = config.get("model_type")
    q, kv = nh * hd, nkv * hd
    attn = h * q + 2 * h * kv + q * h
    # Biases follow the transformers modules, not the config keys alone: qwen2 always biases q/k/v
    # (never o); llama and qwen3 bias q/k/v *and* o under attention_bias; mistral never biases.
    if family == "qwen2":
        attn += q + 2 * kv
    elif family in ("llama", "qwen3") and config.get("attention_bias"):
        attn += q + 2 * kv + h
    if family == "qwen3":
        attn += 2 * hd  # per-head q/k RMSNorm
    mlp = 3 * h * i + (2 * i + h if family == "llama" and config.get("mlp_bias") else 0)
    per_layer = attn + mlp + 2 * h
    embed = v * h
    head = 0 if config.get("tie_word_embeddings") else v * h
    return embed + layers * per_layer + h + head


def model_arch_from_config(name: str, config: Mapping[str, Any], num_params: int | None = None) -> ModelArch:
    """The shapes gpuplace needs, from a config; ``num_params`` overrides the analytic count."""
    validate_config(config, value=name)
    h = int(config["hidden_size"])
    nh = int(config["num_attention_heads"])
    params = num_params if num_params is not None else count_params(config)
    if params is None:
        raise InvalidInput(
            "model.model_type",
            config.get("model_type"),
            "parameter count is not modelled for this family",
            f"Build the model (gpuplace profile counts its parameters) or use one of {sorted(LLAMA_LIKE)}",
        )
    return ModelArch(
        name=name,
        model_type=str(config["model_type"]),
        num_layers=int(config["num_hidden_layers"]),
        hidden_size=h,
        num_attention_heads=nh,
        num_kv_heads=int(config.get("num_key_value_heads") or nh),
        head_dim=int(config.get("head_dim") or h // nh),
        intermediate_size=int(config["intermediate_size"]),
        vocab_size=int(config["vocab_size"]),
        max_position_embeddings=int(config.get("max_position_embeddings") or 0),
        tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
        num_params=int(params),
    )


def hf_config(source: ModelSource) -> Any:
    """The transformers config of a model source (transformers is imported only here, when asked)."""
    from transformers import AutoConfig

    config = dict(source.config)
    model_type = config.pop("model_type")
    try:
        return AutoConfig.for_model(model_type, **config)
    except (ValueError, KeyError) as e:
        raise InvalidInput(
            "model.model_type",
            model_type,
            f"transformers cannot build it ({e})",
            "Use a decoder-only architecture",
        ) from None
