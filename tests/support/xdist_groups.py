"""The pytest-xdist scheduler of ``make test``: a work unit is a group of tests that one worker runs whole.

pytest-xdist's own ``--dist loadgroup`` reads ``xdist_group`` marks by rewriting ``item._nodeid``, which
pytest 9 no longer reads, so under pytest 9 its groups are silently ignored. Here the workers write each
test's group (conftest.py derives it from the markers) to a file the controller names, and this scheduler, a
``LoadScopeScheduling``, takes a test's group as its scope: the units go to the workers in the order the
workers collected them, the next unit to whichever worker is nearly out of work.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling


class GroupScheduling(LoadScopeScheduling):
    def __init__(self, config: pytest.Config, log: Producer | None, groups_file: Path) -> None:
        super().__init__(config, log)
        self._file = groups_file
        self._groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self._groups is None:  # the workers wrote it before they sent their collections
            self._groups = dict(json.loads(self._file.read_text()))
        return self._groups.get(nodeid) or nodeid.split("::", 1)[0]
