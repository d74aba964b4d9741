"""The load test's files when nothing completed: still valid JSON, failures counted."""

from __future__ import annotations

import json
from pathlib import Path

from gpuplace.loadtest.io import read_prediction, read_records, read_report, write_outputs
from gpuplace.loadtest.metrics import summarize
from gpuplace.types.latency import PredictedVsMeasured
from gpuplace.types.loadtest import RequestResult
from tests.support.plans import predicted


def test_all_failed_run_writes_standard_json(tmp_path: Path) -> None:
    failed = [
        RequestResult(index=i, scheduled_s=0.0, start_s=0.0, prompt_tokens=8, max_tokens=4, success=False)
        for i in range(3)
    ]
    report = summarize(failed, duration_s=1.0)
    prediction = PredictedVsMeasured.of(predicted((0.05, 0.1), (0.01, 0.02)), report)
    write_outputs(tmp_path, failed, report, prediction)
    text = (tmp_path / "report.json").read_text()
    assert "NaN" not in text
    data = json.loads(text)
    assert data["failed"] == 3 and data["completed"] == 0
    measured = [m["measured_s"] for m in data["predicted_vs_measured"].values()]
    assert measured and all(v is None for v in measured)
    # The one reader gives back what the one writer wrote.
    assert read_report(tmp_path).failed == 3
    assert read_records(tmp_path / "records.jsonl") == failed
    assert read_records(tmp_path / "records.parquet") == failed
    assert read_prediction(tmp_path) == prediction


def test_the_report_is_read_without_its_prediction(tmp_path: Path) -> None:
    """``read_report`` reads the report only: a broken prediction block beside it is refused where the
    prediction is read, not where only the report is wanted."""
    import pytest

    from gpuplace.errors import InvalidInput
    from gpuplace.loadtest.io import read_report_and_prediction

    done = [
        RequestResult(index=0, scheduled_s=0.0, start_s=0.0, prompt_tokens=8, max_tokens=4, success=False)
    ]
    report = summarize(done, duration_s=1.0)
    write_outputs(
        tmp_path, done, report, PredictedVsMeasured.of(predicted((0.05, 0.1), (0.01, 0.02)), report)
    )
    data = json.loads((tmp_path / "report.json").read_text())
    data["prediction"] = {"not": "a prediction"}
    (tmp_path / "report.json").write_text(json.dumps(data))
    assert read_report(tmp_path).failed == 1
    with pytest.raises(InvalidInput, match=r"report=.*is not a valid report\.json"):
        read_report_and_prediction(tmp_path)
    (tmp_path / "report.json").write_text("{")
    with pytest.raises(InvalidInput, match="is not JSON"):
        read_report(tmp_path)
