"""The profile on disk: one Parquet table (a row per sweep point) that also carries its context.

Columns: the sweep point, ``ok``/``error``, every distribution flattened as ``<metric>_<stat>``
(seconds), memory, roofline and MBU/MFU columns. The Parquet schema metadata key ``gpuplace``
holds the model architecture, the device record, the bandwidth used and versions, so one file is
enough for the planner; :func:`write_device_json` writes the device record on its own too.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import pandas as pd

from gpuplace.errors import InvalidInput
from gpuplace.types import DeviceInfo, Distribution, LatencyProfile, ModelArch, PointResult, SweepPoint

METADATA_KEY = b"gpuplace"
DISTRIBUTIONS: tuple[str, ...] = ("prefill", "decode_step", "tpot", "e2e")
SCALARS: tuple[str, ...] = (
    "peak_memory_gib",
    "device_memory_used_gib",
    "decode_bytes_per_step",
    "decode_floor_s",
    "mbu",
    "prefill_flops",
    "mfu",
    "decode_tokens_per_s",
)
# Distribution fields are seconds; name the flattened columns so their unit is in the name.
_DIST_PREFIX = {"prefill": "prefill_s", "decode_step": "decode_step_s", "tpot": "tpot_s", "e2e": "e2e_s"}


def profile_to_frame(profile: LatencyProfile) -> pd.DataFrame:
    rows: list[dict[str, Any]] = []
    for r in profile.results:
        row: dict[str, Any] = asdict(r.point)
        row.update(ok=r.ok, error=r.error, repeats=r.repeats)
        for name in DISTRIBUTIONS:
            row.update(getattr(r, name).flat(_DIST_PREFIX[name]))
        for name in SCALARS:
            row[name] = getattr(r, name)
        rows.append(row)
    return pd.DataFrame(rows)


def _metadata(profile: LatencyProfile) -> dict[str, Any]:
    return {
        "schema": 1,
        "model": asdict(profile.model),
        "device": profile.device.to_json_dict(),
        "memory_bandwidth_gbps": profile.memory_bandwidth_gbps,
        "bandwidth_source": profile.bandwidth_source,
        "peak_tflops": dict(profile.peak_tflops),
        "gpuplace_version": profile.gpuplace_version,
        "created_at": profile.created_at,
        "started_at": profile.started_at,
    }


def save_profile(profile: LatencyProfile, path: str | os.PathLike[str]) -> Path:
    """Write the Parquet file atomically (a half-written profile is never left behind)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pandas(profile_to_frame(profile), preserve_index=False)
    meta = dict(table.schema.metadata or {})
    meta[METADATA_KEY] = json.dumps(_metadata(profile), allow_nan=True).encode()
    table = table.replace_schema_metadata(meta)
    tmp = out.with_name(out.name + ".tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, out)
    return out


def write_device_json(profile: LatencyProfile, path: str | os.PathLike[str]) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(profile.device.to_json_dict(), indent=2) + "\n")
    return out


def _nan(v: Any) -> float:
    return math.nan if v is None else float(v)


def load_profile(path: str | os.PathLike[str]) -> LatencyProfile:
    import pyarrow.parquet as pq

    p = Path(path)
    if not p.is_file():
        raise InvalidInput("profile", str(p), "no such file", "Run gpuplace profile --out <file> first")
    try:
        table = pq.read_table(p)
    except Exception as e:  # pyarrow raises several unrelated types for a non-Parquet file
        raise InvalidInput(
            "profile", str(p), f"is not a Parquet file ({e})", "Give the file gpuplace profile wrote"
        ) from None
    raw = (table.schema.metadata or {}).get(METADATA_KEY)
    if raw is None:
        raise InvalidInput(
            "profile", str(p), "has no gpuplace metadata", "Give the file gpuplace profile wrote"
        )
    meta = json.loads(raw)
    frame = table.to_pandas()
    results = []
    for row in frame.to_dict("records"):
        point = SweepPoint(**{f.name: row[f.name] for f in fields(SweepPoint)})
        kwargs: dict[str, Any] = {
            name: Distribution.from_flat(row, _DIST_PREFIX[name]) for name in DISTRIBUTIONS
        }
        kwargs.update({name: _nan(row[name]) for name in SCALARS})
        results.append(
            PointResult(
                point=point,
                ok=bool(row["ok"]),
                error=str(row["error"]),
                repeats=int(row["repeats"]),
                **kwargs,
            )
        )
    return LatencyProfile(
        model=ModelArch(**meta["model"]),
        device=DeviceInfo.from_json_dict(meta["device"]),
        results=tuple(results),
        memory_bandwidth_gbps=float(meta["memory_bandwidth_gbps"]),
        bandwidth_source=meta["bandwidth_source"],
        peak_tflops=meta.get("peak_tflops", {}),
        gpuplace_version=meta.get("gpuplace_version", ""),
        created_at=meta.get("created_at", ""),
        started_at=meta.get("started_at", ""),
    )
