"""The streaming client of an OpenAI-compatible endpoint: one request → one :class:`RequestResult`.

It owns the wire: the request body for ``/v1/completions`` or ``/v1/chat/completions``, the SSE
parser, the timestamps, and how every way a request can fail becomes data (``error_kind``), never an
exception. It also owns what differs between servers, learnt once per endpoint and remembered:

* Forcing the output length. vLLM takes ``ignore_eos``/``min_tokens``; ``transformers serve`` rejects
  unknown fields with 422 but takes a ``generation_config`` JSON with ``min_new_tokens``; other servers
  get ``max_tokens`` alone. A 422 naming a field gpuplace added moves the endpoint to the next way and
  the request is retried (timed from the retry).
* The end of a stream. vLLM ends with ``data: [DONE]``; ``transformers serve`` never sends it and ends
  with a chunk carrying ``finish_reason``. Either one marks a complete response; a stream that closes
  with neither was cut.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from gpuplace.types.loadtest import RequestResult

# Ways to force the output length, tried in order; each is the set of body fields it adds.
FORCE_VLLM = "vllm"
FORCE_GENERATION_CONFIG = "generation_config"
FORCE_NONE = "max_tokens"
FORCE_ORDER = (FORCE_VLLM, FORCE_GENERATION_CONFIG, FORCE_NONE)
_FORCE_FIELDS = {
    FORCE_VLLM: ("ignore_eos", "min_tokens"),
    FORCE_GENERATION_CONFIG: ("generation_config",),
    FORCE_NONE: (),
}
_MAX_ERROR_TEXT = 500


@dataclass
class EndpointState:
    """What gpuplace has learnt about one endpoint; shared by every request of a run."""

    base_url: str
    model: str
    api: str = "completions"  # or "chat"
    force: str = FORCE_VLLM
    include_usage: bool = True
    temperature: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def url(self) -> str:
        path = "/v1/chat/completions" if self.api == "chat" else "/v1/completions"
        return self.base_url.rstrip("/") + path

    def body(self, prompt: str, max_tokens: int) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens, "stream": True}
        if self.api == "chat":
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = prompt
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.include_usage:
            body["stream_options"] = {"include_usage": True}
        if self.force == FORCE_VLLM:
            body["ignore_eos"] = True
            body["min_tokens"] = max_tokens
        elif self.force == FORCE_GENERATION_CONFIG:
            body["generation_config"] = json.dumps(
                {"max_new_tokens": max_tokens, "min_new_tokens": max_tokens}
            )
        return body

    def drop_rejected(self, detail: str) -> bool:
        """After a 422, stop sending the fields it names; False if it names none of ours."""
        changed = False
        if self.include_usage and "stream_options" in detail:
            self.include_usage = False
            self.notes.append("server rejected stream_options; output tokens are counted from chunks")
            changed = True
        if any(f in detail for f in _FORCE_FIELDS[self.force]):
            nxt = FORCE_ORDER[FORCE_ORDER.index(self.force) + 1]
            self.notes.append(f"server rejected {', '.join(_FORCE_FIELDS[self.force])}; forcing with {nxt}")
            self.force = nxt
            changed = True
        return changed


class _Stream:
    """Accumulates one SSE response."""

    def __init__(self, api: str) -> None:
        self.api = api
        self.chunk_times: list[float] = []
        self.usage_completion: int | None = None
        self.usage_prompt: int | None = None
        self.finished = False
        self.error = ""

    def feed(self, data: str, now: float) -> None:
        if data == "[DONE]":
            self.finished = True
            return
        event = json.loads(data)  # a JSONDecodeError is the caller's "malformed"
        if not isinstance(event, dict):
            raise ValueError(f"SSE data is a {type(event).__name__}, not an object")
        if "error" in event:
            self.error = str(event["error"])[:_MAX_ERROR_TEXT]
            return
        usage = event.get("usage")
        if isinstance(usage, dict):
            self.usage_completion = usage.get("completion_tokens", self.usage_completion)
            self.usage_prompt = usage.get("prompt_tokens", self.usage_prompt)
        for choice in event.get("choices") or ():
            text = choice.get("delta", {}).get("content") if self.api == "chat" else choice.get("text")
            if text:
                self.chunk_times.append(now)
            if choice.get("finish_reason"):
                self.finished = True


async def send(
    session: aiohttp.ClientSession,
    endpoint: EndpointState,
    *,
    index: int,
    prompt: str,
    prompt_tokens: int,
    max_tokens: int,
    scheduled_s: float,
    clock: Callable[[], float] = time.perf_counter,
    t0: float = 0.0,
    timeout_s: float = 600.0,
) -> RequestResult:
    """Send one streaming request and time it; ``t0`` is the run start on ``clock``."""
    for _attempt in range(len(FORCE_ORDER) + 1):
        start = clock()
        base: dict[str, Any] = {
            "index": index,
            "scheduled_s": scheduled_s,
            "start_s": start - t0,
            "prompt_tokens": prompt_tokens,
            "max_tokens": max_tokens,
        }

        def failed(
            kind: str,
            error: str,
            status: int | None = None,
            start: float = start,
            base: dict[str, Any] = base,
        ) -> RequestResult:
            return RequestResult(
                **base,
                success=False,
                e2e_s=clock() - start,
                status=status,
                error_kind=kind,
                error=error[:_MAX_ERROR_TEXT],
            )

        stream = _Stream(endpoint.api)
        try:
            async with session.post(
                endpoint.url,
                json=endpoint.body(prompt, max_tokens),
                timeout=aiohttp.ClientTimeout(total=timeout_s),
            ) as resp:
                if resp.status >= 400:
                    text = await resp.text()
                    if resp.status == 422 and endpoint.drop_rejected(text):
                        continue
                    kind = "http_4xx" if resp.status < 500 else "http_5xx"
                    return failed(kind, f"HTTP {resp.status}: {text.strip()}", resp.status)
                return await _streamed(resp, stream, start=start, clock=clock, base=base, failed=failed)
        except aiohttp.ClientConnectorError as e:
            return failed("connect", f"cannot connect to {endpoint.base_url}: {e}")
        except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError) as e:
            return failed("stream_cut", f"connection closed mid-response: {e!r}")
        except TimeoutError:
            return failed("timeout", f"no complete response within {timeout_s:g} s")
        except aiohttp.ClientError as e:
            return failed("client_error", repr(e))
        except asyncio.CancelledError:
            # The run was stopped (Ctrl-C or the duration bound): the record is kept, then the task ends.
            return failed("cancelled", "the run stopped before the response completed")
    return failed("http_4xx", "the server kept rejecting the request's fields", 422)


async def _streamed(
    resp: aiohttp.ClientResponse,
    stream: _Stream,
    *,
    start: float,
    clock: Callable[[], float],
    base: dict[str, Any],
    failed: Callable[[str, str, int], RequestResult],
) -> RequestResult:
    """The result of a request the server accepted: its SSE stream read and timed, or why it failed."""
    pending = ""
    async for raw in resp.content:
        now = clock()
        line = raw.decode("utf-8", errors="replace").strip()
        if not line or line.startswith(":"):
            continue
        if not line.startswith("data:"):
            pending = line
            continue
        try:
            stream.feed(line[5:].strip(), now - start)
        except (ValueError, TypeError, AttributeError) as e:
            return failed("malformed", f"malformed SSE data {line[:120]!r}: {e}", resp.status)
        if stream.error:
            return failed("server_error", stream.error, resp.status)
    end = clock()
    if pending and not stream.chunk_times:
        return failed("malformed", f"not an SSE stream: {pending[:120]!r}", resp.status)
    if not stream.finished:
        return failed(
            "stream_cut",
            f"stream closed after {len(stream.chunk_times)} chunks without a finish or [DONE]",
            resp.status,
        )
    if not stream.chunk_times:
        return failed("empty", "the response carried no text", resp.status)
    tokens, source = (
        (int(stream.usage_completion), "usage")
        if stream.usage_completion is not None
        else (len(stream.chunk_times), "chunks")
    )
    return RequestResult(
        **base,
        success=True,
        ttft_s=stream.chunk_times[0],
        e2e_s=end - start,
        chunk_times_s=tuple(stream.chunk_times),
        output_tokens=tokens,
        output_tokens_source=source,
        server_prompt_tokens=stream.usage_prompt,
        status=resp.status,
    )
