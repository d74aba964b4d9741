"""Errors from the Kubernetes API, as a small hierarchy the rest of gpuplace can act on.

Every call into the API goes through :func:`translate`, which turns the client library's
``ApiException`` (and urllib3's connection errors) into one of :class:`NotFound`, :class:`Conflict`,
:class:`Invalid`, :class:`Forbidden`, :class:`Throttled`, :class:`ServerError` or :class:`Unreachable`,
always chained (``raise ... from e``) so the original response stays in the traceback. Only
:class:`Throttled`, :class:`ServerError` and :class:`Unreachable` are worth retrying.
"""

from __future__ import annotations

import json
from typing import Any

from gpuplace.errors import GpuplaceError


class KubeError(GpuplaceError):
    """Base of every error gpuplace reports from a Kubernetes API call."""

    retryable: bool = False

    def __init__(
        self, message: str, *, status: int = 0, reason: str = "", details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.details = details or {}


class NotFound(KubeError):
    """404: the object (or its namespace, or its API group) does not exist."""


class Conflict(KubeError):
    """409: a field-manager conflict in server-side apply, or the object already exists."""


class Invalid(KubeError):
    """422 or 400: the API server rejected the object; ``causes`` lists the offending fields."""

    @property
    def causes(self) -> list[str]:
        return [f"{c.get('field', '?')}: {c.get('message', '')}" for c in self.details.get("causes", [])]


class Forbidden(KubeError):
    """401 or 403: the identity in the kubeconfig may not do this (see docs/deploy.md for the Role)."""


class Throttled(KubeError):
    """429: API priority and fairness asked us to slow down; ``retry_after_s`` says for how long."""

    retryable = True

    def __init__(self, message: str, *, retry_after_s: float = 1.0, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_after_s = retry_after_s


class ServerError(KubeError):
    """5xx: the API server (or etcd behind it) failed; may succeed on retry."""

    retryable = True


class Unreachable(KubeError):
    """No HTTP answer at all: connection refused, reset, TLS failure or timeout."""

    retryable = True


def _status_body(body: object) -> dict[str, Any]:
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str):
        try:
            parsed = json.loads(body)
        except ValueError:
            return {"message": body.strip()}
        return parsed if isinstance(parsed, dict) else {}
    return {}


def _retry_after_s(headers: object) -> float:
    value = None
    if headers is not None and hasattr(headers, "get"):
        value = headers.get("Retry-After")
    try:
        return max(0.0, float(value)) if value is not None else 1.0
    except (TypeError, ValueError):
        return 1.0


def translate(exc: BaseException, action: str) -> KubeError:
    """The :class:`KubeError` for ``exc``, raised by the caller as ``raise translate(e, ...) from e``.

    ``action`` says what was being done ("apply Deployment/llm in ns"), so the message stands alone.
    """
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError as Urllib3Error

    if isinstance(exc, KubeError):
        return exc
    if isinstance(exc, ApiException):
        body = _status_body(exc.body)
        status = int(exc.status or 0)
        reason = str(body.get("reason") or exc.reason or "")
        detail = str(body.get("message") or exc.reason or "").strip()
        message = f"{action}: HTTP {status} {reason}: {detail}".rstrip(": ")
        kwargs: dict[str, Any] = {"status": status, "reason": reason, "details": body.get("details") or {}}
        if status == 404:
            return NotFound(message, **kwargs)
        if status == 409:
            return Conflict(message, **kwargs)
        if status in (400, 422):
            return Invalid(message, **kwargs)
        if status in (401, 403):
            return Forbidden(message, **kwargs)
        if status == 429:
            return Throttled(message, retry_after_s=_retry_after_s(exc.headers), **kwargs)
        if status >= 500:
            return ServerError(message, **kwargs)
        if status == 0:
            return Unreachable(
                f"{action}: no response from the API server: {exc.reason}", reason="Unreachable"
            )
        return KubeError(message, **kwargs)
    if isinstance(exc, (Urllib3Error, ConnectionError, TimeoutError)):
        return Unreachable(f"{action}: API server unreachable: {exc}", reason="Unreachable")
    return KubeError(f"{action}: {type(exc).__name__}: {exc}")
