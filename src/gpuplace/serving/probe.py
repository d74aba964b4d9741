"""Ready to serve: the first successful request to an OpenAI-compatible server.

Provisioning ends here on every path and target (docs/deploy.md#provisioning): a one-token completion,
not streamed, that comes back with a choice. A server that answers ``/health`` but not a completion is
not serving yet.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

PROBE_PROMPT = "Hello"


def completion_body(model: str) -> dict[str, Any]:
    """The first request: a one-token completion, not streamed."""
    return {"model": model, "prompt": PROBE_PROMPT, "max_tokens": 1, "stream": False}


def answered(response: object) -> bool:
    """Whether a completion response carries a choice (a 200 with an error body is no answer)."""
    return isinstance(response, Mapping) and bool(response.get("choices"))


def first_request(base_url: str, model: str, *, timeout_s: float = 10.0) -> bool:
    """Send the one-token completion to ``base_url``; True when it answered."""
    request = urllib.request.Request(
        base_url.rstrip("/") + "/v1/completions",
        data=json.dumps(completion_body(model)).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:
            return resp.status == 200 and answered(json.loads(resp.read() or b"null"))
    except (OSError, ValueError, urllib.error.URLError):
        return False
