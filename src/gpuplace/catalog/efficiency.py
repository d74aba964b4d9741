"""GPU-class efficiency defaults: ``efficiency.csv`` and the function that picks a GPU's values.

The step-time model divides a roofline by achieved efficiencies. When no profile of the same GPU model
is given, they come from this file: one row per (GPU class, quantity) with a public source per value.
A GPU class is a catalog GPU name (a measured GPU), an architecture (``hopper``, ``ampere``, ``ada``)
or ``default``; :meth:`EfficiencyTable.for_gpu` takes each quantity from the most specific class that
has it. Per-layer overheads are turned into a model's absolute times there, since they scale with its
depth; the engine's per-step floor (``step_floor_s``: scheduler, input preparation, sampling, detokenising)
is added to the step whatever the model. Schema and sources: docs/serving-model.md.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from gpuplace.catalog.gpus import CATALOG_VERSION, DATA_DIR
from gpuplace.errors import InvalidInput
from gpuplace.types import GpuSpec, ModelArch
from gpuplace.types.engine import Efficiencies

EFFICIENCY_COLUMNS: tuple[str, ...] = ("gpu_class", "quantity", "value", "source")
# quantity -> (lowest allowed, highest allowed): fractions of a peak may not exceed it
QUANTITIES: Mapping[str, tuple[float, float]] = MappingProxyType(
    {
        "mbu": (0.0, 1.0),
        "mfu": (0.0, 1.0),
        "attention_mfu": (0.0, 1.0),
        "link_efficiency": (0.0, 1.0),
        "gemm_latency_s": (0.0, 0.001),
        "step_overhead_s_per_layer": (0.0, 0.01),
        "step_floor_s": (0.0, 0.05),
        "seq_cost_s": (0.0, 0.005),
        "request_overhead_s_per_layer": (0.0, 0.1),
    }
)
DEFAULT_CLASS = "default"


@dataclass(frozen=True, slots=True)
class EfficiencyValue:
    value: float
    source: str


@dataclass(frozen=True, slots=True)
class EfficiencyTable:
    """The rows of ``efficiency.csv``: class -> quantity -> value with its source."""

    version: str
    rows: Mapping[str, Mapping[str, EfficiencyValue]]
    source: str

    def classes(self) -> tuple[str, ...]:
        return tuple(self.rows)

    def lookup(self, spec: GpuSpec, quantity: str) -> tuple[EfficiencyValue, str]:
        """The value for ``quantity`` from the GPU's own row, else its architecture's, else default."""
        for cls in (spec.name, spec.architecture, DEFAULT_CLASS):
            found = self.rows.get(cls, {}).get(quantity)
            if found is not None:
                return found, cls
        raise InvalidInput(
            f"{Path(self.source).name}:{quantity}",
            spec.name,
            f"has no {quantity} for {spec.name}, {spec.architecture} or {DEFAULT_CLASS}",
            f"Add a '{DEFAULT_CLASS},{quantity},VALUE,SOURCE' row",
        )

    def for_gpu(self, spec: GpuSpec, arch: ModelArch) -> Efficiencies:
        """The efficiencies of ``spec`` serving ``arch``, each with its class and source."""
        values: dict[str, float] = {}
        sources: dict[str, str] = {}
        for quantity in QUANTITIES:
            found, cls = self.lookup(spec, quantity)
            values[quantity] = found.value
            sources[quantity] = f"efficiency.csv[{cls}]: {found.source}"
        layers = arch.num_layers
        return Efficiencies(
            mbu=values["mbu"],
            mfu=values["mfu"],
            attention_mfu=values["attention_mfu"],
            link_efficiency=values["link_efficiency"],
            gemm_latency_s=values["gemm_latency_s"],
            # the per-layer kernel floors and the engine's per-step CPU-side floor, whatever the model
            step_overhead_s=values["step_overhead_s_per_layer"] * layers + values["step_floor_s"],
            seq_overhead_s=values["seq_cost_s"],
            request_overhead_s=values["request_overhead_s_per_layer"] * layers,
            cpu_step_s=values["step_floor_s"],
            sources={
                "mbu": sources["mbu"],
                "mfu": sources["mfu"],
                "attention_mfu": sources["attention_mfu"],
                "link_efficiency": sources["link_efficiency"],
                "gemm_latency_s": sources["gemm_latency_s"],
                "step_overhead_s": f"{layers} layers x {sources['step_overhead_s_per_layer']}; "
                f"+ the engine's step floor {sources['step_floor_s']}",
                "seq_overhead_s": f"the engine's cost per sequence in a step {sources['seq_cost_s']}",
                "request_overhead_s": f"{layers} layers x {sources['request_overhead_s_per_layer']}",
            },
        )


def load_efficiency_table(path: str | os.PathLike[str] | None = None) -> EfficiencyTable:
    """Read ``efficiency.csv`` (the bundled one unless ``path`` is given), checking its schema.

    Every row needs a known quantity, a finite value in that quantity's range and a non-empty source;
    every quantity needs a ``default`` row, so that any GPU gets a value.
    """
    chosen = Path(path) if path is not None else DATA_DIR / "efficiency.csv"
    if not chosen.is_file():
        raise InvalidInput("efficiency", str(chosen), "no such file", "Point it at an efficiency.csv")
    rows: dict[str, dict[str, EfficiencyValue]] = {}
    with chosen.open(newline="") as f:
        reader = csv.DictReader(f)
        if tuple(reader.fieldnames or ()) != EFFICIENCY_COLUMNS:
            raise InvalidInput(
                f"{chosen.name}:columns",
                list(reader.fieldnames or ()),
                f"must be exactly {', '.join(EFFICIENCY_COLUMNS)}",
                "Fix the header",
            )
        for line, row in enumerate(reader, start=2):
            where = f"{chosen.name}:{line}"
            if None in row or None in row.values():
                raise InvalidInput(where, row, "has the wrong number of cells", "Quote cells with commas")
            cls, quantity, raw, source = (row[c].strip() for c in EFFICIENCY_COLUMNS)
            if quantity not in QUANTITIES:
                raise InvalidInput(
                    f"{where}:quantity", quantity, "unknown quantity", f"Use one of {', '.join(QUANTITIES)}"
                )
            try:
                value = float(raw)
            except ValueError:
                raise InvalidInput(f"{where}:value", raw, "is not a number", "Fix that cell") from None
            lo, hi = QUANTITIES[quantity]
            if not math.isfinite(value) or not lo <= value <= hi or (hi == 1.0 and value == 0):
                raise InvalidInput(
                    f"{where}:value", raw, f"is outside ({lo:g}, {hi:g}] for {quantity}", "Fix that cell"
                )
            if not cls:
                raise InvalidInput(
                    f"{where}:gpu_class", cls, "is empty", "Name a GPU, architecture or default"
                )
            if not source:
                raise InvalidInput(f"{where}:source", source, "is empty", "Every value needs a public source")
            if quantity in rows.setdefault(cls, {}):
                raise InvalidInput(
                    where, (cls, quantity), "is listed twice", "Keep one row per class and quantity"
                )
            rows[cls][quantity] = EfficiencyValue(value, source)
    missing = [q for q in QUANTITIES if q not in rows.get(DEFAULT_CLASS, {})]
    if missing:
        raise InvalidInput(
            f"{chosen.name}:{DEFAULT_CLASS}", missing, "have no default row", "Add a default row for each"
        )
    frozen = MappingProxyType({c: MappingProxyType(q) for c, q in rows.items()})
    return EfficiencyTable(version=CATALOG_VERSION, rows=frozen, source=str(chosen))
