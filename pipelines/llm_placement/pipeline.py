"""The ``llm_placement`` pipeline: profile → inventory → plan → deploy → load test → track.

Teardown runs in an exit handler, so a failed load test never leaves the deployment behind; the
exit task cannot read the guarded tasks' outputs, so it tears down by the run id the deploy step
labelled everything with. Defaults suit a cluster (a GPU, the live cluster's fleet, the
``kubernetes`` target); ``gpuplace run`` passes local values (README.md beside this file).
"""

from kfp import dsl

from gpuplace.components.benchmarking.load_test import load_test
from gpuplace.components.reporting.track_run import track_run
from gpuplace.components.serving.deploy_inference import deploy_inference
from gpuplace.components.serving.teardown_inference import teardown_inference
from gpuplace.labels import GPU_RESOURCE
from gpuplace.pipelines.common import profile_and_plan


@dsl.pipeline(
    name="llm-placement",
    description="Profile an LLM, plan its GPU placement against a latency SLO, deploy, load-test, track.",
)
def pipeline(
    model: str = "llama-3.1-8b",
    profile_device: str = "auto",
    batch_sizes: str = "1,8",
    prompt_tokens: str = "1024",
    output_tokens: str = "128",
    profile_mode: str = "eager",
    accelerator_type: str = GPU_RESOURCE,
    inventory: str = "cluster",
    slo_tpot_ms: float = 50.0,
    slo_ttft_ms: float = 2000.0,
    rate: float = 5.0,
    target: str = "kubernetes",
    namespace: str = "default",
    kubeconfig: str = "",
    rollout_timeout_s: float = 600.0,
    serving_runtime: str = "auto",
    traffic_prompt_tokens: str = "512",
    traffic_output_tokens: str = "128",
    loadtest_max_requests: int = 200,
    measure_engine_steps: bool = False,
    measure_operators: bool = False,
    trace: str = "",
    mlflow_uri: str = "",
    mlflow_experiment: str = "gpuplace",
    mlflow_workdir: str = "",
) -> None:
    """Profile, plan, deploy, load-test and track one LLM placement.

    Args:
        model: Model preset (gpuplace catalog models), or a config.json / model directory in the image.
        profile_device: Device of the profiling task: auto, cpu, cuda, cuda:N.
        batch_sizes: Batch sizes to profile, comma-separated.
        prompt_tokens: Prompt lengths to profile, comma-separated.
        output_tokens: Output lengths to profile, comma-separated.
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
        serving_runtime: What serves the deployed pods: auto (the KWOK stand-in on a gpuplace testenv, else
            kubelet), kubelet, standin or none (provisioning is then unknown).
        rollout_timeout_s: Deadline of the rollout.
        traffic_prompt_tokens: Prompt length of the traffic the plan is made for and the load test sends
            (N, uniform:A:B, normal:M:S).
        traffic_output_tokens: Output length of that traffic.
        loadtest_max_requests: Requests the load test sends (Poisson arrivals at `rate`).
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
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        profile_mode=profile_mode,
        accelerator_type=accelerator_type,
        inventory=inventory,
        slo_tpot_ms=slo_tpot_ms,
        slo_ttft_ms=slo_ttft_ms,
        rate=rate,
        traffic_prompt_tokens=traffic_prompt_tokens,
        traffic_output_tokens=traffic_output_tokens,
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
            timeout_s=rollout_timeout_s,
            runtime=serving_runtime,
        ).set_display_name("deploy")
        measured = load_test(
            deployment=deploy.outputs["deployment"],
            plan=plan.outputs["plan"],
            prompt_tokens=traffic_prompt_tokens,
            output_tokens=traffic_output_tokens,
            trace=trace,
            rate=rate,
            max_requests=loadtest_max_requests,
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
