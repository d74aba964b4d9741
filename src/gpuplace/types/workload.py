"""Traffic value types: one request to send (:class:`RequestSpec`), a token-length distribution
(:class:`LengthDist`) and the request stream a plan is made for (:class:`Traffic`).

The planner simulates :class:`Traffic` and the load tester sends it (:mod:`gpuplace.workload` draws the
requests), so a prediction and its measurement describe the same stream. Standard library only.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuplace.errors import InvalidInput

ARRIVALS = ("poisson", "gamma", "constant")


@dataclass(frozen=True, slots=True)
class RequestSpec:
    """One request to send: when (seconds after the run start; NaN = as soon as a slot is free)."""

    index: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class LengthDist:
    """Token lengths: ``fixed`` (a), ``uniform`` integers in [a, b], or ``normal`` (mean a, std b)."""

    kind: str
    a: float
    b: float = 0.0

    @classmethod
    def parse(cls, text: str | int, *, field: str) -> LengthDist:
        """``64`` | ``uniform:32:128`` | ``normal:64:16``."""
        s = str(text).strip()
        fix = "Give N, uniform:LO:HI or normal:MEAN:STD with positive token counts"
        parts = s.split(":")
        try:
            if len(parts) == 1:
                dist = cls("fixed", float(int(parts[0])))
            elif len(parts) == 3 and parts[0] in ("uniform", "normal"):
                dist = cls(parts[0], float(parts[1]), float(parts[2]))
            else:
                raise ValueError(s)
        except ValueError:
            raise InvalidInput(field, text, "is not a length distribution", fix) from None
        if dist.a < 1 or (dist.kind == "uniform" and dist.b < dist.a) or dist.b < 0:
            raise InvalidInput(field, text, "needs lengths ≥ 1 (and LO ≤ HI, STD ≥ 0)", fix)
        return dist

    def sample(self, rng: random.Random) -> int:
        if self.kind == "fixed":
            return int(self.a)
        if self.kind == "uniform":
            return rng.randint(int(self.a), int(self.b))
        return max(1, round(rng.gauss(self.a, self.b)))

    @property
    def mean(self) -> float:
        return (self.a + self.b) / 2 if self.kind == "uniform" else self.a

    @property
    def upper(self) -> int:
        """The largest length :meth:`sample` makes in practice (normal: mean + 4 std)."""
        if self.kind == "fixed":
            return int(self.a)
        return int(self.b) if self.kind == "uniform" else math.ceil(self.a + 4 * self.b)

    def describe(self) -> str:
        return str(int(self.a)) if self.kind == "fixed" else f"{self.kind}:{self.a:g}:{self.b:g}"


@dataclass(frozen=True, slots=True)
class Traffic:
    """The request stream a plan is made for, and what its load test sends unless told otherwise.

    Lengths are distributions (:class:`LengthDist`); arrivals are a Poisson, gamma (``burstiness`` is
    the shape: < 1 burstier) or constant-rate process at the SLO's rate. With ``trace`` set, lengths
    (and, in a load test, arrival times) come from that trace file instead.
    """

    prompt_tokens: LengthDist = field(default_factory=lambda: LengthDist("fixed", 512))
    output_tokens: LengthDist = field(default_factory=lambda: LengthDist("fixed", 128))
    arrival: str = "poisson"
    burstiness: float = 1.0
    trace: str = ""

    def __post_init__(self) -> None:
        if self.arrival not in ARRIVALS:
            raise InvalidInput("arrival", self.arrival, f"must be one of {', '.join(ARRIVALS)}", "")
        if not (isinstance(self.burstiness, int | float) and math.isfinite(self.burstiness)) or not (
            self.burstiness > 0
        ):
            raise InvalidInput(
                "burstiness", self.burstiness, "must be positive", "1 is Poisson; < 1 burstier"
            )

    @classmethod
    def parse(
        cls,
        prompt_tokens: str | int = 512,
        output_tokens: str | int = 128,
        *,
        arrival: str = "poisson",
        burstiness: float = 1.0,
        trace: str = "",
    ) -> Traffic:
        """From the edge's spelling: lengths as ``N``, ``uniform:LO:HI`` or ``normal:MEAN:STD``."""
        return cls(
            LengthDist.parse(prompt_tokens, field="prompt_tokens"),
            LengthDist.parse(output_tokens, field="output_tokens"),
            arrival,
            burstiness,
            trace,
        )

    @property
    def max_context_tokens(self) -> int:
        """Prompt plus output tokens of the longest request the distributions make (normal: +4 std)."""
        return self.prompt_tokens.upper + self.output_tokens.upper

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens.describe(),
            "output_tokens": self.output_tokens.describe(),
            "arrival": self.arrival,
            "burstiness": self.burstiness,
            "trace": self.trace,
        }

    @classmethod
    def from_json_dict(cls, data: Mapping[str, Any]) -> Traffic:
        return cls.parse(
            data.get("prompt_tokens", 512),
            data.get("output_tokens", 128),
            arrival=str(data.get("arrival", "poisson")),
            burstiness=float(data.get("burstiness", 1.0)),
            trace=str(data.get("trace") or ""),
        )
