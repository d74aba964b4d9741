"""MLflow as a reviewer sees it: a real ``mlflow server``, the main job run against it, and its pages
opened in headless Chromium (Debian's package, installed by tests/browser/chromium.sh).

What is checked is the rendered text of the pages (``innerText``), not the API: the experiment's page
lists the pipeline run, the run's page shows its params (the pipeline's inputs and the chosen shape), its
metrics and its description. The same checks are shown to fail on a run logged without params and on an
experiment opened without the Model training view (MLflow 3.17's GenAI overview, "No data available").
Run times are read back through the API: the parent run spans the steps' recorded times.

Screenshots go to ``$GPUPLACE_SCREENSHOTS`` (``make screenshots`` sets it to docs/images), else to the
test's temporary folder.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpuplace.cli import main
from gpuplace.tracking.server import LocalServer, start_local_server
from tests.support.browser import Page, chromium

pytestmark = [pytest.mark.integration, pytest.mark.browser]

RUN_NAME = "llm-placement"
ML_VIEW = "workflowType=machine_learning"


@dataclass(frozen=True)
class Logged:
    server: LocalServer
    workdir: Path
    output: str  # what `gpuplace run` printed


def shots(tmp: Path) -> Path:
    return (
        Path(os.environ["GPUPLACE_SCREENSHOTS"]).resolve() if os.environ.get("GPUPLACE_SCREENSHOTS") else tmp
    )


@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Logged]:
    """The main job (llm_placement on this machine) logged to a real MLflow server."""
    root = tmp_path_factory.mktemp("browser-mlflow")
    server = start_local_server(root / "mlflow")
    try:
        import contextlib
        import io

        buf = io.StringIO()
        argv = [
            "run",
            "--workdir",
            str(root / "runs"),
            "--device",
            "cpu",
            "--rate",
            "1",
            "--max-requests",
            "12",
        ]
        with contextlib.redirect_stdout(buf):
            assert main([*argv, "--mlflow-uri", server.uri]) == 0
        yield Logged(server, root, buf.getvalue())
    finally:
        server.stop()


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Page]:
    with chromium(tmp_path_factory.mktemp("chromium")) as p:
        yield p


def experiment_link(logged: Logged) -> str:
    """The link the main job printed for the run, as a reviewer would follow it."""
    found = re.findall(r"MLflow run page\s+(\S+)", logged.output)
    assert found, f"gpuplace run printed no link to the MLflow run:\n{logged.output[-2000:]}"
    return found[-1]


def check_experiment_page(text: str, run_name: str) -> None:
    """The experiment opens on its runs and lists the pipeline run (not an empty overview)."""
    if "No data available" in text or run_name not in text:
        raise AssertionError(
            f"the experiment opened on an empty view, not on its runs with {run_name!r}:\n{text[:1500]}"
        )


def count(text: str, section: str) -> int:
    m = re.search(rf"{section} \((\d+)\)", text)
    return int(m.group(1)) if m else 0


def check_run_page(text: str, expected_params: dict[str, str], expected_metrics: list[str]) -> None:
    """The run's page shows its params (with the expected values) and its metrics."""
    if "No parameters recorded" in text or count(text, "Parameters") == 0:
        raise AssertionError(f"the run's page shows no parameters:\n{text[:3000]}")
    lines = [line.strip() for line in text.splitlines()]
    for key, value in expected_params.items():
        at = [i for i, line in enumerate(lines) if line == key]
        if not at or all(value not in " ".join(lines[i + 1 : i + 3]) for i in at):
            raise AssertionError(f"param {key}={value!r} is not shown on the run's page:\n{text[:3000]}")
    if count(text, "Metrics") == 0:
        raise AssertionError(f"the run's page shows no metrics:\n{text[:3000]}")
    missing = [m for m in expected_metrics if m not in lines]
    if missing:
        raise AssertionError(f"metrics {missing} are not shown on the run's page:\n{text[:3000]}")


def _shoot(page: Page, path: Path) -> None:
    """A screenshot of what a reviewer sees, MLflow's assistant side panel closed (best effort)."""
    page.evaluate(
        "[...document.querySelectorAll('button')]"
        ".filter(b => /close/i.test(b.getAttribute('aria-label') || '')).forEach(b => b.click())"
    )
    page.screenshot(path)


def _open_run(page: Page, url: str) -> str:
    page.goto(url)
    return page.wait_for(lambda t: "Parameters (" in t and "Metrics (" in t, what="the run's page")


def _landed(page: Page, run_name: str = RUN_NAME) -> str:
    """The experiment page's text once MLflow has chosen its view: the runs, or the GenAI overview (3.17's
    "No data available", 3.18's "Send your first trace")."""
    return page.wait_for(
        lambda t: (
            (run_name in t or "No data available" in t or "Send your first trace" in t)
            and "Loading..." not in t
        ),
        what="the experiment's landing view",
    )


def test_experiment_page_lists_the_run(logged: Logged, page: Page, tmp_path: Path) -> None:
    """The experiment's page, from the link gpuplace printed (its run page's experiment, with the link's
    query as printed): MLflow must land on its runs, not on the GenAI overview."""
    run_url = experiment_link(logged)
    where, _, query = run_url.partition("?")
    page.goto(where.split("/runs/")[0] + (f"?{query}" if query else ""))
    check_experiment_page(_landed(page), RUN_NAME)
    _shoot(page, shots(tmp_path) / "mlflow-experiment.png")


def _experiment_row(name: str) -> str:
    """The experiment's row in MLflow's experiments list (its link is "#/experiments/<id>")."""
    return (
        f"[...document.querySelectorAll('a')].find(a => a.innerText.trim() === {json.dumps(name)} && "
        r"/^#\/experiments\/\d+$/.test(a.getAttribute('href') || ''))"
    )


TRAINING_RUNS = "[...document.querySelectorAll('a')].find(a => a.innerText.trim() === 'Training runs')"


def _click_experiment(page: Page, base: str, experiment: str = "gpuplace", run_name: str = RUN_NAME) -> str:
    """Open MLflow's experiments list and click the experiment, as a reviewer would."""
    row = _experiment_row(experiment)
    page.goto(f"{base}/#/experiments")
    page.wait_js(f"!!({row})")
    href = str(page.evaluate(f"{row}.getAttribute('href')"))
    page.evaluate(f"{row}.click()")
    there = f"location.hash === {json.dumps(href)} || /^[/?]/.test(location.hash.slice({len(href)}))"
    try:
        page.wait_js(f"location.hash.startsWith({json.dumps(href)}) && ({there})", timeout_s=20)
    except TimeoutError:  # the click reached the list before its handlers: follow the link as it would
        page.evaluate(f"location.hash = {json.dumps(href)}")
    return _landed(page, run_name)


def _runs_by_clicking(page: Page, base: str, experiment: str = "gpuplace", run_name: str = RUN_NAME) -> str:
    """From MLflow's experiments list to the experiment's runs table by clicks alone: the experiment's row,
    then, where MLflow lands on its GenAI overview, **Training runs** in the experiment's side bar. Raises
    AssertionError when the landing page offers no way to the runs (check_experiment_page's "empty view")."""
    text = _click_experiment(page, base, experiment, run_name)
    if run_name in text:
        return text  # the Model training view lands on the runs
    try:
        page.wait_js(f"!!({TRAINING_RUNS})", timeout_s=30)
    except TimeoutError:  # MLflow lists "Training runs" only for an experiment whose runs output a model
        check_experiment_page(page.text(), run_name)
        raise
    page.evaluate(f"{TRAINING_RUNS}.click()")
    return page.wait_for(lambda t: run_name in t or "No runs" in t, what="the experiment's training runs")


def test_from_the_experiments_list_a_reviewer_clicks_through_to_the_runs(logged: Logged, page: Page) -> None:
    """What MLflow 3.17.2's UI does when a reviewer clicks the experiment in its experiments list.

    Its landing hook (experiment page chunk, module 24546) takes the experiment's kind from the
    GenAI / Model training switch (module 31080: the ``workflowType`` URL parameter, else the browser's
    ``localStorage['mlflow.workflowType_v1']``, else GenAI), because the build hard-wires the switch on
    (module 89511, ``Z0 = () => true``); the ``mlflow.experimentKind`` tag gpuplace sets is read only when
    the switch is off. MLflow 3.18.0's bundle is the same (its landing is an onboarding page instead).
    So in a fresh browser the click opens the GenAI overview despite the tag — asserted here, so that an
    MLflow that honours the tag fails this test and docs/tracking.md gets updated. From there the
    experiment's side bar lists **Training runs** (module 44405), because the pipeline run records its
    placement as a LoggedModel output; one click on it shows the runs table. After one click on
    **Model training** (which MLflow keeps in localStorage) the experiment opens on its runs directly."""
    base = logged.server.uri
    page.goto(f"{base}/#/experiments")
    page.evaluate("localStorage.clear()")  # a reviewer's first visit
    # and a fresh load of the app: the page is the module's, and the earlier test opened the printed link
    # (``?workflowType=machine_learning``), a choice the running app may hold in memory past the clear
    page.goto("about:blank")
    with pytest.raises(AssertionError, match="empty view"):
        check_experiment_page(_click_experiment(page, base), RUN_NAME)
    page.goto("about:blank")
    check_experiment_page(_runs_by_clicking(page, base), RUN_NAME)
    page.goto(f"{base}/#/experiments")
    page.wait_for(lambda t: "Model training" in t, what="the GenAI / Model training switch")
    page.evaluate(
        "[...document.querySelectorAll('button,label,[role=radio],span')]"
        ".find(e => e.innerText && e.innerText.trim() === 'Model training').click()"
    )
    page.wait_js("localStorage.getItem('mlflow.workflowType_v1') === '\"machine_learning\"'")
    check_experiment_page(_click_experiment(page, base), RUN_NAME)
    page.evaluate("localStorage.clear()")
    page.goto("about:blank")  # the next page loads afresh, without the choice the app holds in memory


def test_run_page_shows_inputs_shape_metrics_and_description(
    logged: Logged, page: Page, tmp_path: Path
) -> None:
    text = _open_run(page, experiment_link(logged))
    chosen = re.search(r"chosen shape\s+(.+?)\s{3}", logged.output)
    assert chosen, logged.output
    check_run_page(
        text,
        {
            "model": "tiny",
            "inventory": "local",
            "chosen_shape": chosen.group(1).strip(),
            "chosen_kind": "whole",
            "rate_rps": "1",
            "slo_tpot_p99_ms": "50",
            "kfp_run_id": "",
        },
        ["native.ttft_p99_ms", "native.tpot_p99_ms"],
    )
    assert "Chosen shape" in text and "predicted" in text  # the description, rendered from Markdown
    _shoot(page, shots(tmp_path) / "mlflow-run.png")
    # the parameters and metrics, further down the page
    page.evaluate(
        "[...document.querySelectorAll('*')].find(e => e.innerText === 'Parameters (' + "
        "document.body.innerText.match(/Parameters \\((\\d+)\\)/)[1] + ')')?.scrollIntoView()"
    )
    _shoot(page, shots(tmp_path) / "mlflow-run-params.png")


def test_runs_span_the_steps_recorded_times(logged: Logged) -> None:
    from mlflow import MlflowClient

    client = MlflowClient(logged.server.uri)
    exp = client.get_experiment_by_name("gpuplace")
    assert exp is not None and exp.tags["mlflow.experimentKind"] == "custom_model_development"
    runs = client.search_runs([exp.experiment_id])
    parent = next(r for r in runs if r.info.run_name == RUN_NAME)
    children = {
        r.info.run_name: r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id
    }
    path = children["path: native"]
    profile = children["profile"]
    # the parent spans the profile's start to the load test's end; each child its own step
    assert parent.info.start_time == profile.info.start_time
    assert parent.info.end_time == path.info.end_time
    assert profile.info.end_time <= children["plan"].info.end_time <= path.info.start_time + 1000
    report_s = (path.info.end_time - path.info.start_time) / 1000
    assert report_s >= 12 / 1 * 0.5  # 12 requests at 1 req/s take ~12 s of load test alone


def test_the_checks_fail_on_no_params_and_on_an_empty_view(logged: Logged, page: Page) -> None:
    """A run logged without params, in an experiment opened without the Model training view, fails both
    checks: what the main job's run is checked against is what a reviewer would otherwise meet."""
    from mlflow import MlflowClient

    client = MlflowClient(logged.server.uri)
    exp_id = client.create_experiment("bare")
    run = client.create_run(exp_id, run_name="bare-run")
    client.log_metric(run.info.run_id, "x", 1.0)
    client.set_terminated(run.info.run_id)
    base = logged.server.uri
    page.goto(f"{base}/#/experiments")
    page.evaluate("localStorage.clear()")  # MLflow's default view
    page.goto("about:blank")
    # its run outputs no model, so MLflow's GenAI view offers no "Training runs": clicking cannot reach it
    with pytest.raises(AssertionError, match="empty view"):
        _runs_by_clicking(page, base, "bare", "bare-run")
    text = _open_run(page, f"{base}/#/experiments/{exp_id}/runs/{run.info.run_id}?{ML_VIEW}")
    with pytest.raises(AssertionError, match="no parameters"):
        check_run_page(text, {"model": "tiny"}, ["x"])
