"""A load test's files: ``records.parquet`` and ``records.jsonl`` (one row per request), ``report.json``
(the :class:`LatencyReport`, seconds, with the measured-vs-predicted comparison) and ``summary.md``.

The one module that writes and reads them; the comparison and the tracker read through it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gpuplace.errors import InvalidInput
from gpuplace.loadtest.summary import format_markdown
from gpuplace.types.loadtest import LatencyReport, RequestResult
from gpuplace.types.stats import json_clean

REPORT_FILE = "report.json"
RECORDS_PARQUET = "records.parquet"
RECORDS_JSONL = "records.jsonl"
SUMMARY_FILE = "summary.md"


def write_outputs(
    out: Path,
    records: Sequence[RequestResult],
    report: LatencyReport,
    prediction: Mapping[str, Any],
    notes: Sequence[str] = (),
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    write_records(records, out / RECORDS_PARQUET, out / RECORDS_JSONL)
    data = report.to_json_dict()
    data["predicted_vs_measured"] = json_clean(dict(prediction))  # NaN when nothing completed
    data["notes"] = list(notes)
    (out / REPORT_FILE).write_text(json.dumps(data, indent=2, allow_nan=False) + "\n")
    (out / SUMMARY_FILE).write_text(format_markdown(report, prediction, notes))


def write_records(records: Sequence[RequestResult], parquet: Path, jsonl: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [r.to_json_dict() for r in records]
    with jsonl.open("w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    schema = pa.schema(
        [
            ("index", pa.int64()),
            ("scheduled_s", pa.float64()),
            ("start_s", pa.float64()),
            ("prompt_tokens", pa.int64()),
            ("max_tokens", pa.int64()),
            ("success", pa.bool_()),
            ("ttft_s", pa.float64()),
            ("e2e_s", pa.float64()),
            ("chunk_times_s", pa.list_(pa.float64())),
            ("output_tokens", pa.int64()),
            ("output_tokens_source", pa.string()),
            ("server_prompt_tokens", pa.int64()),
            ("status", pa.int64()),
            ("error_kind", pa.string()),
            ("error", pa.string()),
        ]
    )
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), parquet)


def read_records(path: str | Path) -> list[RequestResult]:
    """Records from ``records.jsonl`` or ``records.parquet``."""
    p = Path(path)
    if p.suffix == ".parquet":
        import pyarrow.parquet as pq

        rows = pq.read_table(p).to_pylist()
    else:
        rows = [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
    return [RequestResult.from_json_dict(row) for row in rows]


def read_report(path: str | Path, field: str = "report") -> LatencyReport:
    """``report.json`` of a load test, given as the file or its output directory."""
    p = Path(path)
    if p.is_dir():
        p = p / REPORT_FILE
    try:
        return LatencyReport.from_json_dict(json.loads(p.read_text()))
    except (FileNotFoundError, IsADirectoryError):
        raise InvalidInput(field, str(p), "no such file", "Give a gpuplace loadtest --out") from None
    except json.JSONDecodeError as e:
        raise InvalidInput(field, str(p), f"is not JSON ({e.msg} at line {e.lineno})", "") from None
    except (TypeError, KeyError, AttributeError, ValueError) as e:
        raise InvalidInput(field, str(p), f"is not a valid report.json ({e})", "") from None


def read_prediction(path: str | Path, field: str = "report") -> dict[str, dict[str, float]]:
    """The predicted-vs-measured rows of a ``report.json`` (``{metric: {predicted_s, measured_s,
    error}}``); empty when the plan's prediction was for another device than the one measured."""
    p = Path(path)
    if p.is_dir():
        p = p / REPORT_FILE
    try:
        rows = json.loads(p.read_text()).get("predicted_vs_measured") or {}
    except (FileNotFoundError, IsADirectoryError):
        raise InvalidInput(field, str(p), "no such file", "Give a gpuplace loadtest --out") from None
    except (json.JSONDecodeError, AttributeError) as e:
        raise InvalidInput(field, str(p), f"is not a valid report.json ({e})", "") from None
    return {
        str(k): {
            n: math.nan if v.get(n) is None else float(v[n]) for n in ("predicted_s", "measured_s", "error")
        }
        for k, v in rows.items()
    }
