"""KFP component ``serve_and_load_test``: the Kubeflow path's serving step, over
:func:`gpuplace.steps.serve_and_loadtest.run_serve_and_load_test_step` (its parameters: the step's table).

The pipeline places this task's pod from the plan at run time (kfp-kubernetes node affinity,
tolerations, node selector; accelerator type and count from the plan's outputs); the task serves the
plan's serving spec inside its own pod (``backend=kfp``), load-tests it, stops it and writes the same
outputs as ``deploy_inference`` + ``load_test``. ``backend=local`` serves with the local engine (the local
runner), ``backend=testenv`` creates the pod KFP's driver would create on a gpuplace testenv (no KFP backend
runs there). The task fails when no request succeeded, after its outputs are written. Only the standard
library and kfp are imported here.
"""

from kfp import dsl
from kfp.dsl import Artifact, Dataset, Input, Markdown, Metrics, Output

from gpuplace.components.images import SERVING_IMAGE


@dsl.component(base_image=SERVING_IMAGE, install_kfp_package=False)
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
    backend: str = "kfp",
    kubeconfig: str = "",
    namespace: str = "default",
    run_id: str = "",
    allow_misplacement: bool = False,
) -> str:
    """Serve the plan in this task's pod and load-test it; returns the one-line verdict.

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
        startup_timeout_s: Deadline for the server to answer its first request.
        backend: kfp (serve the plan's spec in this pod), local (the local engine on this machine) or
            testenv (create this task's pod on the gpuplace testenv of `kubeconfig`, served by its stand-in).
        kubeconfig: The testenv's kubeconfig (backend testenv).
        namespace: Namespace of the task pod (backend testenv).
        run_id: Pipeline run id to label the task pod with (backend testenv).
        allow_misplacement: Keep going when the task pod is not on its planned node.
    """
    params = dict(locals())  # by the names of the step's table, gpuplace.steps.serve_and_loadtest.PARAMS
    from gpuplace.loadtest.summary import report_metrics
    from gpuplace.steps.serve_and_loadtest import check_served, run_serve_and_load_test_step

    result = run_serve_and_load_test_step(
        plan.path,
        params,
        deployment=deployment.path,
        records=records.path,
        report=report.path,
        summary=summary.path,
    )
    for name, value in report_metrics(result.loadtest.report, result.loadtest.prediction).items():
        metrics.log_metric(name, value)
    check_served(result)
    r = result.loadtest.report
    return f"{r.completed} requests completed, {r.failed} failed"
