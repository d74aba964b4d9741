"""A load test's files: ``records.parquet`` and ``records.jsonl`` (one row per request), ``report.json``
(the :class:`LatencyReport`, seconds, with the measured-vs-predicted comparison) and ``summary.md``.

The one module that writes and reads them; the comparison and the tracker read through it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gpuplace.errors import InvalidInput
from gpuplace.loadtest.summary import format_markdown
from gpuplace.types.latency import PredictedVsMeasured
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
    prediction: PredictedVsMeasured | None,
    notes: Sequence[str] = (),
) -> None:
    out.mkdir(parents=True, exist_ok=True)
    write_records(records, out / RECORDS_PARQUET, out / RECORDS_JSONL)
    data = report.to_json_dict()
    # the rows people and dashboards read ({} when the plan's prediction is for another device), and the
    # whole prediction beside the measurement, which read_prediction reads back
    data["predicted_vs_measured"] = json_clean(prediction.rows() if prediction is not None else {})
    data["prediction"] = prediction.to_json_dict() if prediction is not None else None
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


def _is_parquet(p: Path) -> bool:
    if p.suffix == ".parquet":
        return True
    if not p.is_file():
        return False
    with p.open("rb") as f:
        return f.read(4) == b"PAR1"


def read_records(path: str | Path) -> list[RequestResult]:
    """Records from ``records.jsonl`` or ``records.parquet`` (a KFP output file, unnamed, by its magic)."""
    p = Path(path)
    if _is_parquet(p):
        import pyarrow.parquet as pq

        rows = pq.read_table(p).to_pylist()
    else:
        rows = [json.loads(line) for line in p.read_text().splitlines() if line.strip()]
    return [RequestResult.from_json_dict(row) for row in rows]


def read_report(path: str | Path, field: str = "report") -> LatencyReport:
    """``report.json`` of a load test, given as the file or its output directory (its prediction not read)."""
    p, data = _load_json(path, field)
    with _invalid_report(field, p):
        return LatencyReport.from_json_dict(data)


def read_prediction(path: str | Path, field: str = "report") -> PredictedVsMeasured | None:
    """The plan's prediction beside the measurement of a ``report.json``; None when the prediction was
    for another device than the one measured (or the plan had none). A report written before it held the
    whole prediction gives its predicted medians and 99th percentiles."""
    return read_report_and_prediction(path, field)[1]


def read_report_and_prediction(
    path: str | Path, field: str = "report"
) -> tuple[LatencyReport, PredictedVsMeasured | None]:
    """A ``report.json`` read once: the load test's report and the prediction beside it
    (:func:`read_report`, :func:`read_prediction`)."""
    p, data = _load_json(path, field)
    with _invalid_report(field, p):
        report = LatencyReport.from_json_dict(data)
        if data.get("prediction"):
            return report, PredictedVsMeasured.from_json_dict(data["prediction"])
        rows = data.get("predicted_vs_measured") or {}
        return report, (PredictedVsMeasured.from_rows(rows, report) if rows else None)


def _load_json(path: str | Path, field: str) -> tuple[Path, Any]:
    """The parsed ``report.json`` (given as the file or its folder), a missing or broken file refused by
    ``field``."""
    p = Path(path)
    if p.is_dir():
        p = p / REPORT_FILE
    try:
        return p, json.loads(p.read_text())
    except (FileNotFoundError, IsADirectoryError):
        raise InvalidInput(field, str(p), "no such file", "Give a gpuplace loadtest --out") from None
    except json.JSONDecodeError as e:
        raise InvalidInput(field, str(p), f"is not JSON ({e.msg} at line {e.lineno})", "") from None


@contextmanager
def _invalid_report(field: str, p: Path) -> Iterator[None]:
    """A parsed file that is not a report (or a prediction) refused by ``field``."""
    try:
        yield
    except (AttributeError, KeyError, TypeError, ValueError) as e:
        raise InvalidInput(field, str(p), f"is not a valid report.json ({e})", "") from None
