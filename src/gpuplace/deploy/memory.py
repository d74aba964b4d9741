"""Whether a model fits this machine's memory before anything builds or serves it here.

The local engine (the ``local`` target, the KWOK stand-in, a pod on the real testenv node) holds the
model's weights in this machine's memory; on a CPU they are fp32, 4 bytes a parameter, and building a
preset's weights needs them once more while they are written. A model whose weights alone exceed the
memory available now is refused, with its size, instead of driving the machine into swap or the OOM
killer (llama-3.1-8b: 8.0 B parameters, about 32 GB in fp32, on a 23 GB machine).
"""

from __future__ import annotations

from pathlib import Path

from gpuplace.errors import InvalidInput

CPU_BYTES_PER_PARAM = 4  # fp32: what transformers loads on a CPU


def meminfo_gib(field: str) -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return 0.0


def model_weights_gib(model: str, bytes_per_param: int = CPU_BYTES_PER_PARAM) -> tuple[int, float]:
    """(parameters, GiB of weights) of ``model`` (a preset, a config.json or a model directory)."""
    from gpuplace.catalog import model_arch_from_config, resolve_model

    arch = model_arch_from_config(model, resolve_model(model).config)
    return arch.num_params, arch.num_params * bytes_per_param / 2**30


def require_fits_memory(model: str, *, available_gib: float | None = None) -> None:
    """Raise :class:`InvalidInput` when ``model``'s fp32 weights exceed the memory available here."""
    available = meminfo_gib("MemAvailable") if available_gib is None else available_gib
    if available <= 0:
        return  # not Linux, or unreadable: nothing to compare with
    params, weights = model_weights_gib(model)
    if weights > available:
        raise InvalidInput(
            "model",
            model,
            f"does not fit this machine: {params / 1e9:.1f} B parameters are about {weights:.1f} GiB "
            "in fp32, "
            f"and {available:.1f} GiB of memory is available (of {meminfo_gib('MemTotal'):.1f} GiB)",
            "Serve a smaller model here (e.g. --model tiny), or deploy to a cluster whose pods run on GPUs",
        )
