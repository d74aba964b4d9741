"""The bare HTTP round trip the extender benchmark compares against: the extender's own HTTP server
(:class:`gpuplace.extender.server.ExtenderHTTPServer`: keep-alive, TCP_NODELAY, buffered writes, the
body read in full) in front of a service that answers every filter and prioritize with a fixed,
pre-encoded answer of the real one's size — everything but parsing, validating and scoring.

Run by bench_extender.py as its own process: ``python http_baseline.py PORT NODE_NAMES_JSON``.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

from gpuplace.extender.server import ExtenderHTTPServer


class FixedAnswers:
    def __init__(self, names: list[str]) -> None:
        self.answers = {
            "filter": json.dumps(
                {
                    "Nodes": None,
                    "NodeNames": names,
                    "FailedNodes": {},
                    "FailedAndUnresolvableNodes": {},
                    "Error": "",
                },
                separators=(",", ":"),
            ).encode(),
            "prioritize": json.dumps(
                [{"Host": n, "Score": 10} for n in names], separators=(",", ":")
            ).encode(),
        }
        self.state = type("State", (), {"synced": threading.Event()})()
        self.state.synced.set()

    def respond(self, verb: str, body: bytes) -> tuple[int, Any]:
        return 200, self.answers.get(verb, b"{}")

    def stats(self) -> dict[str, Any]:
        return {}


def main() -> None:
    port, names_file = int(sys.argv[1]), sys.argv[2]
    with open(names_file) as f:
        names = json.load(f)
    server = ExtenderHTTPServer(("127.0.0.1", port), FixedAnswers(names))  # type: ignore[arg-type]
    server.serve_forever()


if __name__ == "__main__":
    main()
