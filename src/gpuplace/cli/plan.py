"""``gpuplace plan``: flags → :class:`~gpuplace.planner.PlanRequest` → the plan step → a plan directory."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpuplace.cli.base import Command


class PlanCommand(Command):
    name = "plan"
    help = "choose the cheapest GPU shape that meets a latency SLO and place it on a fleet"
    description = (
        "Predict p99 TTFT and TPOT of every shape the fleet offers (GPU model x whole GPU, MIG slice or\n"
        "time-sliced share x tensor-parallel degree x replicas), keep those meeting the SLO, choose the\n"
        "cheapest that can be placed (NUMA/PCIe/NVLink-aligned, least fragmentation), and write the plan\n"
        "directory: plan.json, manifests/, alternatives/ (DRA, KServe), kfp/, candidates.md\n"
        "(docs/placement.md)."
    )
    epilog = (
        "examples: gpuplace plan --model llama-3.1-8b --inventory h100-nvlink --slo-tpot-ms 50 \\\n"
        "            --slo-ttft-ms 2000 --rate 50 --prompt-tokens 1024 --output-tokens 128 --out plan\n"
        "          gpuplace plan --model tiny --inventory local --engine-steps steps.json \\\n"
        "            --slo-tpot-ms 50 --slo-ttft-ms 2000 --rate 2 --out plan-local"
    )

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--model",
            required=True,
            help="the model to place: the preset (or config.json) the profile measured",
        )
        p.add_argument(
            "--profile",
            default=None,
            help="profile Parquet written by `gpuplace profile`: calibrates its own GPU model (default: "
            "GPU-class efficiency defaults for every GPU)",
        )
        p.add_argument(
            "--inventory",
            default="mixed-a100-h100-l4",
            help="bundled fleet name, fleet YAML, Alibaba node CSV, 'cluster', or 'local' (this machine, "
            "planned with --engine-steps)",
        )
        p.add_argument(
            "--engine-steps",
            default=None,
            help="the local engine's measured step time (`gpuplace profile --engine-steps --out FILE`); "
            "needed for --inventory local",
        )
        slo = p.add_argument_group("SLO and traffic")
        slo.add_argument(
            "--slo-tpot-ms", type=float, required=True, help="p99 time per output token target, ms"
        )
        slo.add_argument(
            "--slo-ttft-ms", type=float, required=True, help="p99 time to first token target, ms"
        )
        slo.add_argument("--rate", type=float, required=True, help="target request rate, requests/s")
        slo.add_argument(
            "--prompt-tokens", default="512", help="prompt length: N, uniform:LO:HI or normal:MEAN:STD"
        )
        slo.add_argument("--output-tokens", default="128", help="output length, same forms")
        slo.add_argument(
            "--trace", default="", help="a trace CSV (Azure LLM trace layout) whose length mix to plan for"
        )
        choice = p.add_argument_group("shapes and cost")
        choice.add_argument("--kinds", default="whole,mig,shared", help="shapes to consider")
        choice.add_argument(
            "--gpus",
            default="",
            help="catalog GPU names to allow, comma-separated (default: all in the fleet)",
        )
        choice.add_argument(
            "--price",
            dest="prices",
            action="append",
            default=[],
            metavar="GPU=USD_PER_HOUR",
            help="override a catalog price",
        )
        choice.add_argument(
            "--gpu-catalog", default=None, help="a gpus.csv to use instead of the bundled one"
        )
        choice.add_argument(
            "--fit-threshold", type=float, default=0.85, help="reject placements whose GPU-fit score is lower"
        )
        choice.add_argument(
            "--max-load-share",
            type=float,
            default=None,
            help="--inventory local: plan at most this share of the local engine's measured capacity "
            "(default 0.5; it admits without a cap and collapsed above it; docs/placement.md)",
        )
        choice.add_argument(
            "--task-mix",
            default="",
            help="fragmentation task mix GPUS:WEIGHT,... (default: the fleet's own workload)",
        )
        choice.add_argument(
            "--workload", default="", help="a pod-list CSV (Alibaba format) to measure fragmentation against"
        )
        choice.add_argument(
            "--breach-penalty-usd", type=float, default=0.0, help="cost of one SLA breach, USD"
        )
        serving = p.add_argument_group("serving")
        serving.add_argument("--name", default="", help="Deployment name (default: gpuplace-<model>)")
        serving.add_argument(
            "--image", default="", help="serving image (default: vLLM's OpenAI server, pinned)"
        )
        serving.add_argument("--model-path", default="", help="what the server loads (default: --model)")
        serving.add_argument(
            "--numa-align", action="store_true", help="size CPUs to the GPUs' NUMA node share"
        )
        serving.add_argument("--priority-class", default="", help="priorityClassName of the serving pods")
        p.add_argument("--out", required=True, help="plan directory to write")

    def run(self, args: argparse.Namespace) -> int:
        from gpuplace.catalog import load_gpu_catalog
        from gpuplace.manifests import ServingOptions
        from gpuplace.planner import PlanRequest
        from gpuplace.planner.step import run_plan_step
        from gpuplace.planner.tables import fragmentation_effect_text

        params = vars(args)
        catalog = load_gpu_catalog(args.gpu_catalog)
        result = run_plan_step(
            PlanRequest.from_params(params, catalog),
            profile=Path(args.profile) if args.profile else None,
            inventory=args.inventory,
            out=Path(args.out),
            catalog=catalog,
            options=ServingOptions.from_params(params),
            workload=args.workload,
            engine_steps=Path(args.engine_steps) if args.engine_steps else None,
        )
        plan = result.plan
        for note in plan.notes:
            print(f"note: {note}", file=sys.stderr)
        print(result.candidates_markdown)
        pred = plan.chosen.prediction
        assert pred is not None
        print(
            f"chosen: {plan.chosen.label} — p99 TPOT {pred.tpot_p99_s * 1e3:.2f} ms, "
            f"p99 TTFT {pred.ttft_p99_s * 1e3:.1f} ms (predicted for {plan.chosen.unit}), "
            f"${plan.cost_usd_per_month:,.0f}/month, fit ≥ {plan.chosen.fit_score:.2f}, "
            f"fragmentation {plan.fragmentation_before:.2f} → {plan.fragmentation_after:.2f} GPUs"
        )
        for p in plan.placements:
            print(
                f"  replica {p.replica}: {p.node} {','.join(p.gpu_ids)} "
                f"({p.interconnect}, fit {p.fit_score:.2f})"
            )
        effect = fragmentation_effect_text(plan)
        if effect:
            print(effect)
        out = result.plan_dir.path
        print(f"wrote {out}/plan.json, manifests/, alternatives/, kfp/, candidates.md (plan {plan.plan_id})")
        return 0
