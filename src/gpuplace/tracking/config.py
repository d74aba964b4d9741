"""Where tracking goes: the MLflow tracking URI, the embedded local default, and the reachability check.

``MLFLOW_TRACKING_URI`` wins; without it gpuplace uses a local SQLite store and an artifact folder
under a working directory and says how to open ``mlflow ui`` on them. A remote URI that does not
answer at start is an error naming the URI — unless the caller asked for the documented local
fallback, which is then used and announced. No mlflow import here: this runs before mlflow loads.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from gpuplace.errors import GpuplaceError

DEFAULT_EXPERIMENT = "gpuplace"
DEFAULT_WORKDIR = Path(".gpuplace/mlflow")


class TrackingUnavailable(GpuplaceError):
    """The MLflow tracking server did not answer when the step started."""


class TrackingFailed(GpuplaceError):
    """An MLflow call failed after the step started (e.g. the server died): the step must fail."""


@dataclass(frozen=True, slots=True)
class TrackingConfig:
    """A resolved tracking target. ``artifact_location`` is set only for the embedded local store."""

    uri: str
    experiment: str = DEFAULT_EXPERIMENT
    artifact_location: str = ""
    local: bool = False
    fallback_used: bool = False

    def describe(self) -> str:
        """One line for the user: where results go and how to look at them."""
        if self.local:
            root = urllib.parse.urlparse(self.artifact_location).path if self.artifact_location else ""
            how = ui_command(self.uri, root)
            prefix = "MLflow server unreachable; fell back to " if self.fallback_used else ""
            return (
                f"{prefix}local MLflow store {self.uri} (experiment {self.experiment!r}); view it with: {how}"
            )
        return f"MLflow tracking server {self.uri} (experiment {self.experiment!r})"


def ui_command(backend_store_uri: str, artifact_root: str | Path = "") -> str:
    """The ``mlflow ui`` command line that opens a local store: one worker (its default of 4 gunicorn
    workers, each with its own copy of MLflow, is not worth it for one user), port 5000."""
    root = f" --default-artifact-root {artifact_root}" if str(artifact_root) else ""
    return f"mlflow ui --backend-store-uri {backend_store_uri}{root} --workers 1"


def local_config(
    workdir: str | Path = DEFAULT_WORKDIR, experiment: str = DEFAULT_EXPERIMENT
) -> TrackingConfig:
    root = Path(workdir).expanduser().resolve()
    root.mkdir(parents=True, exist_ok=True)
    return TrackingConfig(
        uri=f"sqlite:///{root / 'mlflow.db'}",
        experiment=experiment,
        artifact_location=(root / "artifacts").as_uri(),
        local=True,
    )


def is_remote(uri: str) -> bool:
    return urllib.parse.urlparse(uri).scheme in ("http", "https")


def probe(uri: str, timeout_s: float = 5.0) -> str:
    """ "" when the server at ``uri`` answers its health check, else why it did not."""
    url = uri.rstrip("/") + "/health"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            return "" if resp.status == 200 else f"GET {url} answered HTTP {resp.status}"
    except urllib.error.HTTPError as e:
        return f"GET {url} answered HTTP {e.code}"
    except (OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        return f"GET {url} failed: {reason}"


def resolve_tracking(
    uri: str | None = None,
    *,
    experiment: str = DEFAULT_EXPERIMENT,
    workdir: str | Path = DEFAULT_WORKDIR,
    fallback_local: bool = False,
    timeout_s: float = 5.0,
) -> TrackingConfig:
    """The tracking target: ``uri``, else ``MLFLOW_TRACKING_URI``, else the local store under ``workdir``.

    A remote server must answer its health check within ``timeout_s``; otherwise
    :class:`TrackingUnavailable` names the URI, or with ``fallback_local`` the local store is used.
    """
    chosen = uri or os.environ.get("MLFLOW_TRACKING_URI", "")
    if not chosen:
        return local_config(workdir, experiment)
    if is_remote(chosen):
        problem = probe(chosen, timeout_s)
        if problem:
            if fallback_local:
                cfg = local_config(workdir, experiment)
                return TrackingConfig(
                    cfg.uri, experiment, cfg.artifact_location, local=True, fallback_used=True
                )
            raise TrackingUnavailable(
                f"MLflow tracking server {chosen} is unreachable ({problem}). Start it (mlflow server ...), "
                "fix MLFLOW_TRACKING_URI, or ask for the local fallback (--mlflow-fallback-local) to log to "
                f"a local store under {workdir}"
            )
        return TrackingConfig(chosen, experiment)
    return TrackingConfig(chosen, experiment, local=not is_remote(chosen))
