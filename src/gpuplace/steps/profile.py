"""The profile step: its parameter table, the sweep it names, then every output file in one go.

Shared by ``gpuplace profile`` and the ``profile_latency`` component: :data:`PARAMS` (a
:mod:`gpuplace.params` table) makes the command's flags and is checked against the component's signature,
and :func:`profile_config` reads either's values by its names into a :class:`ProfileConfig` (comma lists,
``-1`` warm-ups and a ``0`` memory limit are the edges' spellings, parsed here). Both write the same files
(through :mod:`gpuplace.profiling.io`) and report the same metrics
(:func:`gpuplace.profiling.summary.profile_metrics`). Nothing is half-written: the Parquet file is
written atomically and the other files only after it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuplace.errors import InvalidInput
from gpuplace.params import Param, parse
from gpuplace.types import LatencyProfile

if TYPE_CHECKING:  # torch: imported when the step runs, not when `gpuplace` builds its flags
    from gpuplace.profiling.profiler import ProfileConfig

MODES = ("eager", "static", "both")
AUTO_WARMUP = -1  # the warmup parameter's "pick for the mode": 2, 3 with static (KFP has no None)

PARAMS: tuple[Param, ...] = (
    Param("model", str, "tiny", "preset name, a config.json, or a model directory"),
    Param("device", str, "auto", "auto, cpu, cuda or cuda:N"),
    Param("batch_sizes", str, "1,4", "batch sizes to sweep, comma-separated"),
    Param("prompt_tokens", str, "128", "prompt lengths to sweep, comma-separated"),
    Param("output_tokens", str, "32", "output lengths to sweep, comma-separated"),
    Param("dtypes", str, "auto", "auto (bf16 on GPU, fp32 on CPU), float32, bfloat16, float16"),
    Param(
        "mode",
        str,
        "eager",
        "eager: dynamic KV cache; static: static KV cache + torch.compile (CUDA graphs on a GPU)",
        choices=MODES,
    ),
    Param("repeats", int, 5, "timed generations per sweep point"),
    Param("warmup", int, AUTO_WARMUP, "untimed generations per point (-1: 2, 3 with static)"),
    Param("seed", int, 0, "seed of the random weights and inputs"),
    Param(
        "real_weights",
        bool,
        False,
        "load a model directory's weights instead of random ones",
        component=False,
    ),
    Param(
        "memory_limit_gib",
        float,
        0.0,
        "fail sweep points needing more than this (0: the device's free memory)",
        unit="GiB",
    ),
    Param("gpu_catalog", str, "", "a gpus.csv to use instead of the bundled one", component=False),
    Param(
        "measure_engine_steps",
        bool,
        False,
        "also measure the local serving engine's step time (the CLI: gpuplace profile --engine-steps)",
        cli=False,
    ),
)


def parse_int_list(field: str, text: str) -> tuple[int, ...]:
    """``"1,4,8"`` → (1, 4, 8), with an error naming the field for anything else."""
    try:
        values = tuple(int(x) for x in str(text).split(",") if x.strip())
    except ValueError:
        raise InvalidInput(field, text, "is not a comma-separated list of integers", "e.g. 1,4,8") from None
    if not values:
        raise InvalidInput(field, text, "is empty", "Give at least one value, e.g. 1,4")
    return values


def profile_config(params: Mapping[str, Any]) -> ProfileConfig:
    """The sweep ``params`` describe (:data:`PARAMS` by name; missing names take the table's defaults,
    other keys are ignored), validated."""
    from gpuplace.profiling.profiler import ProfileConfig

    p = parse(PARAMS, params)
    warmup = p["warmup"]
    if warmup == AUTO_WARMUP:
        warmup = 3 if p["mode"] in ("static", "both") else 2
    return ProfileConfig(
        model=p["model"],
        device=p["device"],
        batch_sizes=parse_int_list("batch_sizes", p["batch_sizes"]),
        prompt_tokens=parse_int_list("prompt_tokens", p["prompt_tokens"]),
        output_tokens=parse_int_list("output_tokens", p["output_tokens"]),
        dtypes=tuple(d.strip() for d in p["dtypes"].split(",") if d.strip()),
        modes=(p["mode"],),
        repeats=p["repeats"],
        warmup=warmup,
        seed=p["seed"],
        random_weights=not p["real_weights"],
        memory_limit_gib=p["memory_limit_gib"] or None,
        gpu_catalog=p["gpu_catalog"] or None,
    ).validated()


@dataclass(frozen=True, slots=True)
class ProfileOutputs:
    profile: LatencyProfile
    parquet: Path
    device_json: Path
    markdown: Path | None


def run_profile_step(
    config: ProfileConfig,
    parquet: str | os.PathLike[str],
    device_json: str | os.PathLike[str],
    markdown: str | os.PathLike[str] | None = None,
    *,
    show_progress: bool = True,
) -> ProfileOutputs:
    from gpuplace.profiling.io import save_profile, write_device_json
    from gpuplace.profiling.profiler import run_profile
    from gpuplace.profiling.summary import format_markdown

    out = Path(parquet)
    if out.suffix and out.suffix != ".parquet":
        raise InvalidInput("out", str(parquet), "must end in .parquet", "e.g. --out profile.parquet")
    profile = run_profile(config, show_progress=show_progress)
    save_profile(profile, out)
    dev = write_device_json(profile, device_json)
    md = None
    if markdown is not None:
        md = Path(markdown)
        md.parent.mkdir(parents=True, exist_ok=True)
        md.write_text(format_markdown(profile))
    return ProfileOutputs(profile=profile, parquet=out, device_json=dev, markdown=md)
