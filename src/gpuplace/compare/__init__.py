"""The native-vs-Kubeflow comparison: per-path metrics, the weighted score, its sensitivity, and ROI.

:func:`compare_paths` is a pure function of the two paths' deployment records and load-test
reports, the plan and the fleet (the FGD fragmentation function is passed in); :mod:`.inputs` reads
those records from files with clear errors, and :mod:`.step` runs the comparison step end to end.
docs/comparison.md defines every metric, each criterion's normalisation, and the ROI arithmetic.
"""

from __future__ import annotations

from gpuplace.compare.metrics import FragmentationFn, PathResult
from gpuplace.compare.paths import IncomparablePaths, check_same_serving, compare_paths
from gpuplace.compare.score import CRITERIA, DEFAULT_WEIGHTS, parse_assessed, parse_weights
from gpuplace.types.compare import PATHS

__all__ = [
    "CRITERIA",
    "DEFAULT_WEIGHTS",
    "PATHS",
    "FragmentationFn",
    "IncomparablePaths",
    "PathResult",
    "check_same_serving",
    "compare_paths",
    "parse_assessed",
    "parse_weights",
]
