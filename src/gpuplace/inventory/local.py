"""This machine as an inventory (``--inventory local``): one node, named by its host name, with its GPUs
as NVML reports them (none on a CPU-only machine). The planner plans onto it with the local engine's
measured step time (:func:`gpuplace.planner.plan_local`), not a fleet search. NVML is read through
``nvidia-ml-py`` when it is installed and a driver answers; otherwise the machine has no GPU here.
"""

from __future__ import annotations

import os
import socket

from gpuplace.catalog import GpuCatalog
from gpuplace.types import GpuDevice, Inventory, Node
from gpuplace.types.fleet import LOCAL_INVENTORY


def _memory_gib() -> float:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return 0.0


def _nvml_gpus(node: str, catalog: GpuCatalog) -> tuple[tuple[GpuDevice, ...], tuple[str, ...]]:
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        return (), ()
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return (), ()  # no driver: a CPU-only machine
    try:
        gpus, warnings = [], []
        for i in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(handle)
            name = name.decode() if isinstance(name, bytes) else str(name)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle).total / 2**30
            spec = catalog.match_device(name, memory)
            if spec is None:
                warnings.append(f"GPU {i} ({name}) is not in the GPU catalog")
            gpus.append(GpuDevice(f"{node}/gpu{i}", i, spec.name if spec else "", name, memory))
        return tuple(gpus), tuple(warnings)
    finally:
        pynvml.nvmlShutdown()


def local_inventory(catalog: GpuCatalog) -> Inventory:
    """This machine: its host name, CPU cores and memory, and its GPUs (none on a CPU)."""
    name = socket.gethostname().lower()  # as the real node registers (node names are lower case)
    gpus, warnings = _nvml_gpus(name, catalog)
    node = Node(name, gpus, cpu_cores=os.cpu_count() or 0, memory_gib=round(_memory_gib(), 1))
    return Inventory((node,), source=LOCAL_INVENTORY, warnings=warnings)
