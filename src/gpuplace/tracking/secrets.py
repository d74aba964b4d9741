"""Keeping secrets out of MLflow: every param, tag and text artifact passes through here first.

Three rules, applied in order: a key that names a secret (token, password, authorization, kubeconfig,
API key, ...) has its value replaced; a value that looks like a credential (a bearer/basic
Authorization value, a JWT, a private key block, kubeconfig key/cert/token data, a URL with a
password) is redacted in place; and the current values of secret-named environment variables
(``MLFLOW_TRACKING_TOKEN``, ``HF_TOKEN``, ...) are replaced wherever they appear. tests check that a
logged run holds none of them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

REDACTED = "***redacted***"

# "token" only as a whole word part: hf_token and MLFLOW_TRACKING_TOKEN are secrets, prompt_tokens is not
_SECRET_KEY = re.compile(
    r"((?<![a-z])token(?![a-z])|secret|passw(or)?d|authorization|auth[_-]?header|api[_-]?key|credential|"
    r"kubeconfig|cookie|private[_-]?key|client[_-]?key|bearer)",
    re.IGNORECASE,
)
# Replaced whole:
_SECRET_VALUE = (
    re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}"),  # JWT
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.DOTALL),
    re.compile(r"\b(hf|ghp|gho|github_pat|glpat|xox[bp])_[A-Za-z0-9_]{10,}"),
    re.compile(r"\bsk-[A-Za-z0-9_-]{16,}"),
)
# Kubeconfig-style "key: value" lines: the key stays, the value goes.
_SECRET_FIELD = re.compile(
    r"(?im)^(\s*-?\s*(client-key-data|client-certificate-data|certificate-authority-data|token|password)"
    r"\s*:\s*)\S+"
)
_URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]+):[^/\s@]+@")


def secret_env_values(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Values of environment variables whose names say they are secrets (longest first)."""
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if _SECRET_KEY.search(k) and len(v) >= 6}
    return tuple(sorted(values, key=len, reverse=True))


def is_secret_key(key: str) -> bool:
    return bool(_SECRET_KEY.search(key))


def redact_text(text: str, env_values: tuple[str, ...] | None = None) -> str:
    """``text`` with every credential-looking substring and secret env value replaced."""
    for value in secret_env_values() if env_values is None else env_values:
        text = text.replace(value, REDACTED)
    for pattern in _SECRET_VALUE:
        text = pattern.sub(REDACTED, text)
    text = _SECRET_FIELD.sub(lambda m: m.group(1) + REDACTED, text)
    return _URL_PASSWORD.sub(lambda m: f"{m.group(1)}:{REDACTED}@", text)


def redact_pairs(pairs: Mapping[str, object], env_values: tuple[str, ...] | None = None) -> dict[str, str]:
    """Params or tags as strings, with secret-named keys blanked and secret-looking values redacted."""
    env = secret_env_values() if env_values is None else env_values
    return {k: REDACTED if is_secret_key(k) else redact_text(str(v), env) for k, v in pairs.items()}
