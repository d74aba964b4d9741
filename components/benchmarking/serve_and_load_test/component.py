"""KFP component ``serve_and_load_test``: the Kubeflow path's serving step, over
:func:`gpuplace.deploy.inline.serve_and_load_test`.

The pipeline places this task's pod from the plan at run time (kfp-kubernetes node affinity,
tolerations, node selector, accelerator type/limit); the task serves the plan's model inside its
own pod, load-tests it, stops it and writes the same outputs as ``deploy_inference`` + ``load_test``.
Only the standard library and kfp are imported here.
"""

from kfp import dsl
from kfp.dsl import Artifact, Dataset, Input, Markdown, Metrics, Output

from gpuplace.components.images import CUDA_IMAGE


@dsl.component(base_image=CUDA_IMAGE, install_kfp_package=False)
def serve_and_load_test(
    plan: Input[Artifact],
    deployment: Output[Artifact],
    records: Output[Dataset],
    report: Output[Artifact],
    metrics: Output[Metrics],
    summary: Output[Markdown],
    prompt_tokens: str = "",
    output_tokens: str = "",
    trace: str = "",
    time_scale: float = 1.0,
    rate: float = 0.0,
    concurrency: int = 0,
    max_requests: int = 20,
    seed: int = 0,
    startup_timeout_s: float = 300.0,
) -> str:
    """Serve the plan's model in this task's pod and load-test it; returns the one-line verdict.

    Args:
        plan: Plan directory written by plan_placement.
        prompt_tokens: Prompt length: N, or uniform:A:B / normal:MEAN:STD; empty = the plan's.
        output_tokens: Output length (forced), same forms; empty = the plan's.
        trace: Azure-format trace CSV to replay instead of synthetic lengths.
        time_scale: Stretch (>1) or compress (<1) the trace's timestamps.
        rate: Poisson arrival rate in req/s; 0 = the plan's rate.
        concurrency: Requests in flight at most; 0 = unbounded (open loop) or 1 (closed loop).
        max_requests: Requests to send.
        seed: Seed of lengths, arrivals and prompts.
        startup_timeout_s: Deadline for the server to become ready.
    """
    params = dict(locals())  # the load-test parameters, by the names gpuplace.loadtest.config.PARAMS reads
    import json

    from gpuplace.deploy.inline import serve_and_load_test as run
    from gpuplace.loadtest.summary import report_metrics

    result = run(
        plan.path,
        params,
        workdir=deployment.path + ".server",
        records=records.path,
        report=report.path,
        summary=summary.path,
        startup_timeout_s=startup_timeout_s,
    )
    with open(deployment.path, "w") as f:
        json.dump(result.deployment.to_json_dict(), f, indent=2)
    for name, value in report_metrics(result.loadtest.report, result.loadtest.prediction).items():
        metrics.log_metric(name, value)
    r = result.loadtest.report
    return f"{r.completed} requests completed, {r.failed} failed"
