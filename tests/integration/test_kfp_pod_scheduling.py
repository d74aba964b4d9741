"""The Kubeflow path's task pod, built as KFP's driver builds it from the checked-in compiled pipeline and
placement outputs shaped like the plan's (``kfp_fragments``), created on the session's control plane and
placed by the same kube-scheduler as the native path: it lands on the planned node, and its placement and
provisioning are read back from the API."""

from __future__ import annotations

import pytest

from gpuplace.inventory import load_inventory
from gpuplace.jobs.submit import compiled_path
from gpuplace.k8s import Api
from gpuplace.k8s.dra import NODE_LEVEL, read_placements
from gpuplace.k8s.provisioning import PodTimer
from gpuplace.k8s.retry import Deadline
from gpuplace.manifests.kfp_pod import kfp_task_pod

pytestmark = [pytest.mark.integration, pytest.mark.controlplane]


def test_kfp_task_pod_is_placed_by_the_scheduler_where_the_plan_said(
    kube_api: Api, kube_namespace: str
) -> None:
    inventory = load_inventory("mixed-a100-h100-l4")
    planned = "h100-1"
    fragments = {  # what plan_placement outputs for a replica planned on h100-1
        "node_affinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "In", "values": [planned]}
                        ]
                    }
                ]
            }
        },
        "tolerations": [
            {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
        ],
        "node_selector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        "accelerator_type": "nvidia.com/gpu",
        "accelerator_count": "1",  # a string, as the driver needs it
    }
    built = kfp_task_pod(
        compiled_path("orchestration_comparison"),
        "serve-and-load-test",
        arguments={"accelerator_type": "nvidia.com/gpu"},
        task_outputs={"plan-placement": fragments, "repeat-runs": {"Output": [0]}},  # one run of the loop
        labels={"test": "kfp"},
    )
    with PodTimer(kube_api, kube_namespace, label_selector="test=kfp") as timer:
        kube_api.create(built.pod, kube_namespace)
        (times,) = timer.wait(1, deadline=Deadline(60))
    (placement,) = read_placements(
        kube_api, kube_namespace, label_selector="test=kfp", deadline=Deadline(10), inventory=inventory
    )
    assert placement.node == times.node == planned
    # nvidia.com/gpu through the device plugin: which GPU is not in the API, and none is made up.
    assert placement.level == NODE_LEVEL and placement.gpu_ids == () and placement.device_plugin_gpus == 1
    assert times.seen_created and 0 < times.provisioning_s < 30
