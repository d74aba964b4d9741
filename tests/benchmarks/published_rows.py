"""Reading ``../shared/data/published-llm-serving/measurements.csv`` into what gpuplace can predict.

One :class:`Row` per published operating point: whether gpuplace can express it (model, GPU, TP,
precision, documented lengths and the load, else the reason it cannot), the shape, precision, lengths
and load to predict it at, and the measured figures with the metric each one is (p50/p99 TTFT, TPOT or
ITL, means where the source gives only means, output tokens/s, a static batch's latency).

Dataset lengths (the rows name a dataset instead of lengths):

* **ShareGPT**: mean input 161 and mean output 338 tokens, the figures of vLLM's own paper (Kwon et
  al., "Efficient Memory Management for Large Language Model Serving with PagedAttention", SOSP 2023,
  §6.1 and Fig. 11). The shape of the distribution is not given there, so the means are used as fixed
  lengths: p50 figures depend on it little, p99 figures more.
* **CNN/DailyMail** (MLPerf llama3.1-8b): articles average 781 tokens (See, Liu and Manning, "Get To
  The Point", ACL 2017, §4); outputs are capped at 128 (the row), and the run's own figures (output
  tokens/s ÷ samples/s = 129) say nearly every output reaches the cap, so 781/128.
* **OpenOrca**: the two rows that use it state no TP, so they are not expressible whatever its lengths.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

MODELS = {"8B": "llama-3.1-8b", "70B": "llama-3.1-70b"}
# --num-scheduler-steps of the multi-step rows: SGLang's benchmark of vLLM 0.6.0 states 10; Lambda's runs
# record no version, but their median ITL is about 10 × their TPOT (tokens streamed in chunks of 10)
MULTI_STEP = 10
# vLLM's V0 engine (the releases of 2024, before V1 became the default in 0.8) ran at most 256 sequences at
# once (EngineArgs.max_num_seqs in vllm/engine/arg_utils.py); V1 on an H100 runs 1024
V0_MAX_NUM_SEQS = 256
V0_VERSIONS = ("0.5.", "0.6.", "2024")  # measurements.csv's engine_version of V0-era vLLM rows
# vLLM turned asynchronous scheduling on by default with vllm-project/vllm#27614, the last item of its
# async plan (#27679), in the releases of early 2026: a row whose recorded version is at least this ran with
# it (the ~0.19.1 rows); 0.10.0 and the 2024 installs did not. gpuplace's vLLM predictions schedule
# asynchronously by default (vllm serve's default), so every row says which: a row without a version, and
# the other engines' rows (SGLang's and TensorRT-LLM's overlap schedulers are not simulated), run without
ASYNC_DEFAULT_FROM = (0, 14)


class StatedEngine(NamedTuple):
    """The engine flags a row's submitter states it ran with, where they change what gpuplace simulates.
    Compare like with like: a row predicted on today's defaults instead of the engine it measured says
    nothing about the model."""

    where: str  # a substring of the row's source path
    changes: dict[str, int]  # EngineParams.with_changes
    kv_cache_dtype: str
    not_simulated: str  # the stated flags gpuplace does not simulate
    source: str  # where the flags are stated


REDHAT_README = (
    "mlcommons/inference_results_v5.1 closed/RedHat/code/llama3.1-8b/README.md, 'configuration used during "
    "final submission' (read 2026-12-07)"
)
STATED_ENGINES: tuple[StatedEngine, ...] = (
    StatedEngine(
        "closed/RedHat/results/XE8640_4xH100_vLLM/llama3.1-8b/Server/",
        {"max_num_batched_tokens": 1024, "max_num_seqs": 512, "block_size": 16},
        "auto",  # run_server_submission.sh ... 39.5 auto: the KV cache in the model's dtype
        "--long-prefill-token-threshold 256, --gpu-memory-utilization 0.91, --cuda-graph-sizes 4232",
        REDHAT_README,
    ),
    StatedEngine(
        "closed/RedHat/results/XE8640_4xH100_vLLM/llama3.1-8b/Offline/",
        {"max_num_batched_tokens": 4096, "max_num_seqs": 1024},
        "fp8",  # --kv-cache-dtype fp8
        "",
        REDHAT_README,
    ),
)


def _async_default(raw: dict[str, str]) -> bool:
    m = re.search(r"(\d+)\.(\d+)", raw["engine_version"])
    return raw["engine"].startswith("vLLM") and m is not None and (int(m[1]), int(m[2])) >= ASYNC_DEFAULT_FROM


def _v0(raw: dict[str, str], multi_step: bool) -> bool:
    version = raw["engine_version"]
    return raw["engine"].startswith("vLLM") and (multi_step or any(v in version for v in V0_VERSIONS))


SHAREGPT = (161, 338, "ShareGPT means 161/338 (vLLM paper, SOSP'23 §6.1)")
CNN_DAILYMAIL = (
    781,
    128,
    "CNN/DailyMail 781 (See et al. 2017) / 128 (the row's cap, 129 by its tok/s ÷ samples/s)",
)
# published GPU names -> catalog names; "assumed" where the source does not give the variant
GPUS: tuple[tuple[str, str, str], ...] = (
    ("H100 (variant not stated)", "H100-SXM5-80GB", "H100 variant not stated: SXM assumed"),
    ("H100", "H100-SXM5-80GB", ""),
    ("A100 SXM4 40GB", "A100-SXM4-40GB", ""),
    ("A100 PCIe 80GB", "A100-PCIE-80GB", ""),
    ("A100 SXM", "A100-SXM4-80GB", ""),
    ("A100 80GB", "A100-SXM4-80GB", "A100 80GB variant not stated: SXM4 assumed"),
    ("L4", "L4-24GB", ""),
)


@dataclass(frozen=True, slots=True)
class Measured:
    """One published figure: ``metric`` is ``ttft_p50`` | ``ttft_p99`` | ``tpot_p50`` | ``itl_p50`` |
    ``tpot_p99`` | ``itl_p99`` | ``ttft_mean`` | ``tpot_mean`` | ``output_tokens_per_s`` |
    ``batch_latency`` (a static batch, first request in to last out)."""

    metric: str
    value: float  # seconds, or tokens/s


@dataclass(frozen=True, slots=True)
class Row:
    index: int  # 0-based row of measurements.csv (header excluded)
    raw: dict[str, str]
    reason: str = ""  # why gpuplace cannot express it; empty when it can
    model: str = ""
    gpu: str = ""
    tp: int = 0
    dtype: str = "bf16"
    kv_cache_dtype: str = "auto"
    prompt: tuple[int, int] = (0, 0)  # (lo, hi) tokens; lo == hi for a fixed length
    output: tuple[int, int] = (0, 0)
    lengths_source: str = ""
    load_kind: str = ""  # "rate" | "burst" (N at once) | "offline" (saturation)
    load_value: float = 0.0
    measured: tuple[Measured, ...] = ()
    notes: tuple[str, ...] = field(default=())
    # engine parameters the row's vLLM ran with where today's defaults differ (EngineParams.with_changes):
    # V0's max_num_seqs, multi-step scheduling's num_scheduler_steps
    engine_changes: tuple[tuple[str, int], ...] = ()

    @property
    def engine(self) -> str:
        e = self.raw["engine"]
        return "vLLM" if e.startswith("vLLM") else "TensorRT-LLM" if e.startswith("TensorRT") else e

    @property
    def precision(self) -> str:
        return f"{self.dtype}/{'fp8' if self.kv_cache_dtype == 'fp8' else 'bf16'}-KV"


def _num(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _model(name: str) -> str | None:
    if "Llama-2" in name:
        return None
    return next((v for k, v in MODELS.items() if k in name), None)


def _gpu(name: str) -> tuple[str, str] | None:
    for prefix, catalog, note in GPUS:
        if name.startswith(prefix) and (prefix != "H100" or "variant not stated" not in name):
            return catalog, note
    return None


def _precision(text: str) -> tuple[str, str] | None:
    t = text.lower()
    if t.startswith("unverified"):
        return None
    if "bf16 weights, fp8 kv" in t:
        return "bf16", "fp8"
    if t.startswith("fp8 (weights+kv)"):
        return "fp8", "fp8"
    if t.startswith("fp8"):  # W8A8 (MLPerf: KV not stated, vLLM's default auto) or TRT's PyTorch fp8
        return "fp8", "auto"
    if t.startswith(("fp16", "bf16")):  # fp16 and bf16 move the same bytes at the same tensor peak
        return "bf16", "auto"
    return None


def _length(text: str, which: int) -> tuple[tuple[int, int], str] | None:
    n = _num(text)
    if n is not None:
        return (int(n), int(n)), ""
    m = re.match(r"~(\d+) \(\+-(\d+)%\)", text)
    if m:
        mid, pct = int(m.group(1)), int(m.group(2))
        return (round(mid * (1 - pct / 100)), round(mid * (1 + pct / 100))), f"uniform ±{pct}% (the row)"
    if text.startswith("ShareGPT"):
        return (SHAREGPT[which], SHAREGPT[which]), SHAREGPT[2]
    if text.startswith("CNN/DailyMail") or text.startswith("<=128"):
        return (CNN_DAILYMAIL[which], CNN_DAILYMAIL[which]), CNN_DAILYMAIL[2]
    return None


def _load(raw: dict[str, str]) -> tuple[str, float] | str:
    kind, value = raw["load_kind"], raw["load_value"]
    if kind == "rate":
        n = _num(value)
        if n is not None:
            return "rate", n
        m = re.match(r"inf \((\d+)-prompt burst\)", value)
        return ("burst", float(m.group(1))) if m else f"load {value!r} not understood"
    if kind == "concurrency":
        return "concurrency", float(value)
    m = re.match(r"static batch (\d+)", value)
    if m:
        return "burst", float(m.group(1))
    return "offline", 0.0


def _measured(raw: dict[str, str]) -> tuple[Measured, ...]:
    notes = raw["notes"]
    mean_only = notes.startswith("[STAT=MEAN]")
    tpot = bool(re.search(r"itl column = (Median )?TPOT|TPOT=MLPerf|MEAN TPOT", notes))
    step = "tpot" if tpot else "itl"
    out: list[Measured] = []
    cells = (
        ("ttft_p50_ms", "ttft_mean" if mean_only else "ttft_p50"),
        ("ttft_p99_ms", "ttft_p99"),
        ("itl_or_tpot_p50_ms", f"{step}_mean" if mean_only else f"{step}_p50"),
        ("itl_or_tpot_p99_ms", f"{step}_p99"),
    )
    multi_step = "num-scheduler-steps" in notes or "multi-step" in notes
    for column, metric in cells:
        if multi_step and column == "itl_or_tpot_p99_ms":
            continue  # tokens streamed in chunks of 10 steps: the p99 gap is a chunk's, not a token's
        v = _num(raw[column])
        if v is not None:
            out.append(Measured(metric, v / 1000))
    tok = _num(raw["output_tok_per_s"])
    if tok is not None:
        out.append(Measured("output_tokens_per_s", tok))
    m = re.search(r"end-to-end batch latency=([\d.]+) s", notes)
    if m:
        out.append(Measured("batch_latency", float(m.group(1))))
    if raw["osl"] == "1" and "TTFT Latency" in notes:  # a batch's prefill alone, in the TTFT column
        out = [Measured("batch_latency", o.value) if o.metric == "ttft_mean" else o for o in out]
    return tuple(out)


def read_rows(path: Path) -> list[Row]:
    """Every row of the file, each expressible or with its reason."""
    with path.open(newline="") as f:
        raws = list(csv.DictReader(f))
    rows = []
    for i, raw in enumerate(raws):
        rows.append(_row(i, raw))
    return rows


def _row(i: int, raw: dict[str, str]) -> Row:
    model = _model(raw["model"])
    if model is None:
        return Row(i, raw, f"no preset for {raw['model']!r} (Llama-2 has a 32k vocabulary)")
    gpu = _gpu(raw["gpu"])
    if gpu is None:
        return Row(i, raw, f"GPU {raw['gpu']!r} is not in the catalog")
    tp = _num(raw["tp"])
    if tp is None:
        return Row(i, raw, "the source does not state the TP degree")
    precision = _precision(raw["precision"])
    if precision is None:
        return Row(i, raw, f"precision not stated ({raw['precision']})")
    prompt, output = _length(raw["isl"], 0), _length(raw["osl"], 1)
    if prompt is None or output is None:
        return Row(i, raw, f"lengths {raw['isl']}/{raw['osl']} have no documented statistics")
    load = _load(raw)
    if isinstance(load, str):
        return Row(i, raw, load)
    measured = _measured(raw)
    if not measured:
        return Row(i, raw, "no figure gpuplace predicts (throughput-only row without tokens/s or latency)")
    notes = tuple(n for n in (gpu[1],) if n)
    changes: dict[str, int] = {}
    multi_step = "num-scheduler-steps" in raw["notes"] or "multi-step" in raw["notes"]
    if multi_step:
        changes["num_scheduler_steps"] = MULTI_STEP
        notes += (
            f"multi-step scheduling ({MULTI_STEP} steps, simulated): p50 TPOT compared; its p99, a chunk's gap, "
            "is not",
        )
    if _v0(raw, multi_step):
        changes["max_num_seqs"] = V0_MAX_NUM_SEQS
        notes += (f"vLLM V0: at most {V0_MAX_NUM_SEQS} sequences at once",)
    for stated in STATED_ENGINES:
        if stated.where in raw["source_url_or_repo_path"]:
            changes |= stated.changes
            precision = (precision[0], stated.kv_cache_dtype)
            flags = ", ".join(f"{k} {v}" for k, v in stated.changes.items())
            notes += (
                f"engine as its submitter ran it ({stated.source}): {flags}, KV cache {stated.kv_cache_dtype}"
                + (f"; not simulated: {stated.not_simulated}" if stated.not_simulated else ""),
            )
    changes["async_scheduling"] = _async_default(raw)
    if changes["async_scheduling"]:
        notes += ("asynchronous scheduling (vLLM's default since early 2026), simulated",)
    sources = "; ".join(dict.fromkeys(s for s in (prompt[1], output[1]) if s))
    return Row(
        i, raw, "", model, gpu[0], int(tp), precision[0], precision[1], prompt[0], output[0], sources,
        load[0], load[1], measured, notes, tuple(sorted(changes.items())),
    )  # fmt: skip
