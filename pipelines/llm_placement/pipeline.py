"""The ``llm_placement`` pipeline: profile → inventory → plan → deploy → load test → track.

Teardown runs in an exit handler, so a failed load test never leaves the deployment behind; the
exit task cannot read the guarded tasks' outputs, so it tears down by the run id the deploy step
labelled everything with. Defaults suit a cluster (a GPU, the live cluster's fleet, the
``kubernetes`` target) and come from the run table, as ``gpuplace run``'s do (README.md beside this
file).
"""

from kfp import dsl

from gpuplace.components.benchmarking.load_test import load_test
from gpuplace.components.reporting.track_run import track_run
from gpuplace.components.serving.deploy_inference import deploy_inference
from gpuplace.components.serving.teardown_inference import teardown_inference
from gpuplace.pipelines.common import profile_and_plan
from gpuplace.steps.run_params import pipeline_defaults

D = pipeline_defaults("llm_placement")  # the run table's defaults (gpuplace.steps.run_params)


@dsl.pipeline(
    name="llm-placement",
    description="Profile an LLM, plan its GPU placement against a latency SLO, deploy, load-test, track.",
)
def pipeline(
    model: str = D.model,
    profile_device: str = D.profile_device,
    batch_sizes: str = D.batch_sizes,
    profile_prompt_tokens: str = D.profile_prompt_tokens,
    profile_output_tokens: str = D.profile_output_tokens,
    profile_mode: str = D.profile_mode,
    accelerator_type: str = D.accelerator_type,
    inventory: str = D.inventory,
    slo_tpot_ms: float = D.slo_tpot_ms,
    slo_ttft_ms: float = D.slo_ttft_ms,
    rate: float = D.rate,
    prompt_tokens: str = D.prompt_tokens,
    output_tokens: str = D.output_tokens,
    trace: str = D.trace,
    target: str = D.target,
    namespace: str = D.namespace,
    kubeconfig: str = D.kubeconfig,
    runtime: str = D.runtime,
    timeout_s: float = D.timeout_s,
    max_requests: int = D.max_requests,
    measure_engine_steps: bool = D.measure_engine_steps,
    measure_operators: bool = D.measure_operators,
    mlflow_uri: str = D.mlflow_uri,
    mlflow_experiment: str = D.mlflow_experiment,
    mlflow_workdir: str = D.mlflow_workdir,
) -> None:
    """Profile, plan, deploy, load-test and track one LLM placement.

    Args:
        model: Model preset (gpuplace catalog models), or a config.json / model directory in the image.
        profile_device: Device of the profiling task: auto, cpu, cuda, cuda:N.
        batch_sizes: Batch sizes to profile, comma-separated.
        profile_prompt_tokens: Prompt lengths to profile, comma-separated.
        profile_output_tokens: Output lengths to profile, comma-separated.
        profile_mode: eager, static (static KV cache + CUDA graphs) or both.
        accelerator_type: Resource name of the GPU the profiling task requests.
        inventory: Fleet source: cluster, a bundled fleet name, a fleet YAML, an Alibaba node CSV, or local
            (the machine the tasks run on, planned with the local engine's measured step time: set
            measure_engine_steps and target local).
        slo_tpot_ms: p99 time per output token the placement must meet.
        slo_ttft_ms: p99 time to first token the placement must meet.
        rate: Target request rate (req/s) the placement must serve.
        target: kubernetes (apply the plan's manifests) or local (a server on the task's machine).
        namespace: Namespace to deploy into.
        kubeconfig: Kubeconfig path for the deploy and teardown tasks; empty = in-cluster.
        runtime: What serves the deployed pods: auto (the KWOK stand-in on a gpuplace testenv, else
            kubelet), kubelet, standin or none (provisioning is then unknown).
        timeout_s: Deadline of the rollout.
        prompt_tokens: Prompt length of the traffic the plan is made for and the load test sends
            (N, uniform:A:B, normal:M:S).
        output_tokens: Output length of that traffic.
        max_requests: Requests the load test sends (Poisson arrivals at `rate`).
        measure_engine_steps: Also measure the local serving engine's step time in the profile task
            (needed for inventory local).
        measure_operators: Also time the model's kernels on the profile task's GPU; the plan then prices
            that GPU class with them instead of its defaults (docs/profiling.md, "Operators").
        trace: Azure-format trace CSV: the plan is made for its length mix and the load test replays it.
        mlflow_uri: MLflow tracking URI; empty = $MLFLOW_TRACKING_URI, else a local store.
        mlflow_experiment: MLflow experiment.
        mlflow_workdir: Folder of the local MLflow store when no URI is set.
    """
    profile, plan = profile_and_plan(
        model=model,
        profile_device=profile_device,
        batch_sizes=batch_sizes,
        profile_prompt_tokens=profile_prompt_tokens,
        profile_output_tokens=profile_output_tokens,
        profile_mode=profile_mode,
        accelerator_type=accelerator_type,
        inventory=inventory,
        slo_tpot_ms=slo_tpot_ms,
        slo_ttft_ms=slo_ttft_ms,
        rate=rate,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        trace=trace,
        measure_engine_steps=measure_engine_steps,
        measure_operators=measure_operators,
    )
    teardown = teardown_inference(
        target=target, namespace=namespace, kubeconfig=kubeconfig, run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER
    ).set_display_name("teardown")
    with dsl.ExitHandler(teardown, name="deploy and measure"):
        deploy = deploy_inference(
            plan=plan.outputs["plan"],
            target=target,
            namespace=namespace,
            kubeconfig=kubeconfig,
            run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
            timeout_s=timeout_s,
            runtime=runtime,
        ).set_display_name("deploy")
        measured = load_test(
            deployment=deploy.outputs["deployment"],
            plan=plan.outputs["plan"],
            prompt_tokens=prompt_tokens,
            output_tokens=output_tokens,
            trace=trace,
            rate=rate,
            max_requests=max_requests,
        ).set_display_name("load test")
        track_run(
            profile=profile.outputs["profile"],
            plan=plan.outputs["plan"],
            deployment=deploy.outputs["deployment"],
            report=measured.outputs["report"],
            records=measured.outputs["records"],
            mlflow_uri=mlflow_uri,
            mlflow_experiment=mlflow_experiment,
            mlflow_workdir=mlflow_workdir,
            kfp_run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
        ).set_display_name("track in MLflow")
