"""The Kubeflow UI's view of gpuplace's outputs, rendered in headless Chromium from a real run.

The outputs are those a real run of ``orchestration_comparison`` wrote (``gpuplace run --compare``: every
component under kfp's local runner, both paths serving the local model): ``compare_paths``'s
``report_md``, ``report_html`` and ``metrics``, and the load tests' ``summary`` Markdown and ``metrics``
(``load_test``, the component llm_placement runs too, and ``serve_and_load_test``). The KFP UI itself
needs a KFP backend, which cannot run here, so its viewers are reproduced: its Markdown viewer is the
one the UI uses, markdown-to-jsx under React 16 (kubeflow/pipelines ``frontend/src/components/viewers/
MarkdownViewer.tsx``; the npm packages are installed by tests/browser/kfp_markdown.sh), its HTML viewer
the sandboxed ``srcdoc`` iframe it uses (scripts allowed, no same origin). What the test checks of those
is what the browser rendered: tables are tables (no line of literal pipes), the HTML report shows every plot
from inside the page, asks nothing of the network and throws no script error.

A Metrics output is **not rendered**: the UI's scalar table (``MetricsVisualizations.tsx``,
``ScalarMetricsSection``: a ``PagedTable`` of every custom property but ``display_name``, each value as
``JSON.stringify`` writes it) is part of the KFP frontend, which npm does not publish, and a table this test
wrote itself would check the test. What is checked is the artifact's metadata, which that table shows
row by row: the measured figures under names with their units, each a finite number (``JSON.stringify``
writes NaN and infinities as ``null``), none named ``display_name`` (the table leaves that key out). Not
checked here: the table's layout, and that the KFP launcher sets the ``display_name`` without which the UI
shows no Metrics artifact at all (a KFP backend's part).

Screenshots go to ``$GPUPLACE_SCREENSHOTS`` (``make screenshots``: docs/images), else to the test's folder.
"""

from __future__ import annotations

import contextlib
import html
import io
import json
import math
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpuplace.cli import main
from tests.support.browser import REPO, Page, chromium

pytestmark = [pytest.mark.integration, pytest.mark.browser]

STYLE = (
    "body{font-family:sans-serif;margin:1em}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
    "padding:2px 6px}.markdown-viewer h1,.markdown-viewer h2{border-bottom:1px solid #eee}"
)
HEAD = f"<!doctype html><html><head><meta charset='utf-8'><style>{STYLE}</style></head>"
# The endings a metric name of gpuplace's KFP Metrics outputs may have: its unit, or what it counts.
UNITS = (
    "_ms",
    "_s",
    "_rps",
    "_tps",
    "_usd_per_month",
    "_ci_low",
    "_ci_high",
    "_score",
    "_margin",
    "beyond_noise",
    "_runs",
    "_prediction_error",
    "slo_attainment",
    "roi_multiple",
    "requests",
    "completed",
    "failed",
    "peak_concurrency",
)


def shots(tmp: Path) -> Path:
    return (
        Path(os.environ["GPUPLACE_SCREENSHOTS"]).resolve() if os.environ.get("GPUPLACE_SCREENSHOTS") else tmp
    )


@dataclass(frozen=True)
class Ran:
    """The task outputs of one real ``gpuplace run --compare``."""

    outputs: Path  # the pipeline run's folder of task outputs
    printed: str

    def one(self, pattern: str) -> Path:
        found = sorted(p for p in self.outputs.rglob(pattern) if p.is_file())
        assert found, f"no output {pattern} in {self.outputs}"
        return found[0]

    def metrics(self, task: str) -> dict[str, float]:
        """What the KFP UI shows of a task's Metrics output: the artifact's metadata."""
        data = json.loads(self.one(f"{task}/executor_output.json").read_text())
        return dict(data["artifacts"]["metrics"]["artifacts"][0]["metadata"])


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Ran:
    root = tmp_path_factory.mktemp("kfp-outputs")
    argv = ["run", "--compare", "--workdir", str(root / "runs"), "--device", "cpu", "--max-requests", "8"]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(argv) == 0
    run_dir = next((root / "runs").iterdir())
    return Ran(next((run_dir / "kfp").iterdir()), buf.getvalue())


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Page]:
    with chromium(tmp_path_factory.mktemp("chromium")) as p:
        yield p


def _kfp_markdown_scripts() -> str:
    """React 16, ReactDOM, prop-types and markdown-to-jsx as the KFP UI bundles them, inlined as scripts
    (the CommonJS builds wrapped so that their requires resolve to the globals)."""
    out = subprocess.run(
        ["bash", str(REPO / "tests" / "browser" / "kfp_markdown.sh")],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise RuntimeError(f"the KFP UI's Markdown renderer could not be installed:\n{out.stderr[-2000:]}")
    modules = Path(out.stdout.strip().splitlines()[-1]) / "node_modules"
    umd = [
        modules / "react/umd/react.production.min.js",
        modules / "react-dom/umd/react-dom.production.min.js",
        modules / "prop-types/prop-types.min.js",
    ]
    cjs = {"unquote": modules / "unquote/index.js", "MarkdownToJSX": modules / "markdown-to-jsx/dist/cjs.js"}
    # process.env.NODE_ENV is what the UI's webpack build substitutes in markdown-to-jsx's code
    scripts = ["window.process = {env: {NODE_ENV: 'production'}};", *(f.read_text() for f in umd)]
    for name, f in cjs.items():
        scripts.append(
            "(function(){var module={exports:{}},exports=module.exports;"
            "var require=function(n){return {react:window.React,'prop-types':window.PropTypes,"
            "unquote:window.unquote}[n]};\n"
            f"{f.read_text()}\n;window[{json.dumps(name)}]=module.exports;}})();"
        )
    safe = [s.replace("</script", "<\\/script") for s in scripts]  # a closing tag inside would end it
    return "".join(f"<script>{s}</script>" for s in safe)


def markdown_page(markdown: str, out: Path) -> Path:
    """A Markdown output as the KFP UI's MarkdownViewer renders it: markdown-to-jsx in a div of its class."""
    render = (
        "<script>ReactDOM.render(React.createElement('div',{className:'markdown-viewer'},"
        f"React.createElement(MarkdownToJSX.default,null,{json.dumps(markdown)})),"
        "document.getElementById('root'));window.rendered=true;</script>"
    )
    out.write_text(f"{HEAD}<body><div id='root'></div>{_kfp_markdown_scripts()}{render}</body></html>")
    return out


def html_viewer_page(report_html: str, out: Path) -> Path:
    """An HTML output as the KFP UI's HTML viewer shows it: a sandboxed iframe of the file's text."""
    out.write_text(
        "<!doctype html><html><head><meta charset='utf-8'></head><body style='margin:0'>"
        "<iframe sandbox='allow-scripts' onload='window.loaded = true' "
        "style='border:0;width:100%;height:2400px' "
        f'srcdoc="{html.escape(report_html)}">'
        "</iframe></body></html>"
    )
    return out


def _open(page: Page, file: Path) -> str:
    page.exceptions.clear()
    page.requests.clear()
    page.console_errors.clear()
    page.goto(file.as_uri())
    return page.wait_for(lambda t: len(t) > 20, what=file.name)


def _no_literal_tables(text: str) -> None:
    piped = [line for line in text.splitlines() if line.strip().startswith("|")]
    assert not piped, f"Markdown tables rendered as text: {piped[:3]}"


def test_markdown_outputs_render_their_tables(ran: Ran, page: Page, tmp_path: Path) -> None:
    cases = {
        "kfp-compare-report-md": ran.one("compare-paths/report_md").read_text(),
        "kfp-loadtest-summary-md": ran.one("load-test/summary").read_text(),
        "kfp-serve-and-load-test-summary-md": ran.one("serve-and-load-test/summary").read_text(),
    }
    for name, markdown in cases.items():
        assert "|---" in markdown or "| ---" in markdown, name  # the source has tables
        text = _open(page, markdown_page(markdown, tmp_path / f"{name}.html"))
        page.wait_js("window.rendered === true")
        text = page.text()
        _no_literal_tables(text)
        tables = page.evaluate("document.querySelectorAll('.markdown-viewer table').length")
        expected = sum(1 for line in markdown.splitlines() if line.replace(" ", "").startswith("|--"))
        assert tables == expected, f"{name}: {tables} tables rendered of {expected}"
        assert page.evaluate("document.querySelectorAll('.markdown-viewer td').length") > 0
        assert not page.exceptions and not page.console_errors, (page.exceptions, page.console_errors)
        page.screenshot(shots(tmp_path) / f"{name}.png")
    verdict = json.loads(ran.one("compare-paths/executor_output.json").read_text())
    said = verdict["artifacts"]["comparison"]["artifacts"][0]["metadata"]["verdict"]
    assert said in cases["kfp-compare-report-md"].replace("**", "")  # the verdict, with its interval
    assert said in ran.printed  # as the CLI said it


def test_html_report_is_self_contained(ran: Ran, page: Page, tmp_path: Path) -> None:
    report = ran.one("compare-paths/report_html")
    plain = tmp_path / "report.html"  # KFP's output file has no extension; the browser needs one
    plain.write_text(report.read_text())
    text = _open(page, plain)
    images = page.evaluate("document.images.length")
    assert images >= 2, f"{images} plots in the report"
    loaded = page.evaluate("[...document.images].filter(i => i.complete && i.naturalWidth > 0).length")
    assert loaded == images
    assert page.evaluate("[...document.images].every(i => i.src.startsWith('data:image/png;base64,'))")
    assert page.evaluate("document.querySelectorAll('table').length") >= 2
    _no_literal_tables(text)
    leaving = [u for u in page.requests if not u.startswith("data:") and u != plain.as_uri()]
    assert not leaving, f"the report asked for {leaving}"
    assert not page.exceptions and not page.console_errors
    # as the KFP UI shows it: inside its sandboxed iframe
    page.requests.clear()
    page.goto(html_viewer_page(report.read_text(), tmp_path / "viewer.html").as_uri())
    page.wait_js("window.loaded === true")
    assert [u for u in page.requests if not u.startswith(("data:", "file:", "about:"))] == []
    assert not page.exceptions
    page.screenshot(shots(tmp_path) / "kfp-compare-report-html.png")


def test_metrics_outputs_carry_measured_figures_with_units(ran: Ran) -> None:
    """The Metrics outputs' metadata, which the KFP UI's scalar table shows row by row (not rendered here:
    the module docstring says why and what that leaves unchecked)."""
    from gpuplace.steps.compare import read_comparison

    comparison = read_comparison(ran.one("compare-paths/comparison"))
    native = comparison.path("native")
    metrics = ran.metrics("compare-paths")
    assert metrics["native_tpot_p99_ms"] == pytest.approx(native.tpot.p99 * 1e3)
    assert metrics["native_ttft_p99_ms"] == pytest.approx(native.ttft.p99 * 1e3)
    low, high = comparison.score.intervals["tpot_p99"]["native"]
    assert metrics["native_tpot_p99_ms_ci_low"] == pytest.approx(low * 1e3)
    assert metrics["native_tpot_p99_ms_ci_high"] == pytest.approx(high * 1e3)
    assert metrics["beyond_noise"] in (0, 1) and "score_margin_ci_low" in metrics
    loadtest = ran.metrics("load-test")
    report = json.loads(ran.one("load-test/report").read_text())
    assert loadtest, "the load test's Metrics output is empty"
    for name, value in {**metrics, **loadtest}.items():
        assert name.endswith(UNITS), f"metric {name!r} does not say its unit"
        # the KFP UI's scalar table shows JSON.stringify(value): NaN and infinities would read "null"
        assert isinstance(value, int | float) and math.isfinite(value), (name, value)
        assert name != "display_name", "the KFP UI's scalar table leaves display_name out"
    assert any(k.startswith("tpot") or "tpot" in k for k in loadtest), sorted(loadtest)
    assert report["completed"] >= 1
