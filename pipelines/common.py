"""Steps both pipelines share: profile on the requested GPU → discover the fleet → plan."""

from kfp import dsl

from gpuplace.components.placement.discover_inventory import discover_inventory
from gpuplace.components.placement.plan_placement import plan_placement
from gpuplace.components.profiling.profile_latency import profile_latency


def profile_and_plan(
    *,
    model: str,
    profile_device: str,
    batch_sizes: str,
    profile_prompt_tokens: str,
    profile_output_tokens: str,
    profile_mode: str,
    accelerator_type: str,
    inventory: str,
    slo_tpot_ms: float,
    slo_ttft_ms: float,
    rate: float,
    prompt_tokens: str,
    output_tokens: str,
    trace: str = "",
    measure_engine_steps: bool = False,
    measure_operators: bool = False,
    image: str = "",
) -> tuple[dsl.PipelineTask, dsl.PipelineTask]:
    """Add the profile, inventory and plan tasks to the current pipeline; returns (profile, plan).

    The plan is made for the traffic the load test then sends (``prompt_tokens``, ``output_tokens``,
    ``trace``; the profile's own lengths are ``profile_*``); with
    ``inventory`` ``local`` it is a plan of the task's machine, predicted with the local engine's step
    time that the profile task measures when ``measure_engine_steps`` is set. With ``measure_operators`` the
    profile task times the model's kernels on its GPU and the plan prices that GPU class with them (the
    table passes from the profile's ``operators`` output to the plan's). ``image`` is the serving
    image the plan's manifests run ("": vLLM's own image).
    """
    profile = profile_latency(
        model=model,
        device=profile_device,
        batch_sizes=batch_sizes,
        prompt_tokens=profile_prompt_tokens,
        output_tokens=profile_output_tokens,
        mode=profile_mode,
        measure_engine_steps=measure_engine_steps,
        measure_operators=measure_operators,
    ).set_display_name("profile latency")
    profile.set_accelerator_type(accelerator_type).set_accelerator_limit(1)
    fleet = discover_inventory(source=inventory).set_display_name("discover inventory")
    plan = plan_placement(
        profile=profile.outputs["profile"],
        engine_steps=profile.outputs["engine_steps"],
        operators=profile.outputs["operators"],
        inventory_json=fleet.outputs["inventory"],
        model=model,
        slo_tpot_ms=slo_tpot_ms,
        slo_ttft_ms=slo_ttft_ms,
        rate=rate,
        prompt_tokens=prompt_tokens,
        output_tokens=output_tokens,
        trace=trace,
        image=image,
    ).set_display_name("plan placement")
    return profile, plan
