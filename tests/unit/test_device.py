"""Device and dtype parsing, the dtype smoke test, ``nvidia-smi topo -m`` parsing and CPU discovery.

These run on the real torch of a machine without CUDA (the unit-test machine): asking for CUDA
there is the real error path, not a mock. GPU discovery is tested under tests/gpu.
"""

from __future__ import annotations

import pytest
import torch

from gpuplace.errors import DeviceUnavailable, InvalidInput
from gpuplace.profiling import device
from gpuplace.types import DeviceInfo, NvLinkPeer

# --- resolve_device -----------------------------------------------------------------------------


@pytest.fixture
def no_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine without a GPU. On CI and the dev machines this is simply true; on a GPU machine
    torch's answer is replaced so these tests still check the no-GPU messages there."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.mark.parametrize("spec", ["cpu", "CPU", " cpu "])
def test_resolve_cpu(spec: str) -> None:
    assert device.resolve_device(spec) == torch.device("cpu")


def test_resolve_auto_is_cpu_without_cuda(no_cuda: None) -> None:
    assert device.resolve_device("auto") == torch.device("cpu")
    assert device.resolve_device("AUTO").type == "cpu"


@pytest.mark.parametrize("spec", ["cuda", "cuda:0", "cuda:1", "CUDA"])
def test_cuda_without_a_gpu_is_unavailable_and_says_what_to_do(spec: str, no_cuda: None) -> None:
    with pytest.raises(DeviceUnavailable) as info:
        device.resolve_device(spec)

    err = info.value
    message = str(err)
    assert isinstance(err, InvalidInput)  # the CLI reports it as a user error, exit status 2
    assert err.field == "device"
    assert err.value == spec
    assert message.startswith(f"device={spec!r}: CUDA was requested")
    assert torch.__version__ in message
    assert "--device cpu" in message


def test_plain_cuda_message_quotes_the_flag(no_cuda: None) -> None:
    with pytest.raises(DeviceUnavailable, match=r"^device='cuda': .*Use --device cpu or --device auto"):
        device.resolve_device("cuda")


@pytest.mark.parametrize("spec", ["gpu0", "gpu", "cuda:", "cuda:x", "cuda:-1", "cuda0", "mps", "", "cpu:0"])
def test_malformed_device_is_invalid_input_not_unavailable(spec: str) -> None:
    with pytest.raises(InvalidInput) as info:
        device.resolve_device(spec)

    assert type(info.value) is InvalidInput
    assert str(info.value).startswith(f"device={spec!r}: not a device. Use auto, cpu, cuda or cuda:N")


# --- dtypes -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "name"),
    [
        ("float32", "float32"),
        ("fp32", "float32"),
        ("bfloat16", "bfloat16"),
        ("bf16", "bfloat16"),
        (" BF16 ", "bfloat16"),
        ("float16", "float16"),
        ("fp16", "float16"),
        ("half", "float16"),
        ("Half", "float16"),
    ],
)
def test_dtype_name_aliases(spec: str, name: str) -> None:
    assert device.dtype_name(spec) == name


@pytest.mark.parametrize("spec", ["fp8", "float64", "int8", "", "bfloat"])
def test_unknown_dtype_is_refused(spec: str) -> None:
    with pytest.raises(InvalidInput) as info:
        device.dtype_name(spec)

    assert info.value.field == "dtype"
    assert str(info.value).startswith(f"dtype={spec!r}: not a supported dtype")
    assert "float32, bfloat16 or float16" in str(info.value)


def test_torch_dtype_and_cpu_default() -> None:
    assert device.torch_dtype("float32") is torch.float32
    assert device.torch_dtype("bfloat16") is torch.bfloat16
    assert device.torch_dtype("float16") is torch.float16
    assert device.default_dtype(torch.device("cpu")) == "float32"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_check_dtype_runs_passes_on_cpu(dtype: torch.dtype) -> None:
    device.check_dtype_runs(torch.device("cpu"), dtype, str(dtype).removeprefix("torch."))


def test_check_dtype_runs_refuses_a_dtype_the_cpu_cannot_run() -> None:
    # The premise, on this torch: float8 tensors exist on the CPU but its kernels (softmax here;
    # matmul too on older torch) are not implemented.
    a = torch.ones(8, 8, dtype=torch.float8_e4m3fn)
    with pytest.raises((NotImplementedError, RuntimeError)):
        torch.softmax(a @ a, dim=-1)

    with pytest.raises(DeviceUnavailable) as info:
        device.check_dtype_runs(torch.device("cpu"), torch.float8_e4m3fn, "float8_e4m3fn")

    err = info.value
    assert err.field == "dtype"
    assert err.value == "float8_e4m3fn"
    assert str(err).startswith("dtype='float8_e4m3fn': cannot run on cpu (NotImplementedError: ")
    assert "Float8_e4m3fn" in str(err)  # torch's own reason, first line only
    assert "\n" not in str(err)
    assert str(err).endswith("Pick another dtype")
    assert isinstance(err.__cause__, NotImplementedError)


def test_check_dtype_runs_refuses_when_matmul_is_missing() -> None:
    with pytest.raises(DeviceUnavailable, match=r"addmm"):
        device.check_dtype_runs(torch.device("cpu"), torch.bool, "bool")


# --- nvidia-smi topo -m -------------------------------------------------------------------------

# Four GPUs in two NVLink-bonded pairs per NUMA node, plus cross links, as `nvidia-smi topo -m`
# prints it: tab separated, padding tabs after short cells in wide columns, a NIC, a legend.
TOPO_4GPU = (
    "\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tNV12\tNV12\tSYS\t0-47\t0\t\tN/A\n"
    "GPU1\tNV12\t X \tSYS\tNV6\t0-47\t0\t\tN/A\n"
    "GPU2\tNV12\tSYS\t X \tNV12\t48-95\t1\t\tN/A\n"
    "GPU3\tSYS\tNV6\tNV12\t X \t48-95\t1\t\tN/A\n"
    "\n"
    "Legend:\n"
    "\n"
    "  X    = Self\n"
    "  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)\n"
    "  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges"
    " within a NUMA node\n"
    "  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)\n"
    "  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)\n"
    "  PIX  = Connection traversing at most a single PCIe bridge\n"
    "  NV#  = Connection traversing a bonded set of # NVLinks\n"
)


@pytest.mark.parametrize(
    ("index", "peers", "numa"),
    [
        (0, (NvLinkPeer(12, "GPU1"), NvLinkPeer(12, "GPU2")), 0),
        (1, (NvLinkPeer(12, "GPU0"), NvLinkPeer(6, "GPU3")), 0),
        (2, (NvLinkPeer(12, "GPU0"), NvLinkPeer(12, "GPU3")), 1),
        (3, (NvLinkPeer(6, "GPU1"), NvLinkPeer(12, "GPU2")), 1),
    ],
)
def test_parse_topo_reads_nvlink_peers_and_numa(index: int, peers: tuple[NvLinkPeer, ...], numa: int) -> None:
    info = device.parse_nvidia_smi_topo(TOPO_4GPU, index)

    assert info == {"topology_source": "nvidia-smi", "nvlink_peers": peers, "numa_node": numa}


def test_parse_topo_result_applies_to_device_info() -> None:
    info = DeviceInfo(
        kind="cuda", name="NVIDIA H100 80GB HBM3", index=2, **device.parse_nvidia_smi_topo(TOPO_4GPU, 2)
    )

    assert [p.remote_pci_bus_id for p in info.nvlink_peers] == ["GPU0", "GPU3"]
    assert info.numa_node == 1
    assert info.topology_source == "nvidia-smi"


def test_parse_topo_with_nic_columns_and_no_nvlink() -> None:
    text = (
        "\tGPU0\tGPU1\tNIC0\tNIC1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
        "GPU0\t X \tPIX\tNODE\tSYS\t0-15,32-47\t0\t\tN/A\n"
        "GPU1\tPIX\t X \tSYS\tNODE\t16-31,48-63\t1\t\tN/A\n"
        "NIC0\tNODE\tSYS\t X \tSYS\t\t\t\t\n"
        "NIC1\tSYS\tNODE\tSYS\t X \t\t\t\t\n"
        "\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1\n"
    )

    assert device.parse_nvidia_smi_topo(text, 1) == {
        "topology_source": "nvidia-smi",
        "nvlink_peers": (),
        "numa_node": 1,
    }


def test_parse_topo_space_aligned() -> None:
    text = (
        "        GPU0    GPU1    CPU Affinity    NUMA Affinity\n"
        "GPU0     X      NV4     0-7             0\n"
        "GPU1    NV4      X      0-7             0\n"
    )

    info = device.parse_nvidia_smi_topo(text, 1)
    assert info["nvlink_peers"] == (NvLinkPeer(4, "GPU0"),)
    assert info["numa_node"] == 0


def test_parse_topo_unindented_header_is_not_mistaken_for_gpu0() -> None:
    # Some log collectors strip leading whitespace, so the header itself starts with "GPU0".
    text = "\n".join(line.lstrip() for line in TOPO_4GPU.splitlines())

    assert device.parse_nvidia_smi_topo(text, 0)["nvlink_peers"] == (
        NvLinkPeer(12, "GPU1"),
        NvLinkPeer(12, "GPU2"),
    )
    assert device.parse_nvidia_smi_topo(text, 0)["numa_node"] == 0


def test_parse_topo_without_numa_affinity_leaves_numa_out() -> None:
    text = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tNV2\t0-7\tN/A\nGPU1\tNV2\t X \t0-7\tN/A\n"

    info = device.parse_nvidia_smi_topo(text, 0)
    assert info["nvlink_peers"] == (NvLinkPeer(2, "GPU1"),)
    assert "numa_node" not in info


def test_parse_topo_does_not_confuse_gpu1_with_gpu10() -> None:
    gpus = [f"GPU{i}" for i in range(11)]
    header = "\t" + "\t".join(gpus) + "\tNUMA Affinity\n"
    rows = "".join(
        f"GPU{i}\t"
        + "\t".join(" X " if j == i else ("NV18" if {i, j} == {1, 10} else "SYS") for j in range(11))
        + f"\t{i % 2}\n"
        for i in range(11)
    )

    assert device.parse_nvidia_smi_topo(header + rows, 1) == {
        "topology_source": "nvidia-smi",
        "nvlink_peers": (NvLinkPeer(18, "GPU10"),),
        "numa_node": 1,
    }


@pytest.mark.parametrize(
    "text",
    [
        "",
        "\n\n",
        "garbage\nmore garbage\n",
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n",
        TOPO_4GPU.split("\n", 1)[1],  # rows without their header
    ],
)
def test_parse_topo_of_nothing_useful_is_empty(text: str) -> None:
    assert device.parse_nvidia_smi_topo(text, 0) == {}


def test_parse_topo_of_a_gpu_not_in_the_table_is_empty() -> None:
    assert device.parse_nvidia_smi_topo(TOPO_4GPU, 7) == {}


# --- CPU discovery ------------------------------------------------------------------------------


def test_discover_cpu() -> None:
    import transformers

    info = device.discover_cpu()

    assert info.kind == "cpu"
    assert info.name
    assert info.cpu_model == info.name
    assert info.cpu_logical_cores is not None and info.cpu_logical_cores > 0
    assert info.cpu_physical_cores is None or 0 < info.cpu_physical_cores <= info.cpu_logical_cores
    assert info.torch_threads == torch.get_num_threads() > 0
    assert info.memory_gib > 0
    assert info.torch_version == torch.__version__
    assert info.transformers_version == transformers.__version__
    assert info.topology_source == "cpu"
    assert info.index is None
    assert info.nvlink_peers == ()


def test_discover_device_on_cpu_is_discover_cpu() -> None:
    info = device.discover_device(torch.device("cpu"))

    assert info.kind == "cpu"
    assert info.topology_source == "cpu"
