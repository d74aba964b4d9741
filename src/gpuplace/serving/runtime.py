"""The serving engines' command lines: vLLM's OpenAI server on clusters, ``transformers serve`` locally.

Pure: the manifest builders call :func:`vllm_args` with the plan's choices (model, tensor-parallel
degree, and the engine parameters the prediction assumed: token budget, batch, block size, memory share,
context length) and put the result in the container's ``args`` and the plan's serving spec; the local
target runs :func:`serve_command` with ``transformers serve --continuous-batching``'s own settings. The
mapping from plan to flags is documented in docs/serving.md; nothing here starts a process or talks to a
cluster.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from gpuplace.errors import InvalidInput

VLLM_DTYPES = ("auto", "bfloat16", "float16", "float32")


def vllm_args(
    *,
    model: str,
    served_model_name: str = "",
    tensor_parallel_size: int = 1,
    dtype: str = "auto",
    port: int = 8000,
    random_weights: bool = False,
    engine_args: Sequence[str] = (),
) -> list[str]:
    """Arguments of ``vllm serve`` (the ``vllm/vllm-openai`` image's entrypoint) for one replica.

    ``engine_args`` are the scheduler and cache settings the plan's prediction assumed
    (``EngineParams.to_vllm_args``: token budget, ``max_num_seqs``, block size, memory share, context
    length, chunked prefill), passed once each. ``random_weights`` uses vLLM's ``--load-format dummy``:
    the shapes (and so the latency) of the model without downloading its weights, as gpuplace's
    profiler does.
    """
    if tensor_parallel_size < 1:
        raise InvalidInput("tensor_parallel_size", tensor_parallel_size, "must be at least 1", "")
    if dtype not in VLLM_DTYPES:
        raise InvalidInput("dtype", dtype, f"must be one of {', '.join(VLLM_DTYPES)}", "")
    flags = [a for a in engine_args if a.startswith("--")]
    repeated = sorted({f for f in flags if flags.count(f) > 1})
    if repeated:
        raise InvalidInput("engine_args", repeated, "repeat a flag", "Give each engine setting once")
    args = [
        model,
        "--host",
        "0.0.0.0",
        "--port",
        str(port),
        "--tensor-parallel-size",
        str(tensor_parallel_size),
        "--dtype",
        dtype,
    ]
    if served_model_name:
        args += ["--served-model-name", served_model_name]
    if random_weights:
        args += ["--load-format", "dummy"]
    return [*args, *engine_args]


def serve_command(
    model_dir: Path, *, host: str, port: int, device: str = "auto", extra_args: Sequence[str] = ()
) -> list[str]:
    """The ``transformers serve`` command line, run with this interpreter (no PATH lookup).

    ``extra_args`` go last, e.g. ``--continuous-batching`` and its ``--cb-*`` settings.
    """
    return [
        sys.executable,
        "-c",
        "import sys; from transformers.cli.transformers import main; sys.argv[0] = 'transformers'; "
        "sys.exit(main())",
        "serve",
        str(model_dir),
        "--host",
        host,
        "--port",
        str(port),
        "--device",
        device,
        "--log-level",
        "warning",
        *extra_args,
    ]
