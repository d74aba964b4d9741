"""The operator table's file (``gpuplace profile --operators --out operators.json``): its one writer and
reader, torch-free, so that ``gpuplace predict`` and ``plan`` read a table without importing torch."""

from __future__ import annotations

import os
from pathlib import Path

from gpuplace.profiling.jsonfile import read_tagged_json, write_tagged_json
from gpuplace.types.operators import OPERATORS_FORMAT, OperatorTable


def write_operator_table(table: OperatorTable, path: str | os.PathLike[str]) -> Path:
    """Write the table as JSON (atomically)."""
    return write_tagged_json(table.to_json_dict(), OPERATORS_FORMAT, path)


def read_operator_table(path: str | os.PathLike[str]) -> OperatorTable:
    """The table :func:`write_operator_table` wrote; a clear error for anything else."""
    return read_tagged_json(
        path,
        OPERATORS_FORMAT,
        OperatorTable.from_json_dict,
        field="operators",
        what="operator table",
        fix="Measure it: gpuplace profile --operators --model MODEL --out operators.json",
    )
