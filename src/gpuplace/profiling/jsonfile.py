"""The measured files the profile step writes as JSON with a format tag (the engine-step profile, the
operator table): written atomically, so a reader never sees half a file, and read back with one error per
way a file can be wrong, naming the field it was given for and what to do. Standard library only: the
planner's steps read these files without torch."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from gpuplace.errors import InvalidInput

T = TypeVar("T")


def write_tagged_json(data: dict[str, Any], fmt: str, path: str | os.PathLike[str]) -> Path:
    """``{"format": fmt, **data}`` as JSON at ``path``, atomically."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps({"format": fmt, **data}, indent=1, allow_nan=False) + "\n")
    os.replace(tmp, out)
    return out


def read_tagged_json(
    path: str | os.PathLike[str],
    fmt: str,
    parse: Callable[[dict[str, Any]], T],
    *,
    field: str,
    what: str,
    fix: str,
) -> T:
    """The value ``parse`` makes of the JSON at ``path`` tagged ``fmt``; :class:`InvalidInput` on ``field``
    for a missing file, a file that is not JSON, one without the tag, or one ``parse`` refuses."""
    p = Path(path)
    try:
        text = p.read_text()
    except (FileNotFoundError, IsADirectoryError):
        raise InvalidInput(field, str(p), "no such file", fix) from None
    try:
        data = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as e:
        raise InvalidInput(field, str(p), f"is not JSON ({e})", fix) from None
    if not isinstance(data, dict) or data.get("format") != fmt:
        raise InvalidInput(field, str(p), f"holds no {what} (format {fmt})", fix)
    try:
        return parse(data)
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise InvalidInput(field, str(p), f"is not a valid {what} file ({e})", fix) from None
