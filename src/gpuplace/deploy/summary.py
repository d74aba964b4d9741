"""A deployment record for people and dashboards: the CLI's summary, the provisioning split, the metrics."""

from __future__ import annotations

import math

from gpuplace.types import DeploymentRecord, PodRecord
from gpuplace.types.deploy import NODE_LEVEL


def _secs(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:.2f}"


def _gpus(pod: PodRecord) -> str:
    if pod.gpu_ids:
        return ",".join(g.split("/", 1)[-1] for g in pod.gpu_ids)
    if pod.placement_level == NODE_LEVEL:
        return f"{pod.gpu_count}× (node level)"
    return "-"


def provisioning_split(record: DeploymentRecord) -> list[str]:
    """Per pod that a kubelet ran: provisioning split into scheduling, image, container start and server
    start (measured, docs/testenv.md#a-real-node---real-node); nothing for pods no container ran."""
    out = []
    for p in record.pods:
        if p.runtime and not math.isnan(p.image_s):
            out.append(
                f"{p.name} ({p.runtime}): scheduling {p.scheduling_s:.2f} s, image {p.image_s:.0f} s "
                f"(1 s events), container start {p.container_start_s:.2f} s, server start "
                f"{p.server_start_s:.2f} s"
            )
    return out


def format_record(record: DeploymentRecord) -> str:
    """The table ``gpuplace deploy`` prints: measured node and GPUs against the plan, and the times."""
    lines = [
        f"{'pod':34} {'node':16} {'planned':16} {'GPUs (measured)':22} {'planned GPUs':18} "
        f"{'sched s':>7} {'ready s':>7} {'serve s':>7}"
    ]
    for p in record.pods:
        planned = ",".join(g.split("/", 1)[-1] for g in p.planned_gpu_ids) or "-"
        lines.append(
            f"{p.name:34} {p.node or '-':16} {p.planned_node or '-':16} {_gpus(p):22} {planned:18} "
            f"{_secs(p.scheduling_s):>7} {_secs(p.ready_s):>7} {_secs(p.provisioning_s):>7}"
        )
    if record.pods:
        dist = record.provisioning()
        if dist.count:
            lines.append(
                f"provisioning (created → first successful request): p50 {dist.median:.2f} s, "
                f"max {dist.max:.2f} s over {dist.count} pods"
            )
        else:
            lines.append("provisioning: unknown (ready-to-serve was not observed)")
        lines.extend(provisioning_split(record))
    if record.gpu_api or record.runtime:
        lines.append(
            f"GPU API {record.gpu_api or '-'}; servers run by {record.runtime or '-'}; "
            f"served on {record.served_on or 'unknown'}"
        )
    lines.extend(f"note: {n}" for n in record.notes)
    return "\n".join(lines)


def deploy_metrics(record: DeploymentRecord) -> dict[str, float]:
    """The deploy step's KFP metrics: pods, misplaced pods, provisioning p50 and max (seconds)."""
    out = {"pods": float(len(record.pods)), "misplaced_pods": float(len(record.mismatches()))}
    dist = record.provisioning()
    if dist.count:
        out |= {"provisioning_p50_s": dist.median, "provisioning_max_s": dist.max}
    return out
