"""MLflow tracking of gpuplace runs: the only package that imports mlflow (lazily, from here down).

:mod:`.config` resolves the tracking URI (``MLFLOW_TRACKING_URI`` or an embedded local SQLite store)
and checks that a server answers; :mod:`.naming` is the naming scheme of runs, tags, params, metrics
and artifacts (docs/tracking.md); :mod:`.secrets` keeps credentials out; :mod:`.client` is the
:class:`Tracker` (batched logging, nested runs, datasets, figures); :mod:`.pipeline` logs a whole
pipeline run. Importing this package does not import mlflow: :func:`open_tracker` does.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from gpuplace.tracking.config import (
    DEFAULT_EXPERIMENT,
    DEFAULT_WORKDIR,
    TrackingConfig,
    TrackingFailed,
    TrackingUnavailable,
    resolve_tracking,
)

if TYPE_CHECKING:
    from gpuplace.tracking.client import Tracker

__all__ = [
    "DEFAULT_EXPERIMENT",
    "TrackingConfig",
    "TrackingFailed",
    "TrackingUnavailable",
    "open_tracker",
    "resolve_tracking",
]


def open_tracker(
    uri: str | None = None,
    *,
    experiment: str = DEFAULT_EXPERIMENT,
    workdir: str | Path = DEFAULT_WORKDIR,
    fallback_local: bool = False,
    system_metrics: bool = False,
    timeout_s: float = 5.0,
) -> Tracker:
    """Resolve the target (see :func:`resolve_tracking`), check it answers, and open a :class:`Tracker`."""
    from gpuplace.tracking.client import Tracker

    config = resolve_tracking(
        uri, experiment=experiment, workdir=workdir, fallback_local=fallback_local, timeout_s=timeout_s
    )
    return Tracker(config, system_metrics=system_metrics)
