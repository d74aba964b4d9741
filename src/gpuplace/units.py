"""Units at the edges: seconds become milliseconds only when a person reads them, and the billing
calendar every cost figure uses. Standard library only; everything inside gpuplace keeps seconds."""

from __future__ import annotations

import math

HOURS_PER_MONTH = 730.0  # 365 × 24 / 12, the cloud providers' billing month
MONTHS_PER_QUARTER = 3.0
WEEKS_PER_QUARTER = 13.0


def ms(seconds: float | None, digits: int = 1, missing: str = "-") -> str:
    """Seconds as milliseconds for a report or a table; ``missing`` for None, NaN or infinity."""
    if seconds is None or not math.isfinite(seconds):
        return missing
    return f"{seconds * 1000:.{digits}f}"


def to_ms(seconds: float) -> float:
    """Seconds as a number of milliseconds, for metrics that dashboards show in ms."""
    return seconds * 1000


def seconds(milliseconds: float) -> float:
    """Milliseconds, as an edge spells them (a flag, a component parameter, a device timer), as seconds."""
    return milliseconds / 1000
