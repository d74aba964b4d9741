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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuplace.errors import InvalidInput
from gpuplace.params import Param, parse_as
from gpuplace.types import LatencyProfile

if TYPE_CHECKING:  # torch: imported when the step runs, not when `gpuplace` builds its flags
    from gpuplace.profiling.operators import OperatorConfig
    from gpuplace.profiling.profiler import ProfileConfig
    from gpuplace.types.operators import OperatorTable

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
        "breakdown",
        str,
        "",
        "CUDA: trace the static points' decode steps and write where their time goes to this JSON file",
        component=False,
    ),
    Param(
        "compile_options",
        str,
        "",
        "static mode: inductor options beside CUDA graphs, comma-separated (coordinate_descent_tuning=true)",
        component=False,
    ),
    Param(
        "measure_operators",
        bool,
        False,
        "also time the model's kernels into an operator table (the CLI: gpuplace profile --operators)",
        cli=False,
    ),
    Param(
        "operator_max_tokens",
        int,
        16384,
        "operator table: the most tokens per step its GEMMs and prefills time (powers of two up to it)",
    ),
    Param(
        "allreduce_ranks",
        int,
        0,
        "operator table: all-reduce over this many processes (0: every GPU when more than one)",
    ),
    Param(
        "measure_engine_steps",
        bool,
        False,
        "also measure the local serving engine's step time (the CLI: gpuplace profile --engine-steps)",
        cli=False,
    ),
)


@dataclass(frozen=True, slots=True)
class ProfileValues:
    """:data:`PARAMS`'s values, typed: one field per row, read by :func:`~gpuplace.params.parse_as` (its
    defaults are the table's alone)."""

    model: str
    device: str
    batch_sizes: str
    prompt_tokens: str
    output_tokens: str
    dtypes: str
    mode: str
    repeats: int
    warmup: int
    seed: int
    real_weights: bool
    memory_limit_gib: float
    gpu_catalog: str
    breakdown: str
    compile_options: str
    measure_operators: bool
    operator_max_tokens: int
    allreduce_ranks: int
    measure_engine_steps: bool


def parse_int_list(field: str, text: str) -> tuple[int, ...]:
    """``"1,4,8"`` → (1, 4, 8), with an error naming the field for anything else."""
    try:
        values = tuple(int(x) for x in str(text).split(",") if x.strip())
    except ValueError:
        raise InvalidInput(field, text, "is not a comma-separated list of integers", "e.g. 1,4,8") from None
    if not values:
        raise InvalidInput(field, text, "is empty", "Give at least one value, e.g. 1,4")
    return values


def parse_options(field: str, text: str) -> tuple[tuple[str, Any], ...]:
    """``"a=true,b=3"`` → (("a", True), ("b", 3)): booleans, integers, floats, else the text."""
    out: list[tuple[str, Any]] = []
    for item in (x.strip() for x in str(text or "").split(",")):
        if not item:
            continue
        key, eq, raw = item.partition("=")
        if not eq or not key.strip():
            raise InvalidInput(field, item, "is not KEY=VALUE", "e.g. coordinate_descent_tuning=true")
        value: Any = raw.strip()
        if value.lower() in ("true", "false"):
            value = value.lower() == "true"
        else:
            for kind in (int, float):
                try:
                    value = kind(value)
                    break
                except ValueError:
                    pass
        out.append((key.strip(), value))
    return tuple(out)


def profile_config(params: Mapping[str, Any]) -> ProfileConfig:
    """The sweep ``params`` describe (:data:`PARAMS` by name; missing names take the table's defaults,
    other keys are ignored), validated."""
    from gpuplace.profiling.profiler import ProfileConfig

    p = parse_as(ProfileValues, PARAMS, params)
    warmup = p.warmup
    if warmup == AUTO_WARMUP:
        warmup = 3 if p.mode in ("static", "both") else 2
    return ProfileConfig(
        model=p.model,
        device=p.device,
        batch_sizes=parse_int_list("batch_sizes", p.batch_sizes),
        prompt_tokens=parse_int_list("prompt_tokens", p.prompt_tokens),
        output_tokens=parse_int_list("output_tokens", p.output_tokens),
        dtypes=tuple(d.strip() for d in p.dtypes.split(",") if d.strip()),
        modes=(p.mode,),
        repeats=p.repeats,
        warmup=warmup,
        seed=p.seed,
        random_weights=not p.real_weights,
        memory_limit_gib=p.memory_limit_gib or None,
        gpu_catalog=p.gpu_catalog or None,
        breakdown_out=p.breakdown or None,
        compile_options=parse_options("compile_options", p.compile_options),
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


def operator_config(params: Mapping[str, Any]) -> OperatorConfig:
    """The operator table ``params`` describe (:data:`PARAMS` by name): the model, device and dtypes of
    the sweep, token counts in powers of two up to ``operator_max_tokens``, decode contexts too."""
    from gpuplace.profiling.operators import POWERS_OF_TWO, OperatorConfig

    p = parse_as(ProfileValues, PARAMS, params)
    top = p.operator_max_tokens
    if top < 1:
        raise InvalidInput("operator_max_tokens", top, "must be at least 1", "e.g. 16384 (the default)")
    base = OperatorConfig()
    upto = tuple(t for t in (*POWERS_OF_TWO, *(2**i for i in range(15, 18))) if t <= top)
    return OperatorConfig(
        model=p.model,
        device=p.device,
        dtypes=tuple(d.strip() for d in p.dtypes.split(",") if d.strip()),
        gemm_tokens=upto,
        prefill_tokens=tuple(t for t in base.prefill_tokens if t <= top) or (top,),
        decode_contexts=tuple(c for c in base.decode_contexts if c <= top) or (top,),
        allreduce_ranks=p.allreduce_ranks,
        seed=p.seed,
    ).validated()


def _grid(corner: str, cells: Mapping[tuple[int, Any], str], columns: Sequence[Any]) -> list[str]:
    """A Markdown table of ``cells`` keyed (row, column): a row per row key in order, "-" where none."""
    out = [f"| {corner} | " + " | ".join(str(c) for c in columns) + " |", "|---:|" + "---:|" * len(columns)]
    for r in sorted({key[0] for key in cells}):
        out.append(f"| {r} | " + " | ".join(cells.get((r, c), "-") for c in columns) + " |")
    return out


def operators_markdown(table: OperatorTable) -> str:
    """The table as Markdown: GEMMs by layer and tokens, attention, all-reduce, and the step model's error
    against the table's own points per regime (with the GPU-class defaults' beside it)."""
    from gpuplace.catalog import load_gpu_catalog
    from gpuplace.catalog.efficiency import load_efficiency_table
    from gpuplace.planner.kernel_fit import format_fit, kernel_fit
    from gpuplace.types.operators import ALL_REDUCE, ATTENTION_DECODE, ATTENTION_PREFILL, GEMM, LAYERS

    d = table.device
    lines = [
        f"# Operators: {table.model.name} on {d.name}",
        "",
        f"{table.describe()}. Roofline: {table.bandwidth_gbps:g} GB/s ({table.bandwidth_source}), peaks "
        + ", ".join(f"{k} {v:g} TFLOP/s" for k, v in table.peak_tflops.items())
        + (
            f"; a device-to-device copy moved {table.copy_gbps:.0f} GB/s"
            if table.copy_gbps == table.copy_gbps
            else ""
        )
        + f". Attention: {table.attention_backend}. torch {d.torch_version}, "
        + f"driver {d.driver_version or '-'}.",
        "",
    ]
    lines += [f"- {n}" for n in table.notes]
    for dtype in dict.fromkeys(r.dtype for r in table.of(GEMM)):
        rows = table.of(GEMM, dtype)
        lines += ["", f"## GEMMs, {dtype}: µs per kernel (TFLOP/s)", ""]
        lines += _grid(
            "tokens",
            {(r.tokens, r.layer): f"{r.seconds * 1e6:.1f} ({r.flops / r.seconds / 1e12:.1f})" for r in rows},
            LAYERS,
        )
    prefill = table.of(ATTENTION_PREFILL)
    if prefill:
        lines += [
            "",
            "## Prefill attention, one layer",
            "",
            "| prompt tokens | µs | TFLOP/s |",
            "|---:|---:|---:|",
        ]
        lines += [
            f"| {r.tokens} | {r.seconds * 1e6:.1f} | {r.flops / r.seconds / 1e12:.1f} |" for r in prefill
        ]
    decode = table.of(ATTENTION_DECODE)
    if decode:
        lines += ["", "## Decode attention, one layer: µs (GB/s of K and V)", ""]
        cells = {
            (r.batch, r.context): f"{r.seconds * 1e6:.1f} ({r.bytes / r.seconds / 1e9:.0f})" for r in decode
        }
        lines += _grid("batch \\ context", cells, sorted({r.context for r in decode}))
    reduce = table.of(ALL_REDUCE)
    if reduce:
        lines += [
            "",
            f"## All-reduce over {reduce[0].ranks} ranks",
            "",
            "| bytes | µs | GB/s |",
            "|---:|---:|---:|",
        ]
        lines += [
            f"| {r.bytes:.0f} | {r.seconds * 1e6:.1f} | {r.bytes / r.seconds / 1e9:.2f} |" for r in reduce
        ]
    defaults = None
    if table.gpu:
        spec = load_gpu_catalog().get(table.gpu)
        defaults = load_efficiency_table().for_gpu(spec, table.model)
    lines += [
        "",
        "## The step model against these points",
        "",
        "Error = (predicted − measured) ÷ measured. The step model built from this table (GEMM fractions "
        "of the roofline by tokens per step, decode attention per sequence and per K/V byte, prefill MFU: "
        "docs/serving-model.md), each point held out of the model that predicts it, against the GPU-class "
        "default efficiencies it replaces"
        + ("." if defaults is not None else " (none here: the device has no GPU class)."),
        "",
        *format_fit(kernel_fit(table, defaults)),
    ]
    return "\n".join(lines) + "\n"


def run_operators_step(
    config: OperatorConfig,
    out: str | os.PathLike[str],
    markdown: str | os.PathLike[str] | None = None,
    *,
    show_progress: bool = True,
) -> OperatorTable:
    """Time the operators and write the table (JSON), and its Markdown when asked."""
    from gpuplace.profiling.operator_table import write_operator_table
    from gpuplace.profiling.operators import run_operators

    path = Path(out)
    table = run_operators(config, show_progress=show_progress)
    write_operator_table(table, path)
    if markdown is not None:
        md = Path(markdown)
        md.parent.mkdir(parents=True, exist_ok=True)
        md.write_text(operators_markdown(table))
    return table


def operators_output(params: Mapping[str, Any], out: Path, *, measure: bool) -> OperatorTable | None:
    """The ``profile_latency`` component's ``operators`` output: the operator table when ``measure``, else
    an empty file, which the plan component reads as "none measured" (a KFP output must exist either way)."""
    if not measure:
        Path(out).write_text("")
        return None
    return run_operators_step(operator_config(params), out)


def operators_input(path: str | os.PathLike[str] | None) -> Path | None:
    """The ``plan_placement`` component's ``operators`` input as the plan step takes it: None when the
    artifact is absent or empty (the profile task measured no table, :func:`operators_output`)."""
    if path is None or not Path(path).is_file() or Path(path).stat().st_size == 0:
        return None
    return Path(path)
