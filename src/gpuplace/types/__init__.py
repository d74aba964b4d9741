"""The domain's value types, shared by every step of the flow.

Frozen dataclasses only: strings, JSON and labels are parsed into these once at the boundary, and
everything inside gpuplace passes them around. Nothing here imports torch, kubernetes, mlflow or an
HTTP library, so the planner, the extender and the benchmarks can use them anywhere. Units live in
field names (``_s``, ``_gib``, ``_gbps``: GB/s, 10^9 bytes per second, ``_usd_per_hour``); times are
seconds everywhere inside gpuplace. One module per area, in dependency order: ``stats`` (distributions,
JSON helpers), ``catalog`` (GPUs, model shapes), ``profile``, ``fleet``, ``workload`` (traffic),
``serving`` (the serving spec), ``plan`` (SLO, candidates, the plan), ``latency`` (predicted against
measured), ``deploy``, ``loadtest``, ``compare``; this package re-exports the names most steps use.
"""

from gpuplace.types.catalog import GpuSpec, MigProfile, ModelArch
from gpuplace.types.compare import Comparison, PathMetrics
from gpuplace.types.deploy import DeploymentRecord, PodRecord
from gpuplace.types.fleet import GpuDevice, Inventory, Node, Taint
from gpuplace.types.loadtest import LatencyReport, RequestResult
from gpuplace.types.plan import Candidate, Placement, PlacementPlan, Prediction, Slo
from gpuplace.types.profile import DeviceInfo, LatencyProfile, NvLinkPeer, PointResult, SweepPoint
from gpuplace.types.serving import ServingSpec
from gpuplace.types.stats import PERCENTILES, Distribution, percentile
from gpuplace.types.workload import LengthDist, RequestSpec, Traffic

__all__ = [
    "PERCENTILES",
    "Candidate",
    "Comparison",
    "DeploymentRecord",
    "DeviceInfo",
    "Distribution",
    "GpuDevice",
    "GpuSpec",
    "Inventory",
    "LatencyProfile",
    "LatencyReport",
    "LengthDist",
    "MigProfile",
    "ModelArch",
    "Node",
    "NvLinkPeer",
    "PathMetrics",
    "Placement",
    "PlacementPlan",
    "PodRecord",
    "PointResult",
    "Prediction",
    "RequestResult",
    "RequestSpec",
    "ServingSpec",
    "Slo",
    "SweepPoint",
    "Taint",
    "Traffic",
    "percentile",
]
