"""KFP component ``load_test``: a thin adapter over :mod:`gpuplace.loadtest`.

Reads the endpoint (a URL, or the deployment artifact of ``deploy_inference``) and the workload
parameters, calls ``gpuplace.loadtest.step.run_loadtest_step`` and writes the per-request records,
report.json, metrics and a Markdown summary. Only the standard library and kfp are imported here.
"""

from kfp import dsl
from kfp.dsl import Artifact, Dataset, Input, Markdown, Metrics, Output

from components.images import CPU_IMAGE


@dsl.component(base_image=CPU_IMAGE, install_kfp_package=False)
def load_test(
    records: Output[Dataset],
    report: Output[Artifact],
    metrics: Output[Metrics],
    summary: Output[Markdown],
    deployment: Input[Artifact] = None,  # type: ignore[assignment]
    endpoint: str = "",
    model: str = "",
    api: str = "completions",
    trace: str = "",
    time_scale: float = 1.0,
    prompt_tokens: str = "64",
    output_tokens: str = "32",
    max_prompt_tokens: int = 0,
    max_output_tokens: int = 0,
    rate: float = 0.0,
    arrival: str = "poisson",
    burstiness: float = 1.0,
    concurrency: int = 0,
    max_requests: int = 100,
    max_duration_s: float = 0.0,
    seed: int = 0,
    slo_ttft_ms: float = 0.0,
    slo_tpot_ms: float = 0.0,
    plan: Input[Artifact] = None,  # type: ignore[assignment]
) -> None:
    """Load-test an OpenAI-compatible endpoint with streaming requests (vLLM's metric definitions).

    Args:
        deployment: deployment.json artifact of deploy_inference (gives the endpoint and model name).
        endpoint: Base URL of the endpoint, used when no deployment artifact is given.
        model: The requests' model field; empty = the deployment's, else the server's first model.
        api: completions or chat.
        trace: Path of a trace CSV (Azure LLM trace layout) to replay instead of synthetic load.
        time_scale: Trace time is multiplied by this (0.1 replays 10x faster).
        prompt_tokens: Synthetic prompt length: N, uniform:LO:HI or normal:MEAN:STD.
        output_tokens: Synthetic output length (forced), same forms.
        max_prompt_tokens: Cap on trace prompt lengths; 0 = none.
        max_output_tokens: Cap on trace output lengths; 0 = none.
        rate: Mean requests/s of an open loop; 0 = closed loop at `concurrency`.
        arrival: poisson, gamma or constant.
        burstiness: Gamma shape (<1 burstier).
        concurrency: Requests in flight at most; 0 = unbounded (open loop) or 1 (closed loop).
        max_requests: Requests to send.
        max_duration_s: Stop sending after this many seconds; 0 = no bound.
        seed: Seed of lengths, arrivals and prompts.
        slo_ttft_ms: p99 TTFT bound for goodput; 0 = none.
        slo_tpot_ms: p99 TPOT bound for goodput; 0 = none.
        plan: plan.json artifact; its predicted p99 TTFT/TPOT are compared with the measurement.
    """
    import json

    from gpuplace.loadtest.step import config_from_component_params, report_metrics, run_loadtest_to_paths

    config = config_from_component_params(
        endpoint=endpoint,
        deployment=deployment.path if deployment is not None else "",
        plan=plan.path if plan is not None else "",
        model=model,
        api=api,
        trace=trace,
        time_scale=time_scale,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        max_prompt_tokens=max_prompt_tokens,
        max_output_tokens=max_output_tokens,
        rate=rate,
        arrival=arrival,
        burstiness=burstiness,
        concurrency=concurrency,
        max_requests=max_requests,
        max_duration_s=max_duration_s,
        seed=seed,
        slo_ttft_ms=slo_ttft_ms,
        slo_tpot_ms=slo_tpot_ms,
    )
    result = run_loadtest_to_paths(config, records=records.path, report=report.path, summary=summary.path)
    for name, value in report_metrics(result.report, result.prediction).items():
        metrics.log_metric(name, value)
    records.metadata.update({"format": "parquet", "rows": len(result.records)})
    report.metadata.update({"endpoint": config.endpoint, "errors": json.dumps(dict(result.report.errors))})
