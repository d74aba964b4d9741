"""KFP component ``load_test``: a thin adapter over :mod:`gpuplace.steps.loadtest`.

Reads the endpoint (a URL, or the deployment artifact of ``deploy_inference``), the plan (its SLO,
traffic and prediction) and the workload parameters, runs one load test through the load-test step
and writes the per-request records, report.json, metrics and a Markdown
summary; then it fails the task when no request succeeded. Only the standard library and kfp are
imported at the top.
"""

from kfp import dsl
from kfp.dsl import Artifact, Dataset, Input, Markdown, Metrics, Output

from gpuplace.components.images import COMPONENTS_IMAGE


@dsl.component(base_image=COMPONENTS_IMAGE, install_kfp_package=False)
def load_test(
    records: Output[Dataset],
    report: Output[Artifact],
    metrics: Output[Metrics],
    summary: Output[Markdown],
    deployment: Input[Artifact] = None,  # type: ignore[assignment]
    plan: Input[Artifact] = None,  # type: ignore[assignment]
    endpoint: str = "",
    model: str = "",
    api: str = "completions",
    trace: str = "",
    time_scale: float = 1.0,
    prompt_tokens: str = "",
    output_tokens: str = "",
    max_prompt_tokens: int = 0,
    max_output_tokens: int = 0,
    rate: float = 0.0,
    arrival: str = "",
    burstiness: float = 0.0,
    concurrency: int = 0,
    max_requests: int = 100,
    max_duration_s: float = 0.0,
    seed: int = 0,
) -> None:
    """Load-test an OpenAI-compatible endpoint with streaming requests (vLLM's metric definitions).

    Args:
        deployment: deployment.json artifact of deploy_inference (gives the endpoint and model name).
        plan: The plan directory of plan_placement: the SLO, the traffic, the rate and the prediction
            come from it (parameters left empty take the plan's values).
        endpoint: Base URL of the endpoint, used when no deployment artifact is given.
        model: The requests' model field; empty = the deployment's, else the server's first model.
        api: completions or chat.
        trace: Path of a trace CSV (Azure LLM trace layout) to replay instead of synthetic load.
        time_scale: Trace time is multiplied by this (0.1 replays 10x faster).
        prompt_tokens: Synthetic prompt length: N, uniform:LO:HI or normal:MEAN:STD; empty = the plan's.
        output_tokens: Synthetic output length (forced), same forms; empty = the plan's.
        max_prompt_tokens: Cap on trace prompt lengths; 0 = none.
        max_output_tokens: Cap on trace output lengths; 0 = none.
        rate: Mean requests/s of an open loop; 0 = the plan's rate, else a closed loop.
        arrival: poisson, gamma or constant; empty = the plan's.
        burstiness: Gamma shape (<1 burstier); 0 = the plan's.
        concurrency: Requests in flight at most; 0 = unbounded (open loop) or 1 (closed loop).
        max_requests: Requests to send.
        max_duration_s: Stop sending after this many seconds; 0 = no bound.
        seed: Seed of lengths, arrivals and prompts.
    """
    params = dict(locals())  # the load test's parameters, by the names of gpuplace.steps.loadtest.PARAMS
    import json

    from gpuplace.loadtest.run import require_served
    from gpuplace.loadtest.summary import report_metrics
    from gpuplace.steps.loadtest import run_load_test_step

    config, result = run_load_test_step(
        params,
        deployment=deployment.path if deployment is not None else "",
        plan=plan.path if plan is not None else "",
        records=records.path,
        report=report.path,
        summary=summary.path,
    )
    for name, value in report_metrics(result.report, result.prediction).items():
        metrics.log_metric(name, value)
    records.metadata.update({"format": "parquet", "rows": len(result.records)})
    report.metadata.update({"endpoint": config.endpoint, "errors": json.dumps(dict(result.report.errors))})
    require_served(result, endpoint=config.endpoint)  # after the outputs: the task fails, they are kept
