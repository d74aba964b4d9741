"""The torch latency profiler: device discovery, timing, roofline, the sweep and its outputs.

Importable with only torch, transformers, pandas and pyarrow installed (no kfp, no mlflow), so that
``PYTHONPATH=src python3 -m gpuplace profile ...`` runs on a bare GPU machine.
"""

from gpuplace.profiling.io import load_profile, profile_to_frame, save_profile, write_device_json
from gpuplace.profiling.profiler import ProfileConfig, run_profile
from gpuplace.profiling.summary import format_markdown, format_table

__all__ = [
    "ProfileConfig",
    "format_markdown",
    "format_table",
    "load_profile",
    "profile_to_frame",
    "run_profile",
    "save_profile",
    "write_device_json",
]
