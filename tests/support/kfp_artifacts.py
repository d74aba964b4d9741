"""Test support for components: what stands in for KFP's artifact objects in ``python_func`` tests.

Calling ``<component>.python_func(...)`` directly checks a component's wiring without the KFP
executor; its ``Input``/``Output`` artifacts are then plain objects with a ``path``, ``metadata``
and, for ``Metrics``, ``log_metric``. The local-runner tests use the real KFP artifacts.
"""

from __future__ import annotations

from pathlib import Path


class FakeArtifact:
    """Stands in for KFP's Input[...]/Output[...] artifact objects when calling python_func directly."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)
        self.metadata: dict[str, object] = {}
        self.logged: dict[str, float] = {}

    def log_metric(self, name: str, value: float) -> None:
        self.logged[name] = value
