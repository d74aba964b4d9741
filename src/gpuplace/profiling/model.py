"""Building the torch module to profile from a :class:`~gpuplace.catalog.models.ModelSource`.

Random weights by default, like vLLM's ``--load-format dummy``: latency depends on shapes, not on
values, and weights cannot be downloaded everywhere. A local weights directory can be loaded for
real with ``random_weights=False``. The module is built directly on the target device so that an
8B model is not first initialised on the CPU.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from gpuplace.catalog.models import ModelSource, hf_config
from gpuplace.errors import InvalidInput


def build_model(
    source: ModelSource, dtype: torch.dtype, device: torch.device, *, random_weights: bool = True
) -> Any:
    """An eval-mode causal LM in ``dtype`` on ``device``, without gradients."""
    from transformers import AutoModelForCausalLM

    if not random_weights:
        if source.weights_dir is None:
            raise InvalidInput(
                "random_weights",
                False,
                f"{source.name!r} is a {source.kind}, which has no weights",
                "Give a model directory",
            )
        model = AutoModelForCausalLM.from_pretrained(source.weights_dir, dtype=dtype, device_map={"": device})
    else:
        config = hf_config(source)
        with torch.device(device):
            model = AutoModelForCausalLM.from_config(config, dtype=dtype)  # type: ignore[no-untyped-call]
    model.train(False)
    model.requires_grad_(False)
    return model


def num_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def cache_kwarg(model: Any) -> str:
    """The forward() keyword for the KV cache: ``cache`` in transformers ≥ 5.2x, else ``past_key_values``."""
    params = inspect.signature(model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def new_static_cache(model: Any, batch_size: int, max_cache_len: int) -> Any:
    from transformers import StaticCache

    try:
        return StaticCache(config=model.config, max_cache_len=max_cache_len)
    except TypeError:  # transformers < 5 wanted the batch size, device and dtype up front
        return StaticCache(config=model.config, max_batch_size=batch_size, max_cache_len=max_cache_len)


def new_dynamic_cache(model: Any) -> Any:
    from transformers import DynamicCache

    try:
        return DynamicCache(config=model.config)
    except TypeError:
        return DynamicCache()
