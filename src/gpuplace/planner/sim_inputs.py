"""What one simulated replica is given (:func:`gpuplace.planner.engine_sim.simulate`): the workload checked
against the engine (refused with the field named), and the requests in the order the engine sees them."""

from __future__ import annotations

import math
from collections.abc import Sequence

from gpuplace.errors import InvalidInput
from gpuplace.types.engine import EngineParams
from gpuplace.workload import RequestSpec


def longest_blocks(
    requests: Sequence[RequestSpec],
    engine: EngineParams,
    concurrency: int | None,
    discard_head: float,
    discard_tail: float,
) -> int:
    """The KV blocks of the workload's longest request, once the inputs are checked: some requests to
    keep after warm-up and drain, and every request fitting ``max_model_len`` and the KV cache alone."""
    if not requests:
        raise InvalidInput("requests", 0, "nothing to simulate", "Give at least one request")
    if concurrency is not None and concurrency < 1:
        raise InvalidInput("concurrency", concurrency, "must be at least 1", "")
    if not (0 <= discard_head < 1 and 0 <= discard_tail < 1 and discard_head + discard_tail < 1):
        raise InvalidInput("discard_head/discard_tail", (discard_head, discard_tail), "must leave requests")
    too_long = [r for r in requests if r.prompt_tokens + r.output_tokens > engine.max_model_len]
    if too_long:
        r = too_long[0]
        raise InvalidInput(
            "requests",
            f"#{r.index}: {r.prompt_tokens}+{r.output_tokens} tokens",
            f"exceeds max_model_len={engine.max_model_len} ({len(too_long)} such requests)",
            "Shorten the workload's lengths or raise max_model_len",
        )
    bs = engine.block_size
    longest = max(-(-(r.prompt_tokens + r.output_tokens) // bs) for r in requests)
    if longest > engine.num_gpu_blocks - 1:  # vLLM's block pool keeps one block aside (its null block)
        raise InvalidInput(
            "num_gpu_blocks",
            engine.num_gpu_blocks,
            "is too small for one request of the workload alone",
            "Use more GPU memory (a larger GPU or TP degree) or shorter requests",
        )
    return longest


def arrivals_in_order(
    requests: Sequence[RequestSpec], concurrency: int | None
) -> tuple[list[float], list[int], list[int], int]:
    """Arrivals, prompt and output lengths in the engine's order, and how many are released at 0: open
    loop, all, by arrival; closed loop, the first ``concurrency`` (the others NaN until released)."""
    n_req = len(requests)
    prompt = [r.prompt_tokens for r in requests]
    out = [r.output_tokens for r in requests]
    if concurrency is not None:
        released = max(0, min(concurrency, n_req))
        return [0.0] * released + [math.nan] * (n_req - released), prompt, out, released
    arrival = [r.arrival_s for r in requests]
    if any(not math.isfinite(a) for a in arrival):
        raise InvalidInput("requests", "arrival_s", "has NaN: a closed-loop workload", "Pass concurrency=")
    order = sorted(range(n_req), key=arrival.__getitem__)
    if order != list(range(n_req)):
        prompt = [prompt[i] for i in order]
        out = [out[i] for i in order]
        arrival = [arrival[i] for i in order]
    return arrival, prompt, out, n_req
