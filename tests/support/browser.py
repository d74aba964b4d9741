"""Headless Chromium over the DevTools protocol, for the browser tests (docs/tracking.md#browser-tests).

Debian's ``chromium`` (installed by ``tests/browser/chromium.sh``, which ``make test`` runs) starts with
``--remote-debugging-port=0`` in a throw-away profile; this module reads the port it chose, opens one page
and talks to it over the page's websocket with ``websocket-client`` (an mlflow dependency, pinned in
constraints.txt). A test navigates, waits until the rendered text says what it looks for, reads that text
(what a person sees, not the API), takes screenshots, and collects the page's script errors and every
request it made. The browser's process group is stopped by its id.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def chromium_binary() -> str:
    """The path of Debian's chromium, installed first when missing (tests/browser/chromium.sh)."""
    out = subprocess.run(
        ["bash", str(REPO / "tests" / "browser" / "chromium.sh")], capture_output=True, text=True, check=False
    )
    if out.returncode != 0 or not out.stdout.strip():
        raise RuntimeError(f"chromium is not installed and could not be installed:\n{out.stderr[-2000:]}")
    return out.stdout.strip().splitlines()[-1]


@dataclass
class Page:
    """One browser tab: navigate, wait for text, evaluate, screenshot; events are collected as they come."""

    ws: Any
    exceptions: list[str] = field(default_factory=list)  # Runtime.exceptionThrown descriptions
    console_errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    _next: int = 0

    def call(self, method: str, timeout_s: float = 60.0, **params: Any) -> dict[str, Any]:
        self._next += 1
        me = self._next
        self.ws.send(json.dumps({"id": me, "method": method, "params": params}))
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.ws.settimeout(max(0.1, deadline - time.monotonic()))
            msg = json.loads(self.ws.recv())
            if msg.get("id") == me:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return dict(msg.get("result") or {})
            self._event(msg)
        raise TimeoutError(f"{method} did not answer within {timeout_s:.0f} s")

    def _event(self, msg: dict[str, Any]) -> None:
        method, params = msg.get("method", ""), msg.get("params") or {}
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails") or {}
            self.exceptions.append(str((details.get("exception") or {}).get("description") or details))
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.console_errors.append(
                " ".join(str(a.get("value", a.get("description", ""))) for a in params["args"])
            )
        elif method == "Network.requestWillBeSent":
            self.requests.append(str(params["request"]["url"]))

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return (result.get("result") or {}).get("value")

    def text(self) -> str:
        """The page's rendered text, as a person reads it (``innerText``)."""
        return str(self.evaluate("document.body ? document.body.innerText : ''") or "")

    def goto(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def wait_for(self, predicate: Callable[[str], bool], timeout_s: float = 90.0, what: str = "") -> str:
        """Poll the rendered text until ``predicate`` holds and return it (a timeout shows the last)."""
        deadline = time.monotonic() + timeout_s
        text = ""
        while time.monotonic() < deadline:
            text = self.text()
            if predicate(text):
                return text
            self.call("Runtime.evaluate", expression="0")  # drains pending events while waiting
            time.sleep(0.5)
        raise TimeoutError(
            f"the page did not show {what or 'what was expected'} within {timeout_s:.0f} s:\n{text[:3000]}"
        )

    def wait_js(self, expression: str, timeout_s: float = 90.0) -> None:
        """Poll a JavaScript expression until it is true (e.g. a frame's load flag)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.evaluate(expression):
                return
            time.sleep(0.5)
        raise TimeoutError(f"{expression} was not true within {timeout_s:.0f} s")

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=False)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path


@contextmanager
def chromium(profile_dir: Path, *, width: int = 1400, height: int = 1000) -> Iterator[Page]:
    """A headless Chromium with one page open, stopped by its process group id when the block ends."""
    import websocket  # websocket-client

    profile_dir.mkdir(parents=True, exist_ok=True)
    log = (profile_dir / "chromium.log").open("wb")
    proc = subprocess.Popen(
        [
            chromium_binary(),
            "--headless=new",
            "--remote-debugging-port=0",
            f"--user-data-dir={profile_dir}",
            "--no-sandbox",  # root in a container has no user namespace for the sandbox
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--disable-extensions",
            "--disable-background-networking",
            f"--window-size={width},{height}",
            "about:blank",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        port_file = profile_dir / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not port_file.is_file() or not port_file.read_text().strip():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"chromium did not start: {(profile_dir / 'chromium.log').read_text()[-2000:]}"
                )
            time.sleep(0.2)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as resp:
            targets = json.load(resp)
        target = next(t for t in targets if t.get("type") == "page")
        ws = websocket.create_connection(target["webSocketDebuggerUrl"], timeout=60, suppress_origin=True)
        page = Page(ws)
        for method in ("Page.enable", "Runtime.enable", "Network.enable"):
            page.call(method)
        page.call(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )
        try:
            yield page
        finally:
            ws.close()
    finally:
        log.close()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=20)
