"""GPU and model-architecture catalogs: versioned data files under ``data/`` and their loaders.

The catalogs are data, not code: ``gpus.csv`` (one row per GPU model, with sources),
``mig_profiles.csv`` (MIG instance profiles per GPU model) and ``models/<preset>.json``
(Hugging Face ``config.json`` files, architecture only). Users edit prices or add GPUs by pointing
``--gpu-catalog`` (or ``GPUPLACE_GPU_CATALOG``) at their own copy of ``gpus.csv``. Loaders are small
query functions over immutable :class:`~gpuplace.types.GpuSpec` values; nothing here reads global
state except the documented environment variable at the entry point :func:`load_gpu_catalog`.
"""

from __future__ import annotations

from gpuplace.catalog.gpus import (
    CATALOG_VERSION,
    GpuCatalog,
    load_gpu_catalog,
)
from gpuplace.catalog.models import (
    load_model_config,
    model_arch_from_config,
    model_preset_names,
    resolve_model,
)

__all__ = [
    "CATALOG_VERSION",
    "GpuCatalog",
    "load_gpu_catalog",
    "load_model_config",
    "model_arch_from_config",
    "model_preset_names",
    "resolve_model",
]
