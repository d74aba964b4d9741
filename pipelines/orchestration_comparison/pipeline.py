"""The ``orchestration_comparison`` pipeline: the native and the Kubeflow path, side by side.

Shared steps: profile → inventory → plan. Then
- **native**: ``deploy_inference`` applies the plan's Deployment and kube-scheduler binds it; then
  ``load_test`` drives it;
- **kubeflow**: ``serve_and_load_test`` runs the server and the load test as one KFP task, whose pod
  KFP's driver places at run time from the plan's outputs through kfp-kubernetes
  (``add_node_affinity_json``, ``add_toleration_json``, ``add_node_selector_json``) and the accelerator
  type and count (``set_accelerator_type`` / ``set_accelerator_limit``, the count a string output) — the
  planner's answer reaches KFP without recompiling; the pod's node comes back through the downward API;
and ``compare_paths`` scores both (and logs them to MLflow), refusing a verdict when the two paths ran
different serving specs. Both paths run ``repeats`` times (3 by default), interleaved: one run after the
other, kubeflow then native in each repeat (a ``dsl.ParallelFor`` with parallelism 1 over
``repeat_runs``; the native deployment is torn down after each of its load tests), and ``compare_paths``
collects every run (``dsl.Collected``): with at least 3 runs per path its verdict comes from the runs in
the order they ran, a linear drift of the machine over them removed, so a machine that slows down
between the runs widens the interval instead of naming a winner; fewer runs name none. The plan is made
with the serving image (``SERVING_IMAGE``) so both paths run one image. The native deployment is also
torn down in an exit handler, by run id. In local runs (``gpuplace run --compare``) both paths use the
local engine (``kubeflow_backend=local``); against a gpuplace testenv the Kubeflow task's pod is created
as KFP's driver would (``kubeflow_backend=testenv``); the report says so.
"""

from kfp import dsl, kubernetes

from gpuplace.components.benchmarking.load_test import load_test
from gpuplace.components.benchmarking.repeat_runs import repeat_runs
from gpuplace.components.benchmarking.serve_and_load_test import serve_and_load_test
from gpuplace.components.images import SERVING_IMAGE
from gpuplace.components.reporting.compare_paths import compare_paths
from gpuplace.components.serving.deploy_inference import deploy_inference
from gpuplace.components.serving.teardown_inference import teardown_inference
from gpuplace.pipelines.common import profile_and_plan
from gpuplace.steps.run_params import pipeline_defaults

D = pipeline_defaults("orchestration_comparison")  # the run table's defaults (gpuplace.steps.run_params)


@dsl.pipeline(
    name="orchestration-comparison",
    description="Serve one placement plan natively and through Kubeflow, load-test both, and compare them.",
)
def pipeline(
    model: str = D.model,
    profile_device: str = D.profile_device,
    batch_sizes: str = D.batch_sizes,
    profile_prompt_tokens: str = D.profile_prompt_tokens,
    profile_output_tokens: str = D.profile_output_tokens,
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
    gpu_api: str = D.gpu_api,
    kubeflow_backend: str = D.kubeflow_backend,
    allow_misplacement: bool = D.allow_misplacement,
    max_requests: int = D.max_requests,
    repeats: int = D.repeats,
    measure_engine_steps: bool = D.measure_engine_steps,
    measure_operators: bool = D.measure_operators,
    weights: str = D.weights,
    penalty_usd_per_breach: float = D.penalty_usd_per_breach,
    engineering_weeks: float = D.engineering_weeks,
    rate_usd_per_week: float = D.rate_usd_per_week,
    log_to_mlflow: bool = D.log_to_mlflow,
    mlflow_uri: str = D.mlflow_uri,
    mlflow_experiment: str = D.mlflow_experiment,
) -> None:
    """Serve one plan natively and through Kubeflow, load-test both, and compare them.

    Args:
        model: Model preset (gpuplace catalog models), or a config.json / model directory in the image.
        profile_device: Device of the profiling task: auto, cpu, cuda, cuda:N.
        batch_sizes: Batch sizes to profile, comma-separated.
        profile_prompt_tokens: Prompt lengths to profile, comma-separated.
        profile_output_tokens: Output lengths to profile, comma-separated.
        accelerator_type: Resource name of the GPU the profiling task requests (the Kubeflow serving task's
            comes from the plan).
        inventory: Fleet source: cluster, a bundled fleet name, a fleet YAML, an Alibaba node CSV, or local
            (the machine the tasks run on, planned with the local engine's measured step time: set
            measure_engine_steps; both paths then serve locally).
        slo_tpot_ms: p99 time per output token the placement must meet.
        slo_ttft_ms: p99 time to first token the placement must meet.
        rate: Target request rate (req/s) for the plan and both load tests.
        prompt_tokens: Prompt length of the traffic the plan is made for and both load tests send
            (N, uniform:A:B, normal:M:S).
        output_tokens: Output length of that traffic.
        trace: Azure-format trace CSV: the plan is made for its length mix and both load tests replay it.
        target: kubernetes (apply the plan's manifests) or local (a server on the task's machine).
        namespace: Namespace of the native deployment.
        kubeconfig: Kubeconfig path for the native deploy/teardown; empty = in-cluster.
        runtime: What serves the deployed pods: auto (the KWOK stand-in on a gpuplace testenv, else
            kubelet), kubelet, standin or none (provisioning is then unknown).
        timeout_s: Deadline of the native rollout and of the Kubeflow task's server.
        gpu_api: How the native path's pods get GPUs: auto, dra (placement measured per GPU) or device-plugin.
        kubeflow_backend: Where the Kubeflow path's task serves: kfp (its own pod, in a KFP run), local (the
            local engine, as a local native target) or testenv (a gpuplace testenv: its pod created as KFP's
            driver would).
        allow_misplacement: Keep going when a path's pods are not where the plan put them (default: fail).
        max_requests: Requests each load test sends (Poisson arrivals at `rate`).
        repeats: How many times each path is deployed and load-tested (1–20), the paths' runs interleaved;
            the verdict's interval comes from the runs (a linear drift over them removed), and fewer than 3
            name no winner.
        measure_engine_steps: Also measure the local serving engine's step time in the profile task
            (needed for inventory local).
        measure_operators: Also time the model's kernels on the profile task's GPU; the plan then prices
            that GPU class with them instead of its defaults (docs/profiling.md, "Operators").
        weights: Criterion weights summing to 1, e.g. "tpot_p99=0.7,cost=0.3"; empty = defaults.
        penalty_usd_per_breach: SLA penalty per request that misses the SLO.
        engineering_weeks: ROI: weeks of engineering to adopt the winning mechanism.
        rate_usd_per_week: ROI: cost of one engineering week.
        log_to_mlflow: Log the comparison to MLflow (a parent run, one child per path).
        mlflow_uri: MLflow tracking URI; empty = $MLFLOW_TRACKING_URI, else a local store.
        mlflow_experiment: MLflow experiment.
    """
    _, plan = profile_and_plan(
        model=model,
        profile_device=profile_device,
        batch_sizes=batch_sizes,
        profile_prompt_tokens=profile_prompt_tokens,
        profile_output_tokens=profile_output_tokens,
        profile_mode="eager",
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
        image=SERVING_IMAGE,
    )

    # Both paths are measured with the same workload against the same plan (whose SLO judges both).
    workload = dict(
        plan=plan.outputs["plan"],
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        trace=trace,
        rate=rate,
        max_requests=max_requests,
    )
    teardown = teardown_inference(
        target=target,
        namespace=namespace,
        kubeconfig=kubeconfig,
        run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
    ).set_display_name("teardown native")
    with dsl.ExitHandler(teardown, name="native path and comparison"):
        runs = repeat_runs(repeats=repeats).set_display_name("repeated runs")
        # one run at a time, so the paths never compete for the same GPUs or CPUs
        with dsl.ParallelFor(runs.output, parallelism=1, name="run"):
            # Kubeflow path: KFP places this task's pod from the plan's outputs, at run time.
            kubeflow = serve_and_load_test(
                **workload,
                backend=kubeflow_backend,
                kubeconfig=kubeconfig,
                namespace=namespace,
                run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
                allow_misplacement=allow_misplacement,
                startup_timeout_s=timeout_s,
            ).set_display_name("kubeflow path: serve + load test")
            kubeflow.after(runs)  # kfp 2.17 does not make the loop wait for the task its items come from
            kubernetes.add_node_affinity_json(kubeflow, plan.outputs["node_affinity"])
            kubernetes.add_toleration_json(kubeflow, plan.outputs["tolerations"])
            kubernetes.add_node_selector_json(kubeflow, plan.outputs["node_selector"])
            kubeflow.set_accelerator_type(plan.outputs["accelerator_type"])
            kubeflow.set_accelerator_limit(plan.outputs["accelerator_count"])
            # kfp 2.17's compiler keeps the accelerator's channels out of the task's inputs, so a loop
            # does not pass them in ("component_input_parameter ... not found"): name them as inputs
            kubeflow._channel_inputs += [plan.outputs["accelerator_type"], plan.outputs["accelerator_count"]]
            kubernetes.use_field_path_as_env(kubeflow, "NODE_NAME", "spec.nodeName")
            kubernetes.use_field_path_as_env(kubeflow, "POD_NAMESPACE", "metadata.namespace")
            native = deploy_inference(
                plan=plan.outputs["plan"],
                target=target,
                namespace=namespace,
                kubeconfig=kubeconfig,
                run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
                timeout_s=timeout_s,
                runtime=runtime,
                gpu_api=gpu_api,
                allow_misplacement=allow_misplacement,
                path="native",
            ).set_display_name("native path: deploy")
            native.after(kubeflow)
            native_lt = load_test(deployment=native.outputs["deployment"], **workload).set_display_name(
                "native path: load test"
            )
            # the next run deploys afresh (its provisioning measured again); the exit handler still
            # tears down, by run id, what a failed run left
            teardown_inference(
                plan=plan.outputs["plan"],
                deployment=native.outputs["deployment"],
                target=target,
                namespace=namespace,
                kubeconfig=kubeconfig,
            ).set_display_name("native path: teardown").after(native_lt)
        compare_paths(
            native_deployment=dsl.Collected(native.outputs["deployment"]),
            native_loadtest=dsl.Collected(native_lt.outputs["report"]),
            kubeflow_deployment=dsl.Collected(kubeflow.outputs["deployment"]),
            kubeflow_loadtest=dsl.Collected(kubeflow.outputs["report"]),
            native_records=dsl.Collected(native_lt.outputs["records"]),
            kubeflow_records=dsl.Collected(kubeflow.outputs["records"]),
            plan=plan.outputs["plan"],
            inventory=inventory,
            weights=weights,
            penalty_usd_per_breach=penalty_usd_per_breach,
            engineering_weeks=engineering_weeks,
            rate_usd_per_week=rate_usd_per_week,
            log_to_mlflow=log_to_mlflow,
            mlflow_uri=mlflow_uri,
            mlflow_experiment=mlflow_experiment,
            kfp_run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
        ).set_display_name("compare paths")
