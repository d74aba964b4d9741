"""Which torch device and dtype the profiler runs on, and what that device is.

Owns device/dtype parsing (``auto|cpu|cuda[:N]``; ``auto|float32|bfloat16|float16``), the check that
a dtype really runs on the device, and topology discovery: GPU name, memory, compute capability, MIG,
PCIe link, NUMA node and NVLink peers through NVML (``nvidia-ml-py``), falling back to
``nvidia-smi topo -m``; CPU model and core counts on CPU. Discovery never fails the profile: what
cannot be read is left empty and a note says why.
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from gpuplace.catalog import GpuCatalog
from gpuplace.errors import DeviceUnavailable, InvalidInput
from gpuplace.types import DeviceInfo, NvLinkPeer

DTYPE_ALIASES: dict[str, str] = {
    "float32": "float32",
    "fp32": "float32",
    "bfloat16": "bfloat16",
    "bf16": "bfloat16",
    "float16": "float16",
    "fp16": "float16",
    "half": "float16",
}
_DEVICE_RE = re.compile(r"^(auto|cpu|cuda(?::(\d+))?)$")


def resolve_device(spec: str) -> torch.device:
    """Parse ``auto|cpu|cuda[:N]`` and check the device exists."""
    m = _DEVICE_RE.match(spec.strip().lower())
    if not m:
        raise InvalidInput("device", spec, "not a device", "Use auto, cpu, cuda or cuda:N")
    if m.group(1) == "auto":
        return (
            torch.device("cuda", torch.cuda.current_device())
            if torch.cuda.is_available()
            else torch.device("cpu")
        )
    if m.group(1) == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        built = torch.version.cuda or "no CUDA"
        raise DeviceUnavailable(
            "device",
            spec,
            f"CUDA was requested but torch {torch.__version__} (built for {built}) sees no GPU",
            "Use --device cpu or --device auto, or run this on a GPU node",
        )
    index = int(m.group(2) or 0)
    count = torch.cuda.device_count()
    if index >= count:
        raise DeviceUnavailable(
            "device", spec, f"only {count} CUDA device(s) visible", f"Use cuda:0..cuda:{count - 1}"
        )
    return torch.device("cuda", index)


def dtype_name(spec: str) -> str:
    try:
        return DTYPE_ALIASES[spec.strip().lower()]
    except KeyError:
        raise InvalidInput(
            "dtype", spec, "not a supported dtype", "Use float32, bfloat16 or float16"
        ) from None


def default_dtype(device: torch.device) -> str:
    """bf16 where the GPU has it (as servers run), fp16 on older GPUs, fp32 on CPU."""
    if device.type == "cuda":
        return "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
    return "float32"


def torch_dtype(name: str) -> torch.dtype:
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def check_dtype_runs(device: torch.device, dtype: torch.dtype, name: str) -> None:
    """Run a small matmul and softmax in ``dtype`` on ``device``; raise a clear error if it cannot."""
    if device.type == "cuda" and dtype == torch.bfloat16 and not torch.cuda.is_bf16_supported():
        raise DeviceUnavailable(
            "dtype", name, f"{torch.cuda.get_device_name(device)} has no bfloat16 support", "Use float16"
        )
    try:
        a = torch.ones(8, 8, device=device, dtype=dtype)
        torch.softmax(a @ a, dim=-1).sum().item()
    except (RuntimeError, NotImplementedError, TypeError) as e:
        raise DeviceUnavailable(
            "dtype",
            name,
            f"cannot run on {device} ({type(e).__name__}: {str(e).splitlines()[0]})",
            "Pick another dtype",
        ) from e


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _numa_node_count() -> int | None:
    nodes = list(Path("/sys/devices/system/node").glob("node[0-9]*"))
    return len(nodes) or None


def _versions() -> dict[str, Any]:
    import transformers

    return {"torch_version": torch.__version__, "transformers_version": transformers.__version__}


def discover_cpu() -> DeviceInfo:
    import psutil

    mem = psutil.virtual_memory().total / 2**30
    return DeviceInfo(
        kind="cpu",
        name=_cpu_model(),
        memory_gib=round(mem, 2),
        cpu_model=_cpu_model(),
        cpu_physical_cores=psutil.cpu_count(logical=False),
        cpu_logical_cores=psutil.cpu_count(logical=True),
        torch_threads=torch.get_num_threads(),
        numa_nodes=_numa_node_count(),
        topology_source="cpu",
        **_versions(),
    )


def _pci_numa_node(bus_id: str) -> int | None:
    """NUMA node of a PCI device from sysfs; bus ids come as 00000000:18:00.0 from NVML."""
    if not bus_id:
        return None
    domain, _, rest = bus_id.lower().partition(":")
    path = Path(f"/sys/bus/pci/devices/{domain[-4:]}:{rest}/numa_node")
    try:
        node = int(path.read_text().strip())
    except (OSError, ValueError):
        return None
    return node if node >= 0 else None


def _decode(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _nvml_topology(bus_id: str) -> dict[str, Any]:
    """Topology of the GPU at ``bus_id`` through NVML; raises when NVML is unusable."""
    import pynvml

    pynvml.nvmlInit()
    try:
        handle = pynvml.nvmlDeviceGetHandleByPciBusId(bus_id)
        info: dict[str, Any] = {"topology_source": "nvml"}
        info["driver_version"] = _decode(pynvml.nvmlSystemGetDriverVersion())
        with contextlib.suppress(pynvml.NVMLError):
            v = pynvml.nvmlSystemGetCudaDriverVersion()
            info["cuda_version"] = f"{v // 1000}.{(v % 1000) // 10}"
        try:
            current, _pending = pynvml.nvmlDeviceGetMigMode(handle)
            info["mig_mode"] = bool(current)
        except pynvml.NVMLError:
            info["mig_mode"] = False
        for key, fn in (
            ("pcie_gen", pynvml.nvmlDeviceGetCurrPcieLinkGeneration),
            ("pcie_width", pynvml.nvmlDeviceGetCurrPcieLinkWidth),
            ("pcie_gen_max", pynvml.nvmlDeviceGetMaxPcieLinkGeneration),
            ("pcie_width_max", pynvml.nvmlDeviceGetMaxPcieLinkWidth),
        ):
            with contextlib.suppress(pynvml.NVMLError):
                info[key] = int(fn(handle))
        numa = None
        if hasattr(pynvml, "nvmlDeviceGetNumaNodeId"):
            try:
                numa = int(pynvml.nvmlDeviceGetNumaNodeId(handle))
            except pynvml.NVMLError:
                numa = None
        info["numa_node"] = numa if numa is not None and numa >= 0 else _pci_numa_node(bus_id)
        peers = []
        for link in range(getattr(pynvml, "NVML_NVLINK_MAX_LINKS", 18)):
            try:
                if pynvml.nvmlDeviceGetNvLinkState(handle, link) != pynvml.NVML_FEATURE_ENABLED:
                    continue
                remote = pynvml.nvmlDeviceGetNvLinkRemotePciInfo(handle, link)
                peers.append(NvLinkPeer(link=link, remote_pci_bus_id=_decode(remote.busId)))
            except pynvml.NVMLError:
                continue
        info["nvlink_peers"] = tuple(peers)
        return info
    finally:
        pynvml.nvmlShutdown()


def parse_nvidia_smi_topo(text: str, gpu_index: int) -> dict[str, Any]:
    """Read one GPU's row of ``nvidia-smi topo -m``: NVLink peers (``NV<n>``) and NUMA affinity.

    NVLink peers are recorded by GPU index (``GPU3``) because that table does not show bus ids; the
    ``link`` field holds the number of bonded links.
    """
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    header = next(
        (ln for ln in lines if re.match(r"^\s+GPU0\b", ln) or ln.lstrip().startswith("GPU0\t")), None
    )
    if header is None:
        return {}
    columns = re.split(r"\t+|\s{2,}", header.strip())
    # Rows only after the header: an unindented header also starts with "GPU0".
    rows = lines[lines.index(header) + 1 :]
    row = next((ln for ln in rows if re.match(rf"^GPU{gpu_index}\s", ln)), None)
    if row is None:
        return {}
    cells = re.split(r"\t+|\s{2,}", row.strip())[1:]
    values = dict(zip(columns, cells, strict=False))
    peers = []
    for col, val in values.items():
        m = re.fullmatch(r"NV(\d+)", val.strip())
        if col.startswith("GPU") and m:
            peers.append(NvLinkPeer(link=int(m.group(1)), remote_pci_bus_id=col))
    info: dict[str, Any] = {"topology_source": "nvidia-smi", "nvlink_peers": tuple(peers)}
    numa = values.get("NUMA Affinity", "").strip()
    if numa.isdigit():
        info["numa_node"] = int(numa)
    return info


def _smi_topology(gpu_index: int) -> dict[str, Any]:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return {}
    out = subprocess.run([smi, "topo", "-m"], capture_output=True, text=True, timeout=30, check=False)
    return parse_nvidia_smi_topo(out.stdout, gpu_index) if out.returncode == 0 else {}


def discover_cuda(device: torch.device, catalog: GpuCatalog | None = None) -> DeviceInfo:
    index = device.index if device.index is not None else torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    name = str(props.name)
    memory_gib = props.total_memory / 2**30
    bus_id = ""
    pci = [getattr(props, a, None) for a in ("pci_domain_id", "pci_bus_id", "pci_device_id")]
    if all(isinstance(v, int) for v in pci):
        bus_id = f"{pci[0]:08x}:{pci[1]:02x}:{pci[2]:02x}.0"
    mig = re.search(r"MIG\s+(\S+)", name)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    notes: list[str] = []
    topo: dict[str, Any] = {}
    try:
        topo = _nvml_topology(bus_id) if bus_id else {}
        if not bus_id:
            notes.append("torch did not report the PCI bus id; NVML lookup skipped")
    except Exception as e:  # NVML missing, no permission, driver too old: fall back, never fail the profile
        notes.append(f"NVML unavailable ({type(e).__name__}: {e}); used nvidia-smi topo -m")
    if not topo:
        try:
            topo = _smi_topology(index)
        except (OSError, subprocess.SubprocessError) as e:
            notes.append(f"nvidia-smi topo -m failed: {e}")
    if not topo:
        topo = {"topology_source": "torch"}
    mig_device = f"MIG {mig.group(1)}" if mig else ("MIG" if "MIG-" in visible else "")
    info = DeviceInfo(
        kind="cuda",
        name=name,
        index=index,
        memory_gib=round(memory_gib, 2),
        compute_capability=f"{props.major}.{props.minor}",
        mig_device=mig_device,
        pci_bus_id=bus_id,
        notes=tuple(notes),
        **_versions(),
    )
    info = replace(info, **topo)
    if mig_device and not info.mig_mode:
        info = replace(info, mig_mode=True)
    if catalog is not None:
        base_name = re.sub(r"\s+MIG\s+\S+$", "", name)
        spec = catalog.match_device(base_name, None if mig_device else memory_gib)
        info = replace(info, catalog_gpu=spec.name if spec else "")
    return info


def discover_device(device: torch.device, catalog: GpuCatalog | None = None) -> DeviceInfo:
    return discover_cuda(device, catalog) if device.type == "cuda" else discover_cpu()


def local_unit(catalog: GpuCatalog | None = None) -> str:
    """The device a local server on this machine runs on (``--device auto``), as a catalog unit: the
    catalog GPU of CUDA device 0, else its name, else ``cpu``. Compared with a plan's ``chosen.unit`` to
    decide whether a latency prediction can be checked against what was measured here."""
    if not torch.cuda.is_available():
        return "cpu"
    props = torch.cuda.get_device_properties(0)
    if catalog is None:
        from gpuplace.catalog import load_gpu_catalog

        catalog = load_gpu_catalog()
    spec = catalog.match_device(props.name, props.total_memory / 2**30)
    return spec.name if spec else str(props.name)
