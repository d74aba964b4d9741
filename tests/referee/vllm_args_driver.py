"""Run inside vLLM's own venv (tests/referee/vllm_venv.sh): vLLM's ``vllm serve`` argument parser and its
engine defaults, as the installed package has them. Standard library and vLLM only; gpuplace is not
importable here.

Input (a JSON file, the first argument): ``{"arg_lists": [{"label": str, "args": [str, ...]}],
"devices": [{"name": str, "memory_gib": float, "device_name": str}]}``. Output (stdout, one JSON object):
the vLLM version; for every argument list whether ``make_arg_parser`` (``vllm.entrypoints.common.cli_args``)
parses it and ``validate_parsed_serve_args`` accepts it, the error otherwise, and the values it parsed for
the flags gpuplace sets; ``EngineArgs``' ``gpu_memory_utilization``, ``CacheConfig.DEFAULT_BLOCK_SIZE``; and
``EngineArgs.get_batch_defaults`` for the OpenAI server on every device.

vLLM's platform is pinned to ``CpuPlatform`` (``VLLM_TARGET_DEVICE=cpu``): there is no GPU here. For the
batch defaults, which vLLM derives from the device it runs on, the platform vLLM's ``arg_utils`` asks is
replaced, for that call only, by a stand-in CUDA platform that answers the device's total memory and name
(a MIG slice answers its own memory, as CUDA reports it); the decision is vLLM's own code.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path

os.environ["VLLM_TARGET_DEVICE"] = "cpu"  # before vLLM is imported: the platform is resolved once

FLAGS = (
    "tensor_parallel_size",
    "max_num_batched_tokens",
    "max_num_seqs",
    "block_size",
    "gpu_memory_utilization",
    "max_model_len",
    "enable_chunked_prefill",
    "async_scheduling",
    "quantization",
    "kv_cache_dtype",
    "dtype",
    "load_format",
    "served_model_name",
    "host",
    "port",
    "nnodes",
    "node_rank",
    "master_addr",
    "headless",
)


def parse_all(arg_lists: list[dict[str, object]]) -> list[dict[str, object]]:
    from vllm.entrypoints.common.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    out = []
    for item in arg_lists:
        parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
        args = [str(a) for a in item["args"]]  # type: ignore[union-attr]
        stderr = io.StringIO()
        try:
            with contextlib.redirect_stderr(stderr):
                ns = parser.parse_args(args)
                validate_parsed_serve_args(ns)
        except SystemExit as e:  # argparse reports to stderr and exits
            lines = [line for line in stderr.getvalue().splitlines() if "error:" in line]
            out.append({"label": item["label"], "ok": False, "error": " ".join(lines) or f"exit {e.code}"})
            continue
        except Exception as e:  # validate_parsed_serve_args raises TypeError/ValueError
            out.append({"label": item["label"], "ok": False, "error": f"{type(e).__name__}: {e}"})
            continue
        parsed = {k: getattr(ns, k, None) for k in FLAGS}
        parsed["model_tag"] = ns.model_tag
        out.append(
            {"label": item["label"], "ok": True, "parsed": json.loads(json.dumps(parsed, default=str))}
        )
    return out


def batch_defaults(devices: list[dict[str, object]]) -> dict[str, list[int]]:
    import vllm.engine.arg_utils as arg_utils
    from vllm.engine.arg_utils import EngineArgs
    from vllm.platforms.interface import Platform, PlatformEnum
    from vllm.usage.usage_lib import UsageContext

    class StandIn(Platform):  # answers what CUDA would for the device being asked about
        _enum = PlatformEnum.CUDA
        device_type = "cuda"
        memory_bytes = 0
        name = ""

        @classmethod
        def get_device_total_memory(cls, device_id: int = 0) -> int:
            return cls.memory_bytes

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            return cls.name

        @classmethod
        def get_device_capability(cls, device_id: int = 0):  # type: ignore[no-untyped-def]
            return None

    out = {}
    real = arg_utils.current_platform
    arg_utils.current_platform = StandIn()
    try:
        for device in devices:
            StandIn.memory_bytes = int(float(device["memory_gib"]) * 2**30)  # type: ignore[arg-type]
            StandIn.name = str(device["device_name"])
            tokens, seqs = EngineArgs.get_batch_defaults(world_size=1)
            out[str(device["name"])] = [
                tokens[UsageContext.OPENAI_API_SERVER],
                seqs[UsageContext.OPENAI_API_SERVER],
            ]
    finally:
        arg_utils.current_platform = real
    return out


def kv_cache_margin() -> dict[str, float]:
    """The extensible KV cache's margin below the device's headroom (CUDA: the module reads the platform
    at import, and on this CPU platform ``is_rocm()`` is False, as on CUDA)."""
    from vllm.v1.worker import extensible_kv_cache as ekv

    return {"floor_bytes": ekv.KV_CACHE_MARGIN_FLOOR_BYTES, "fraction": ekv.KV_CACHE_MARGIN_FRACTION}


def main() -> int:
    request = json.loads(Path(sys.argv[1]).read_text())
    import vllm
    import vllm.platforms
    from vllm.config.cache import CacheConfig
    from vllm.engine.arg_utils import EngineArgs

    result = {
        "vllm_version": vllm.__version__,
        "platform": type(vllm.platforms.current_platform).__name__,
        "gpu_memory_utilization_flag": EngineArgs().gpu_memory_utilization,  # None: not set
        # what an unset one resolves to with the extensible KV cache, the default on CUDA
        "gpu_memory_utilization": CacheConfig(
            enable_extensible_kv_cache=True
        ).resolved_gpu_memory_utilization,
        "kv_cache_margin": kv_cache_margin(),
        "block_size": CacheConfig.DEFAULT_BLOCK_SIZE,
        "parsed": parse_all(request["arg_lists"]),
        "batch_defaults": batch_defaults(request["devices"]),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
