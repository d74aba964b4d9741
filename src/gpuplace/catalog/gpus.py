"""The GPU catalog: loading ``gpus.csv`` + ``mig_profiles.csv`` and matching device names to it."""

from __future__ import annotations

import csv
import math
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from gpuplace.errors import InvalidInput, UnknownName
from gpuplace.types import GpuSpec, MigProfile

DATA_DIR = Path(__file__).parent / "data"
GPU_CATALOG_ENV = "GPUPLACE_GPU_CATALOG"

GPU_COLUMNS: tuple[str, ...] = (
    "name",
    "aliases",
    "architecture",
    "compute_capability",
    "memory_gib",
    "hbm_bandwidth_gbps",
    "bf16_tflops",
    "fp16_tflops",
    "fp8_tflops",
    "pcie_gen",
    "pcie_lanes",
    "nvlink_gbps",
    "nvlink_domain_gpus",
    "form_factor",
    "compute_slices",
    "memory_slices",
    "price_usd_per_hour",
    "spec_source",
    "price_source",
)
MIG_COLUMNS: tuple[str, ...] = (
    "gpu",
    "profile",
    "memory_gib",
    "compute_slices",
    "memory_slices",
    "max_instances",
)
# Columns a user's catalog may omit (added in catalog 2026.12.0): no FP8 tensor cores; the NVLink domain
# derived from the form factor (GpuSpec.nvlink_domain)
OPTIONAL_GPU_COLUMNS: Mapping[str, str] = {"fp8_tflops": "0", "nvlink_domain_gpus": "0"}
FORM_FACTORS: tuple[str, ...] = ("sxm2", "sxm4", "sxm5", "sxm6", "superchip", "pcie")
_MIG_NAME = re.compile(r"^(\d)g\.(\d+)gb$")
_FORM_WORD = re.compile(r"^(sxm\d*|pcie|nvl\d*)$")  # a form factor, as a device name spells it


def _read_version() -> str:
    meta = yaml.safe_load((DATA_DIR / "catalog.yaml").read_text())
    return str(meta["version"])


CATALOG_VERSION = _read_version()


def normalize_gpu_name(name: str) -> str:
    """Fold the spellings of one GPU name (torch, nvidia-smi, GFD labels) to one key."""
    return re.sub(r"[\s_\-]+", " ", name.strip().lower())


@dataclass(frozen=True, slots=True)
class GpuCatalog:
    """An immutable, queryable set of :class:`GpuSpec` values."""

    version: str
    gpus: Mapping[str, GpuSpec]
    source: str

    def __iter__(self) -> Iterator[GpuSpec]:
        return iter(self.gpus.values())

    def __len__(self) -> int:
        return len(self.gpus)

    def names(self) -> tuple[str, ...]:
        return tuple(self.gpus)

    def get(self, name: str, *, field: str = "gpu") -> GpuSpec:
        """The entry for a catalog name or alias; :class:`UnknownName` with suggestions otherwise."""
        found = self.find(name)
        if found is None:
            raise UnknownName(field, name, self.gpus)
        return found

    def find(self, name: str) -> GpuSpec | None:
        """The entry whose name or alias matches ``name`` (spelling-insensitive), or None."""
        key = normalize_gpu_name(name)
        for spec in self.gpus.values():
            if key == normalize_gpu_name(spec.name) or key in (normalize_gpu_name(a) for a in spec.aliases):
                return spec
        return None

    def match_device(self, device_name: str, memory_gib: float | None = None) -> GpuSpec | None:
        """Best catalog entry for a name as torch or NVML reports it, e.g. ``NVIDIA H100 80GB HBM3``.

        Exact alias matches win; otherwise the longest alias contained in the name, with memory
        (within 10%) breaking ties between variants such as A100 40GB and 80GB. A form factor the name
        states (``NVL``, ``PCIe``, ``SXM5``) must be the entry's: ``NVIDIA H200 NVL`` is not the SXM part
        that ``NVIDIA H200`` names, so without an NVL entry it matches nothing (None) rather than the
        SXM one, whose bandwidth, power and NVLink domain it does not have.
        """
        exact = self.find(device_name)
        if exact is not None:
            return exact
        key = normalize_gpu_name(device_name)
        stated = {w for w in key.split() if _FORM_WORD.match(w)}
        best: tuple[int, GpuSpec] | None = None
        for spec in self.gpus.values():
            if not stated <= {w for a in (spec.name, *spec.aliases) for w in normalize_gpu_name(a).split()}:
                continue  # the name states a form factor this entry is not
            for alias in (spec.name, *spec.aliases):
                a = normalize_gpu_name(alias)
                if len(a) < 2 or not re.search(rf"(^|\s){re.escape(a)}($|\s)", key):
                    continue
                if memory_gib is not None and abs(spec.memory_gib - memory_gib) > 0.1 * spec.memory_gib:
                    continue
                if best is None or len(a) > best[0]:
                    best = (len(a), spec)
        return best[1] if best else None


def _check_width(row: Mapping[str | None, object], path: Path, line: int, columns: int) -> None:
    """Reject a row with missing or extra cells (csv.DictReader fills with None / collects under None).

    An unquoted comma in a source note shifts every later cell, so the row is refused as a whole.
    """
    if None in row or None in row.values():
        cells = sum(1 for k, v in row.items() if k is not None and v is not None)
        extra = row.get(None)
        cells += len(extra) if isinstance(extra, list) else 0
        raise InvalidInput(
            f"{path.name}:{line}",
            cells,
            f"has {cells} cells but the header has {columns}",
            "Give every row one cell per column; quote cells that contain commas",
        )


def _number(row: Mapping[str, str], column: str, path: Path, line: int, kind: type = float) -> float:
    raw = row.get(column, "")
    try:
        value = kind(raw)
    except ValueError:
        raise InvalidInput(
            f"{path.name}:{line}:{column}", raw, f"is not a {kind.__name__}", "Fix that cell"
        ) from None
    if not math.isfinite(value):
        raise InvalidInput(f"{path.name}:{line}:{column}", raw, "is not a finite number", "Fix that cell")
    if value < 0:
        raise InvalidInput(f"{path.name}:{line}:{column}", raw, "must not be negative", "Fix that cell")
    return float(value)


def _read_mig(path: Path) -> dict[str, list[MigProfile]]:
    by_gpu: dict[str, list[MigProfile]] = {}
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        missing = set(MIG_COLUMNS) - set(reader.fieldnames or ())
        if missing:
            raise InvalidInput(
                f"{path.name}:columns", sorted(missing), "missing", "Add them (docs/catalog.md)"
            )
        for line, row in enumerate(reader, start=2):
            _check_width(row, path, line, len(reader.fieldnames or ()))
            if not _MIG_NAME.match(row["profile"]):
                raise InvalidInput(
                    f"{path.name}:{line}:profile",
                    row["profile"],
                    "is not a MIG profile name",
                    "Use <g>g.<mem>gb",
                )
            by_gpu.setdefault(row["gpu"], []).append(
                MigProfile(
                    name=row["profile"],
                    memory_gib=_number(row, "memory_gib", path, line),
                    compute_slices=int(_number(row, "compute_slices", path, line, int)),
                    memory_slices=int(_number(row, "memory_slices", path, line, int)),
                    max_instances=int(_number(row, "max_instances", path, line, int)),
                )
            )
    return by_gpu


def load_gpu_catalog(
    path: str | os.PathLike[str] | None = None, mig_path: str | os.PathLike[str] | None = None
) -> GpuCatalog:
    """Read the GPU catalog: ``path``, else ``$GPUPLACE_GPU_CATALOG``, else the bundled one.

    A user's catalog may omit MIG profiles; the bundled ``mig_profiles.csv`` is used for its GPUs.
    """
    chosen = Path(path or os.environ.get(GPU_CATALOG_ENV) or DATA_DIR / "gpus.csv")
    if not chosen.is_file():
        raise InvalidInput(
            "gpu_catalog", str(chosen), "no such file", "Point it at a gpus.csv (docs/catalog.md)"
        )
    mig = _read_mig(Path(mig_path) if mig_path else DATA_DIR / "mig_profiles.csv")
    gpus: dict[str, GpuSpec] = {}
    with chosen.open(newline="") as f:
        reader = csv.DictReader(f)
        given = set(reader.fieldnames or ())
        missing = [c for c in GPU_COLUMNS if c not in given and c not in OPTIONAL_GPU_COLUMNS]
        if missing:
            raise InvalidInput(f"{chosen.name}:columns", missing, "missing", "Add them (docs/catalog.md)")
        for line, row in enumerate(reader, start=2):
            _check_width(row, chosen, line, len(reader.fieldnames or ()))
            row = {**OPTIONAL_GPU_COLUMNS, **row}
            name = row["name"].strip()
            if not name:
                raise InvalidInput(f"{chosen.name}:{line}:name", name, "is empty", "Name every GPU")
            if name in gpus:
                raise InvalidInput(
                    f"{chosen.name}:{line}:name", name, "is listed twice", "Keep one row per GPU"
                )
            if row["form_factor"] not in FORM_FACTORS:
                raise InvalidInput(
                    f"{chosen.name}:{line}:form_factor",
                    row["form_factor"],
                    "unknown",
                    f"Use {'|'.join(FORM_FACTORS)}",
                )
            gpus[name] = GpuSpec(
                name=name,
                aliases=tuple(a.strip() for a in row["aliases"].split("|") if a.strip()),
                architecture=row["architecture"],
                compute_capability=row["compute_capability"],
                memory_gib=_number(row, "memory_gib", chosen, line),
                hbm_bandwidth_gbps=_number(row, "hbm_bandwidth_gbps", chosen, line),
                bf16_tflops=_number(row, "bf16_tflops", chosen, line),
                fp16_tflops=_number(row, "fp16_tflops", chosen, line),
                fp8_tflops=_number(row, "fp8_tflops", chosen, line),
                pcie_gen=int(_number(row, "pcie_gen", chosen, line, int)),
                pcie_lanes=int(_number(row, "pcie_lanes", chosen, line, int)),
                nvlink_gbps=_number(row, "nvlink_gbps", chosen, line),
                nvlink_domain_gpus=int(_number(row, "nvlink_domain_gpus", chosen, line, int)),
                form_factor=row["form_factor"],
                price_usd_per_hour=_number(row, "price_usd_per_hour", chosen, line),
                compute_slices=int(_number(row, "compute_slices", chosen, line, int)),
                memory_slices=int(_number(row, "memory_slices", chosen, line, int)),
                mig_profiles=tuple(mig.get(name, ())),
            )
    unknown_mig = sorted(set(mig) - set(gpus))
    if unknown_mig and path is None and mig_path is None and chosen == DATA_DIR / "gpus.csv":
        raise InvalidInput("mig_profiles.csv:gpu", unknown_mig, "not in gpus.csv", "Fix the GPU name")
    return GpuCatalog(version=CATALOG_VERSION, gpus=gpus, source=str(chosen))
