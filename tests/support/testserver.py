"""A small, real OpenAI-style streaming server that injects faults on command.

It serves ``/v1/completions`` and ``/v1/chat/completions`` (streaming SSE, one chunk per token after
``ttft_s`` and then every ``token_delay_s``, usage in the last chunk, optionally ``data: [DONE]``) and
``/v1/models`` (a request with ``"stream": false`` gets one JSON completion), so the load tester's
fault handling is tested against real sockets rather than a patched client, and the generator-capacity
benchmark has a server that costs almost nothing per token. Faults are queued with ``POST /admin/fault``
(``{"kind": ..., "count": n, "after_tokens": k}``) or :meth:`FaultServer.inject`, and apply to the
next ``count`` requests:

``http_500``, ``http_429``, ``http_400`` (an error status with a JSON body), ``drop`` (close the
connection without answering), ``cut`` (close the connection after ``after_tokens`` chunks),
``malformed`` (a non-JSON ``data:`` line after ``after_tokens`` chunks), ``error_event`` (a
``data: {"error": ...}`` event, as ``transformers serve`` reports generation errors), ``no_finish``
(end the stream cleanly without finish_reason or [DONE]). ``reject_fields`` makes it answer 422 to
requests carrying those fields, as ``transformers serve`` does for ``ignore_eos``.

Run standalone: ``python -m tests.support.testserver --port 8001 --token-delay-ms 1``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

FAULT_KINDS = ("http_500", "http_429", "http_400", "drop", "cut", "malformed", "error_event", "no_finish")


@dataclass
class Fault:
    kind: str
    after_tokens: int = 0


@dataclass
class ServerOptions:
    ttft_s: float = 0.0
    token_delay_s: float = 0.0
    send_done: bool = True
    send_usage: bool = True
    reject_fields: tuple[str, ...] = ()
    model: str = "test-model"
    max_parallel: int = 0  # > 0: generate at most this many responses at once, queueing the rest


@dataclass
class ServerStats:
    requests: int = 0
    bodies: list[dict[str, Any]] = field(default_factory=list)
    keep_bodies: bool = True


class FaultServer:
    """The server, started in a background thread (``start``/``stop``) or awaited (``app``)."""

    def __init__(self, options: ServerOptions | None = None) -> None:
        self.options = options or ServerOptions()
        self.faults: deque[Fault] = deque()
        self.stats = ServerStats()
        self.port = 0
        self._runner: web.AppRunner | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._slots: asyncio.Semaphore | None = None  # created on the server's own loop

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def inject(self, kind: str, count: int = 1, after_tokens: int = 0) -> None:
        if kind not in FAULT_KINDS:
            raise ValueError(f"fault kind={kind!r}: must be one of {', '.join(FAULT_KINDS)}")
        self.faults.extend(Fault(kind, after_tokens) for _ in range(count))

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/completions", self._generate)
        app.router.add_post("/v1/chat/completions", self._generate)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/health", self._health)
        app.router.add_post("/admin/fault", self._admin_fault)
        return app

    async def _health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": self.options.model, "object": "model"}]})

    async def _admin_fault(self, request: web.Request) -> web.Response:
        body = await request.json()
        try:
            self.inject(str(body["kind"]), int(body.get("count", 1)), int(body.get("after_tokens", 0)))
        except (KeyError, ValueError) as e:
            return web.json_response({"detail": str(e)}, status=400)
        return web.json_response({"queued": len(self.faults)})

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.stats.requests += 1
        if self.stats.keep_bodies:
            self.stats.bodies.append(body)
        rejected = set(body) & set(self.options.reject_fields)
        if rejected:
            return web.json_response({"detail": f"Unexpected fields in the request: {rejected}"}, status=422)
        fault = self.faults.popleft() if self.faults else None
        if fault is not None and fault.kind.startswith("http_"):
            status = int(fault.kind[5:])
            return web.json_response({"error": {"message": f"injected {status}"}}, status=status)
        if fault is not None and fault.kind == "drop":
            assert request.transport is not None
            request.transport.close()
            return web.Response()  # never sent: the connection is gone
        if body.get("stream") is False:  # an OpenAI server answers in one JSON document then
            n = int(body.get("max_tokens") or 16)
            if self.options.ttft_s:
                await asyncio.sleep(self.options.ttft_s)
            text = "".join(f" t{i}" for i in range(n))
            choice = {"index": 0, "text": text, "finish_reason": "length"}
            return web.json_response(
                {"object": "text_completion", "model": self.options.model, "choices": [choice]}
            )
        if self.options.max_parallel > 0:
            if self._slots is None:
                self._slots = asyncio.Semaphore(self.options.max_parallel)
            async with self._slots:
                return await self._stream(request, body, fault)
        return await self._stream(request, body, fault)

    async def _stream(
        self, request: web.Request, body: dict[str, Any], fault: Fault | None
    ) -> web.StreamResponse:
        chat = request.path.endswith("/chat/completions")
        n = int(body.get("max_tokens") or 16)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        if self.options.ttft_s:
            await asyncio.sleep(self.options.ttft_s)
        for i in range(n):
            if fault is not None and i == fault.after_tokens:
                if fault.kind == "cut":
                    assert request.transport is not None
                    request.transport.close()
                    return resp
                if fault.kind == "malformed":
                    await resp.write(b"data: {not json\n\n")
                    return resp
                if fault.kind == "error_event":
                    await resp.write(b'data: {"error": "injected generation error"}\n\n')
                    return resp
            if i and self.options.token_delay_s:
                await asyncio.sleep(self.options.token_delay_s)
            await resp.write(self._chunk(chat, f" t{i}", None))
        if fault is not None and fault.kind == "no_finish":
            return resp
        usage = (
            {"prompt_tokens": 1, "completion_tokens": n, "total_tokens": n + 1}
            if self.options.send_usage
            else None
        )
        await resp.write(self._chunk(chat, "", "length", usage))
        if self.options.send_done:
            await resp.write(b"data: [DONE]\n\n")
        return resp

    def _chunk(self, chat: bool, text: str, finish: str | None, usage: dict[str, int] | None = None) -> bytes:
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
        if chat:
            choice["delta"] = {"content": text} if text else {}
        else:
            choice["text"] = text
        event: dict[str, Any] = {"object": "chunk", "created": int(time.time()), "choices": [choice]}
        if usage:
            event["usage"] = usage
        return b"data: " + json.dumps(event).encode() + b"\n\n"

    # --- running it -----------------------------------------------------------------------------

    async def start_async(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._runner = web.AppRunner(self.app(), access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        server = site._server
        assert server is not None
        self.port = int(getattr(server, "sockets")[0].getsockname()[1])  # noqa: B009 (not in the stub)

    async def stop_async(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def start(self, port: int = 0, host: str = "127.0.0.1") -> FaultServer:
        """Serve on ``host`` from a daemon thread with its own event loop; returns once the port is bound."""
        ready = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self.start_async(host, port))
            except BaseException as e:
                errors.append(e)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self.stop_async())
            loop.close()

        self._thread = threading.Thread(target=run, name="gpuplace-fault-server", daemon=True)
        self._thread.start()
        ready.wait(30)
        if errors:
            raise errors[0]
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(30)
            self._loop = self._thread = None

    def __enter__(self) -> FaultServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="gpuplace's fault-injecting streaming test server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--ttft-ms", type=float, default=0.0)
    parser.add_argument("--token-delay-ms", type=float, default=0.0)
    parser.add_argument("--no-done", action="store_true", help="never send data: [DONE]")
    args = parser.parse_args(argv)
    server = FaultServer(
        ServerOptions(
            ttft_s=args.ttft_ms / 1000, token_delay_s=args.token_delay_ms / 1000, send_done=not args.no_done
        )
    )
    server.stats.keep_bodies = False

    async def serve() -> None:
        await server.start_async(args.host, args.port)
        print(f"serving on {server.url}", flush=True)
        await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())


if __name__ == "__main__":
    main()
