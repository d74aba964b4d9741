"""The extender's HTTP server on a real socket: limits, timeouts, keep-alive, TLS, and fuzzed bodies.

The server runs in this process on 127.0.0.1 over a bundled fleet (``--fleet`` mode: no cluster).
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuplace.extender.run import ServeOptions, build, make_server
from gpuplace.extender.server import ExtenderHTTPServer, start_in_thread

pytestmark = pytest.mark.integration

POD = {
    "metadata": {"name": "p"},
    "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": "2"}}}]},
}


def serve(**kwargs: object) -> ExtenderHTTPServer:
    options = ServeOptions(port=0, fleet="mixed-a100-h100-l4", **kwargs)  # type: ignore[arg-type]
    service, _ = build(options)
    server = make_server(options, service)
    start_in_thread(server)
    return server


@pytest.fixture(scope="module")
def server() -> Iterator[ExtenderHTTPServer]:
    s = serve(max_body_bytes=64 * 1024)
    yield s
    s.shutdown()
    s.server_close()


def post(
    server: ExtenderHTTPServer, path: str, body: bytes, conn: http.client.HTTPConnection | None = None
) -> tuple[int, dict[str, object]]:
    host, port = server.server_address[:2]
    c = conn or http.client.HTTPConnection(str(host), port, timeout=5)
    c.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    r = c.getresponse()
    return r.status, json.loads(r.read())


def test_verbs_answer_and_connections_are_kept_alive(server: ExtenderHTTPServer) -> None:
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(str(host), port, timeout=5)
    body = json.dumps({"Pod": POD, "NodeNames": ["h100-0", "h100-1"]}).encode()
    status, out = post(server, "/gpuplace/filter", body, conn)
    assert status == 200 and out["NodeNames"] == ["h100-0", "h100-1"]
    sock = conn.sock
    status, pri = post(server, "/gpuplace/prioritize", body, conn)
    assert status == 200 and conn.sock is sock  # the same connection served both
    assert status == 200 and len(pri) == 2  # type: ignore[arg-type]


def test_body_over_the_limit_is_413_without_reading_it(server: ExtenderHTTPServer) -> None:
    status, out = post(server, "/gpuplace/filter", b" " * (64 * 1024 + 1))
    assert status == 413 and "over the limit" in str(out["Error"])


def test_unknown_verb_and_missing_length(server: ExtenderHTTPServer) -> None:
    assert post(server, "/gpuplace/preempt", b"{}")[0] == 404
    host, port = server.server_address[:2]
    with socket.create_connection((str(host), port), timeout=5) as s:
        s.sendall(b"POST /gpuplace/filter HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
        assert b" 411 " in s.recv(4096)


def test_a_client_that_stops_mid_body_is_dropped_and_others_are_served(server: ExtenderHTTPServer) -> None:
    host, port = server.server_address[:2]
    with socket.create_connection((str(host), port), timeout=30) as stalled:
        stalled.sendall(b"POST /gpuplace/filter HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{")
        body = json.dumps({"Pod": POD, "NodeNames": ["h100-0"]}).encode()
        assert post(server, "/gpuplace/filter", body)[0] == 200
        # not blocked behind the stalled client: it was served while the stalled connection is still held
        # open (a server that waited for it would answer only after dropping it at its socket timeout)
        stalled.setblocking(False)
        with pytest.raises(BlockingIOError):
            stalled.recv(4096)
        stalled.settimeout(30)
        assert stalled.recv(4096) == b""  # closed by the server's socket timeout, not held forever


@settings(max_examples=60, deadline=5000)
@given(st.binary(max_size=300) | st.from_regex(rb'\{"Pod": ?\{.*\}, ?"NodeNames": ?\[.*\]\}', fullmatch=True))
def test_fuzzed_bodies_never_get_a_500(server: ExtenderHTTPServer, body: bytes) -> None:
    for verb in ("filter", "prioritize", "bind"):
        status, _ = post(server, f"/gpuplace/{verb}", body)
        assert status in (200, 400)


def test_tls(tmp_path: Path) -> None:
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    s = serve(tls_cert=str(cert), tls_key=str(key))
    try:
        assert s.url.startswith("https://")
        ctx = ssl.create_default_context(cafile=str(cert))
        host, port = s.server_address[:2]
        conn = http.client.HTTPSConnection(str(host), port, context=ctx, timeout=5)
        body = json.dumps({"Pod": POD, "NodeNames": ["h100-0"]}).encode()
        conn.request("POST", "/gpuplace/filter", body=body)
        assert conn.getresponse().status == 200
    finally:
        s.shutdown()
        s.server_close()
