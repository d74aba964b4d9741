"""The domain's value types, shared by every step of the flow.

Frozen dataclasses only: strings, JSON and labels are parsed into these once at the boundary, and
everything inside gpuplace passes them around. Nothing here imports torch, kubernetes, mlflow or an
HTTP library, so the planner, the extender and the benchmarks can use them anywhere. Units live in
field names (``_s``, ``_gib``, ``_gbps``: GB/s, 10^9 bytes per second, ``_usd_per_hour``); times are
seconds everywhere inside gpuplace. One module per area; this package re-exports them all.
"""

from gpuplace.types.compare import Comparison, PathMetrics, PlanFacts
from gpuplace.types.core import (
    PERCENTILES,
    DeviceInfo,
    Distribution,
    GpuSpec,
    LatencyProfile,
    MigProfile,
    ModelArch,
    NvLinkPeer,
    PointResult,
    SweepPoint,
    percentile,
)
from gpuplace.types.deploy import DeploymentRecord, PodRecord
from gpuplace.types.fleet import GpuDevice, Inventory, Node, Taint
from gpuplace.types.loadtest import LatencyReport as LatencyReport
from gpuplace.types.loadtest import RequestResult as RequestResult
from gpuplace.types.plan import Candidate as Candidate
from gpuplace.types.plan import Placement as Placement
from gpuplace.types.plan import PlacementPlan as PlacementPlan
from gpuplace.types.plan import Slo as Slo

__all__ = [
    "PERCENTILES",
    "Comparison",
    "DeploymentRecord",
    "DeviceInfo",
    "Distribution",
    "GpuDevice",
    "GpuSpec",
    "Inventory",
    "LatencyProfile",
    "MigProfile",
    "ModelArch",
    "Node",
    "NvLinkPeer",
    "PathMetrics",
    "PlanFacts",
    "PodRecord",
    "PointResult",
    "SweepPoint",
    "Taint",
    "percentile",
]
