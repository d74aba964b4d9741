"""The extender's HTTP server: ``POST <prefix>/{filter,prioritize,bind}``, ``GET /healthz|/readyz|/stats``.

Standard library ``ThreadingHTTPServer`` with HTTP/1.1 keep-alive (kube-scheduler reuses connections).
Every request is bounded: the body must declare its ``Content-Length`` (411 otherwise) and stay under
the size limit (413, and the connection is closed without reading it); each connection's socket has a
read timeout, so a client that stops sending mid-body is dropped instead of holding a thread. Binds to
127.0.0.1 unless told otherwise; TLS when given a certificate and key (the handshake runs in the
connection's thread, under the same timeout).
"""

from __future__ import annotations

import json
import logging
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from gpuplace.extender.service import VERBS, ExtenderService

log = logging.getLogger("gpuplace.extender")

DEFAULT_PORT = 8888
DEFAULT_PREFIX = "/gpuplace"
DEFAULT_MAX_BODY_BYTES = 32 * 2**20  # 1,213 full Node objects are ~5 MiB
SOCKET_TIMEOUT_S = 10.0


class ExtenderHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        service: ExtenderService,
        *,
        prefix: str = DEFAULT_PREFIX,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        super().__init__(address, _Handler)
        self.service = service
        self.prefix = "/" + prefix.strip("/") if prefix.strip("/") else ""
        self.max_body_bytes = max_body_bytes
        if tls is not None:
            self.socket = tls.wrap_socket(self.socket, server_side=True, do_handshake_on_connect=False)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        scheme = "https" if isinstance(self.socket, ssl.SSLSocket) else "http"
        return f"{scheme}://{host!s}:{port}{self.prefix}"


def tls_context(cert: Path, key: Path) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(str(cert), str(key))
    return ctx


class _Handler(BaseHTTPRequestHandler):
    server: ExtenderHTTPServer
    protocol_version = "HTTP/1.1"
    timeout = SOCKET_TIMEOUT_S
    # Buffered: headers and body leave in one write when the request is done (handle_one_request flushes).
    wbufsize = 1 << 16

    def setup(self) -> None:
        super().setup()
        # Answers are small: without this, Nagle's algorithm holds the body back until the client's
        # delayed ACK of the headers, 40 ms per call.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if isinstance(self.connection, ssl.SSLSocket):
            self.connection.do_handshake()

    def log_message(self, format: str, *args: Any) -> None:  # the base class's name
        log.debug("%s %s", self.address_string(), format % args)

    def _send(self, status: int, payload: Any, *, close: bool = False) -> None:
        body = payload if isinstance(payload, bytes) else json.dumps(payload, separators=(",", ":")).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # http.server's naming
        path = urlsplit(self.path).path
        service = self.server.service
        if path == "/healthz":
            self._send(200, {"status": "ok"})
        elif path == "/readyz":
            synced = service.state.synced.is_set()
            self._send(200 if synced else 503, {"synced": synced})
        elif path == "/stats":
            self._send(200, service.stats())
        else:
            self._send(404, {"Error": f"no such path {path!r}; GET /healthz, /readyz or /stats"})

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        prefix = self.server.prefix
        verb = path[len(prefix) + 1 :] if path.startswith(prefix + "/") else ""
        if verb not in VERBS:
            verbs = ", ".join(f"{prefix}/{v}" for v in VERBS)
            self._send(404, {"Error": f"no such verb {path!r}; POST {verbs}"}, close=True)
            return
        if self.headers.get("Transfer-Encoding"):
            self._send(411, {"Error": "send Content-Length, not a chunked body"}, close=True)
            return
        raw_length = self.headers.get("Content-Length")
        if raw_length is None:
            self._send(411, {"Error": "Content-Length is required"}, close=True)
            return
        try:
            length = int(raw_length)
            if length < 0:
                raise ValueError
        except ValueError:
            self._send(400, {"Error": f"Content-Length={raw_length!r}: not a byte count"}, close=True)
            return
        limit = self.server.max_body_bytes
        if length > limit:
            self._send(
                413,
                {"Error": f"body of {length} bytes is over the limit of {limit} (--max-body-bytes)"},
                close=True,
            )
            return
        body = self.rfile.read(length)
        if len(body) < length:
            self.close_connection = True  # the client hung up mid-body: nobody to answer
            return
        try:
            status, payload = self.server.service.respond(verb, body)
        except Exception as e:  # a bug, not an input: answer and keep serving
            log.exception("%s failed", verb)
            status, payload = 500, {"Error": f"gpuplace {verb}: internal error: {e}"}
        self._send(status, payload)


def start_in_thread(server: ExtenderHTTPServer) -> threading.Thread:
    """Serve in a daemon thread (tests and benchmarks); stop with ``server.shutdown()``."""
    thread = threading.Thread(target=server.serve_forever, name="gpuplace-extender", daemon=True)
    thread.start()
    return thread
