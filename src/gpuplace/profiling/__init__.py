"""The torch latency profiler: device discovery, timing, roofline, the sweep and its outputs.

Importable with only torch, transformers, pandas and pyarrow installed (no kfp, no mlflow), so that
``PYTHONPATH=src python3 -m gpuplace profile ...`` runs on a bare GPU machine. The names below are
loaded lazily, so that importing a torch-free submodule (``gpuplace.profiling.roofline``) from the
pure planner does not import torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuplace.profiling.engine_steps import EngineStepConfig as EngineStepConfig
    from gpuplace.profiling.engine_steps import measure_engine_steps as measure_engine_steps
    from gpuplace.profiling.engine_steps import read_engine_steps as read_engine_steps
    from gpuplace.profiling.engine_steps import write_engine_steps as write_engine_steps
    from gpuplace.profiling.io import load_profile as load_profile
    from gpuplace.profiling.io import profile_to_frame as profile_to_frame
    from gpuplace.profiling.io import save_profile as save_profile
    from gpuplace.profiling.io import write_device_json as write_device_json
    from gpuplace.profiling.profiler import ProfileConfig as ProfileConfig
    from gpuplace.profiling.profiler import run_profile as run_profile
    from gpuplace.profiling.summary import format_markdown as format_markdown
    from gpuplace.profiling.summary import format_table as format_table

_EXPORTS = {
    "EngineStepConfig": "gpuplace.profiling.engine_steps",
    "measure_engine_steps": "gpuplace.profiling.engine_steps",
    "read_engine_steps": "gpuplace.profiling.engine_steps",
    "write_engine_steps": "gpuplace.profiling.engine_steps",
    "ProfileConfig": "gpuplace.profiling.profiler",
    "run_profile": "gpuplace.profiling.profiler",
    "load_profile": "gpuplace.profiling.io",
    "profile_to_frame": "gpuplace.profiling.io",
    "save_profile": "gpuplace.profiling.io",
    "write_device_json": "gpuplace.profiling.io",
    "format_markdown": "gpuplace.profiling.summary",
    "format_table": "gpuplace.profiling.summary",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'gpuplace.profiling' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
