"""The MLflow client of gpuplace: runs, nesting, batched logging, tables, figures, datasets, artifacts.

This is the one place that imports mlflow. :class:`Tracker` wraps ``MlflowClient`` so that every call
(1) goes through the secret filter, (2) batches metrics, params and tags with ``log_batch`` within
MLflow's per-request limits, and (3) turns any failure into :class:`TrackingFailed` naming the URI,
the run and what was being logged — a step whose server died fails, it never claims success.
Under Kubeflow Pipelines 2.17+ with the MLflow plugin, ``MLFLOW_RUN_ID`` names the task's run: the
tracker attaches to it instead of creating a parent, and leaves its status to KFP.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mlflow
from mlflow import MlflowClient
from mlflow.entities import DatasetInput, InputTag, LoggedModelOutput, Metric, Param, RunTag

from gpuplace.tracking.config import TrackingConfig, TrackingFailed
from gpuplace.tracking.naming import (
    EXPERIMENT_KIND,
    MLFLOW_PARENT,
    MODEL_DEVELOPMENT,
    TAG_KFP_RUN,
    base_tags,
    ui_url,
)
from gpuplace.tracking.secrets import redact_pairs, redact_text, secret_env_values
from gpuplace.units import to_ms

# MLflow's REST limits per log_batch request.
MAX_METRICS_PER_BATCH = 1000
MAX_PARAMS_PER_BATCH = 100
MAX_TAGS_PER_BATCH = 100
MAX_PARAM_VALUE = 6000
TEXT_SUFFIXES = (".json", ".jsonl", ".yaml", ".yml", ".md", ".txt", ".html", ".csv", ".log")

# MLflow's default is 7 retries with exponential backoff (minutes of silence when the server is
# gone); a pipeline step should fail within seconds and say why.
HTTP_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
}


@dataclass(slots=True)
class RunHandle:
    """A run this tracker logs to; ``owned`` is False for a run KFP created (we never end those)."""

    run_id: str
    name: str
    kind: str
    owned: bool = True
    monitor: Any = field(default=None, repr=False)
    end_time_s: float | None = None  # the step's recorded end; None = when the run is ended
    # params the run had before gpuplace attached (KFP's own): MLflow params cannot change, so gpuplace's
    # value of such a key is left out rather than failing the step
    preset_params: frozenset[str] = frozenset()


class Tracker:
    """Logs gpuplace runs to one MLflow tracking target (see docs/tracking.md)."""

    def __init__(
        self, config: TrackingConfig, *, system_metrics: bool = False, batching: bool = True
    ) -> None:
        """``batching=False`` sends one request per metric, param and tag: the benchmark's baseline."""
        for key, value in HTTP_DEFAULTS.items():
            os.environ.setdefault(key, value)
        self.config = config
        self.system_metrics = system_metrics
        self.batching = batching
        self._secrets = secret_env_values()
        self._client = MlflowClient(tracking_uri=config.uri)
        self._experiment_id: str = str(self._call("opening the experiment", "", self._ensure_experiment))

    @property
    def experiment_id(self) -> str:
        return self._experiment_id

    @property
    def client(self) -> MlflowClient:
        return self._client

    def ui_url(self, run_id: str = "") -> str:
        """The run's page (the experiment's runs without ``run_id``) in MLflow's UI (:func:`ui_url`)."""
        return ui_url(self.config, self._experiment_id, run_id)

    def describe(self, run_id: str = "") -> str:
        """Where results went, and the page that opens on the run."""
        return f"{self.config.describe()}; the run: {self.ui_url(run_id)}"

    def _call(self, what: str, run_id: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except TrackingFailed:
            raise
        except Exception as e:  # mlflow raises MlflowException, requests' errors and OSError alike
            where = f" in run {run_id}" if run_id else ""
            raise TrackingFailed(
                f"MLflow at {self.config.uri} failed while {what}{where}: {type(e).__name__}: "
                f"{redact_text(str(e), self._secrets)[:500]}. The step stops here; results logged before "
                "this point are in MLflow, the rest are not"
            ) from e

    def _ensure_experiment(self) -> str:
        """The experiment, created if missing, marked as a model-development experiment so that MLflow
        3's UI opens it on its runs (not on the GenAI traces overview) — also when it already existed."""
        exp = self._client.get_experiment_by_name(self.config.experiment)
        if exp is None:
            exp_id = str(
                self._client.create_experiment(
                    self.config.experiment,
                    artifact_location=self.config.artifact_location or None,
                    tags={EXPERIMENT_KIND: MODEL_DEVELOPMENT},
                )
            )
        else:
            exp_id = str(exp.experiment_id)
            if exp.tags.get(EXPERIMENT_KIND) != MODEL_DEVELOPMENT:
                self._client.set_experiment_tag(exp_id, EXPERIMENT_KIND, MODEL_DEVELOPMENT)
        return exp_id

    # --- runs -----------------------------------------------------------------------------------

    def start_pipeline_run(
        self,
        name: str,
        *,
        tags: Mapping[str, str] | None = None,
        kfp_run_id: str = "",
        span: tuple[float, float] | None = None,
    ) -> RunHandle:
        """The parent run: KFP's ``MLFLOW_RUN_ID`` when set (attached, not owned: KFP keeps its times and
        status), else a new run spanning ``span`` (epoch seconds, from the steps' records) when given."""
        all_tags = {**base_tags("pipeline"), **(tags or {})}
        if kfp_run_id:
            all_tags[TAG_KFP_RUN] = kfp_run_id
        injected = os.environ.get("MLFLOW_RUN_ID", "")
        if injected:
            existing = self._call("attaching to MLFLOW_RUN_ID", injected, self._client.get_run, injected)
            run = RunHandle(
                injected, name, "pipeline", owned=False, preset_params=frozenset(existing.data.params)
            )
            self.log(run, tags=all_tags)
            return run
        return self._create(name, "pipeline", all_tags, parent=None, span=span)

    def start_child(
        self,
        parent: RunHandle,
        name: str,
        kind: str,
        *,
        tags: Mapping[str, str] | None = None,
        span: tuple[float, float] | None = None,
    ) -> RunHandle:
        """A nested run (step, path or sweep point) under ``parent``, spanning ``span`` when given."""
        return self._create(name, kind, {**base_tags(kind), **(tags or {})}, parent=parent, span=span)

    def _create(
        self,
        name: str,
        kind: str,
        tags: Mapping[str, str],
        parent: RunHandle | None,
        span: tuple[float, float] | None = None,
    ) -> RunHandle:
        all_tags = dict(tags)
        if parent is not None:
            all_tags[MLFLOW_PARENT] = parent.run_id
        clean = redact_pairs(all_tags, self._secrets)
        name = redact_text(name, self._secrets)
        info = self._call(
            f"creating run {name!r}",
            parent.run_id if parent else "",
            self._client.create_run,
            self._experiment_id,
            run_name=name,
            tags=clean,
            start_time=int(to_ms(span[0])) if span else None,
        ).info
        handle = RunHandle(info.run_id, name, kind, end_time_s=span[1] if span else None)
        if self.system_metrics and kind == "pipeline":
            handle.monitor = self._start_system_metrics(info.run_id)
        return handle

    def _start_system_metrics(self, run_id: str) -> Any:
        # CPU/memory via psutil, GPU via NVML when pynvml finds a driver (mlflow's monitor does both).
        from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

        monitor = SystemMetricsMonitor(run_id, sampling_interval=2, samples_before_logging=1)  # type: ignore[no-untyped-call]
        monitor.start()  # type: ignore[no-untyped-call]
        return monitor

    def finish(self, run: RunHandle, status: str = "FINISHED") -> None:
        if run.monitor is not None:
            with contextlib.suppress(Exception):
                run.monitor.finish()
            run.monitor = None
        if run.owned:
            self._call(
                f"ending run {run.name!r} as {status}",
                run.run_id,
                self._client.set_terminated,
                run.run_id,
                status,
                int(to_ms(run.end_time_s)) if run.end_time_s is not None and status == "FINISHED" else None,
            )

    @contextlib.contextmanager
    def run(
        self,
        name: str,
        kind: str,
        *,
        parent: RunHandle | None = None,
        tags: Mapping[str, str] | None = None,
        kfp_run_id: str = "",
        span: tuple[float, float] | None = None,
    ) -> Iterator[RunHandle]:
        """A run that ends FINISHED when the block succeeds and FAILED when it raises; ``span`` (epoch
        seconds) is the step's own start and end as it recorded them, instead of the logging's."""
        if parent is None:
            handle = self.start_pipeline_run(name, tags=tags, kfp_run_id=kfp_run_id, span=span)
        else:
            handle = self.start_child(parent, name, kind, tags=tags, span=span)
        try:
            yield handle
        except BaseException:
            # Best effort: when the server is gone this fails too, and the original error matters more.
            with contextlib.suppress(TrackingFailed):
                self.finish(handle, "FAILED")
            raise
        self.finish(handle, "FINISHED")

    # --- values ---------------------------------------------------------------------------------

    def log(
        self,
        run: RunHandle,
        metrics: Mapping[str, float] | None = None,
        params: Mapping[str, Any] | None = None,
        tags: Mapping[str, str] | None = None,
        *,
        step: int = 0,
    ) -> None:
        """Metrics, params and tags in as few ``log_batch`` calls as MLflow's limits allow."""
        ts = int(to_ms(time.time()))
        metric_list = [
            Metric(k, float(v), ts, step) for k, v in (metrics or {}).items() if not math.isnan(float(v))
        ]
        param_list = [
            Param(k, v[:MAX_PARAM_VALUE])
            for k, v in redact_pairs(params or {}, self._secrets).items()
            if k not in run.preset_params
        ]
        tag_list = [RunTag(k, v) for k, v in redact_pairs(tags or {}, self._secrets).items()]
        if not self.batching:
            self._log_one_by_one(run, metric_list, param_list, tag_list)
            return
        while metric_list or param_list or tag_list:
            m, metric_list = metric_list[:MAX_METRICS_PER_BATCH], metric_list[MAX_METRICS_PER_BATCH:]
            p, param_list = param_list[:MAX_PARAMS_PER_BATCH], param_list[MAX_PARAMS_PER_BATCH:]
            t, tag_list = tag_list[:MAX_TAGS_PER_BATCH], tag_list[MAX_TAGS_PER_BATCH:]
            self._call(
                f"logging {len(m)} metrics, {len(p)} params, {len(t)} tags",
                run.run_id,
                self._client.log_batch,
                run.run_id,
                metrics=m,
                params=p,
                tags=t,
            )

    def _log_one_by_one(
        self, run: RunHandle, metrics: Sequence[Metric], params: Sequence[Param], tags: Sequence[RunTag]
    ) -> None:
        for m in metrics:
            self._call(
                f"logging metric {m.key}", run.run_id, self._client.log_metric, run.run_id, m.key, m.value
            )
        for p in params:
            self._call(
                f"logging param {p.key}", run.run_id, self._client.log_param, run.run_id, p.key, p.value
            )
        for t in tags:
            self._call(f"setting tag {t.key}", run.run_id, self._client.set_tag, run.run_id, t.key, t.value)

    def log_model_output(
        self, run: RunHandle, name: str, params: Mapping[str, str], *, model_type: str
    ) -> str:
        """Record ``name`` as an MLflow LoggedModel (no artifacts: its params) and link it as an output of
        ``run``; returns its model id. A run with a model output is what MLflow 3's GenAI view lists under
        **Training runs** in the experiment's side bar, the only way from that view's landing page to the
        runs table (docs/tracking.md#what-a-reviewer-finds-where)."""
        model = self._call(
            f"recording the model {name!r}",
            run.run_id,
            self._client.create_logged_model,
            self._experiment_id,
            name=name,
            source_run_id=run.run_id,
            params=dict(redact_pairs(params, self._secrets)),
            model_type=model_type,
        )
        self._call(
            f"linking the model {name!r} as the run's output",
            run.run_id,
            self._client.log_outputs,
            run.run_id,
            [LoggedModelOutput(model.model_id, step=0)],
        )
        return str(model.model_id)

    # --- artifacts --------------------------------------------------------------------------------

    def log_artifact(self, run: RunHandle, local_path: str | Path, artifact_path: str = "") -> None:
        """A file or folder; text files are uploaded as a redacted copy (docs/tracking.md#secrets)."""
        src = Path(local_path)
        if not src.exists():
            raise TrackingFailed(f"artifact {src} does not exist (run {run.run_id}); nothing was uploaded")
        with tempfile.TemporaryDirectory(prefix="gpuplace-artifact-") as tmp:
            staged = Path(tmp) / src.name
            if src.is_dir():
                shutil.copytree(src, staged)
                files = [p for p in staged.rglob("*") if p.is_file()]
            else:
                shutil.copy2(src, staged)
                files = [staged]
            for f in files:
                if f.suffix.lower() in TEXT_SUFFIXES:
                    text = f.read_text(errors="replace")
                    clean = redact_text(text, self._secrets)
                    if clean != text:
                        f.write_text(clean)
            if src.is_dir():
                dest = f"{artifact_path}/{src.name}".strip("/")
                self._call(
                    f"uploading folder {src}",
                    run.run_id,
                    self._client.log_artifacts,
                    run.run_id,
                    str(staged),
                    dest,
                )
            else:
                self._call(
                    f"uploading {src}",
                    run.run_id,
                    self._client.log_artifact,
                    run.run_id,
                    str(staged),
                    artifact_path or None,
                )

    def log_text(self, run: RunHandle, text: str, artifact_file: str) -> None:
        self._call(
            f"uploading {artifact_file}",
            run.run_id,
            self._client.log_text,
            run.run_id,
            redact_text(text, self._secrets),
            artifact_file,
        )

    def log_table(self, run: RunHandle, data: Any, artifact_file: str) -> None:
        """A table (DataFrame or dict of columns) that MLflow's UI shows and compares across runs."""
        self._call(
            f"logging table {artifact_file}",
            run.run_id,
            self._client.log_table,
            run.run_id,
            data=data,
            artifact_file=artifact_file,
        )

    def log_figure(self, run: RunHandle, figure: Any, artifact_file: str) -> None:
        self._call(
            f"logging figure {artifact_file}",
            run.run_id,
            self._client.log_figure,
            run.run_id,
            figure,
            artifact_file,
        )

    def log_dataset(self, run: RunHandle, frame: Any, *, name: str, source: str, context: str) -> None:
        """A pandas table as an MLflow dataset input (``mlflow.data``), e.g. the profile or the records."""
        import warnings

        with warnings.catch_warnings():
            # mlflow warns that a local path "can be interpreted in multiple ways" and about int columns
            warnings.simplefilter("ignore", UserWarning)
            dataset = mlflow.data.from_pandas(frame, source=source, name=name)  # type: ignore[attr-defined]
            entity = dataset._to_mlflow_entity()
        self._call(
            f"logging dataset {name}",
            run.run_id,
            self._client.log_inputs,
            run.run_id,
            datasets=[DatasetInput(entity, tags=[InputTag("mlflow.data.context", context)])],
        )

    def log_files(self, run: RunHandle, files: Sequence[tuple[Path, str]]) -> None:
        for path, dest in files:
            self.log_artifact(run, path, dest)
