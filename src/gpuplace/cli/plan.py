"""``gpuplace plan``: the plan step's table (:data:`gpuplace.steps.plan_params.PARAMS`) as flags → its typed
request and options → the plan step → a plan directory."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gpuplace.cli.base import Command
from gpuplace.units import to_ms


class PlanCommand(Command):
    name = "plan"
    help = "choose the cheapest GPU shape that meets a latency SLO and place it on a fleet"
    description = (
        "Predict p99 TTFT and TPOT of every shape the fleet offers (GPU model x whole GPU, MIG slice or\n"
        "time-sliced share x tensor-parallel degree x replicas), keep those meeting the SLO, choose the\n"
        "cheapest that can be placed (NUMA/PCIe/NVLink-aligned, least fragmentation), and write the plan\n"
        "directory: plan.json, manifests/, alternatives/ (the other forms, --emit), kfp/, candidates.md\n"
        "(docs/placement.md)."
    )
    epilog = (
        "examples: gpuplace plan --model llama-3.1-8b --inventory h100-nvlink --slo-tpot-ms 50 \\\n"
        "            --slo-ttft-ms 2000 --rate 50 --prompt-tokens 1024 --output-tokens 128 --out plan\n"
        "          gpuplace plan --model tiny --inventory local --engine-steps steps.json \\\n"
        "            --slo-tpot-ms 50 --slo-ttft-ms 2000 --rate 2 --out plan-local"
    )

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        from gpuplace.params import add_flags
        from gpuplace.steps import plan_params as plan

        add_flags(p, plan.INPUTS)
        add_flags(p.add_argument_group("SLO and traffic"), plan.SLO_AND_TRAFFIC)
        add_flags(p.add_argument_group("shapes and cost"), plan.SHAPES_AND_COST)
        add_flags(p.add_argument_group("serving"), plan.SERVING)
        add_flags(p.add_argument_group("forms (docs/deploy.md#forms)"), plan.FORMS)
        p.add_argument("--out", required=True, help="plan directory to write")

    def run(self, args: argparse.Namespace) -> int:
        from gpuplace.catalog import load_gpu_catalog
        from gpuplace.plandir import MANIFESTS_FORM
        from gpuplace.planner.tables import fragmentation_effect_text
        from gpuplace.steps.plan import run_plan_step
        from gpuplace.steps.plan_params import emit_options, plan_request, serving_options

        params = vars(args)
        catalog = load_gpu_catalog(args.gpu_catalog or None)
        result = run_plan_step(
            plan_request(params, catalog),
            profile=Path(args.profile) if args.profile else None,
            inventory=args.inventory,
            out=Path(args.out),
            catalog=catalog,
            options=serving_options(params),
            workload=args.workload,
            engine_steps=Path(args.engine_steps) if args.engine_steps else None,
            emit=emit_options(params),
            operators=Path(args.operators) if args.operators else None,
        )
        plan = result.plan
        for note in plan.notes:
            print(f"note: {note}", file=sys.stderr)
        print(result.candidates_markdown)
        pred = plan.chosen.prediction
        assert pred is not None
        precision = plan.engine.precision if plan.engine is not None else None
        served = f" in {precision.label}" if precision is not None and precision.uses_fp8 else ""
        print(
            f"chosen: {plan.chosen.label}{served} — p99 TPOT {to_ms(pred.tpot.p99):.2f} ms, "
            f"p99 TTFT {to_ms(pred.ttft.p99):.1f} ms (predicted for {plan.chosen.unit}), "
            f"${plan.cost_usd_per_month:,.0f}/month, fit ≥ {plan.chosen.fit_score:.2f}, "
            f"fragmentation {plan.fragmentation_before:.2f} → {plan.fragmentation_after:.2f} GPUs"
        )
        for p in plan.placements:
            print(
                f"  replica {p.replica}: {'+'.join(p.nodes)} {','.join(p.gpu_ids)} "
                f"({p.interconnect}, fit {p.fit_score:.2f})"
            )
        effect = fragmentation_effect_text(plan)
        if effect:
            print(effect)
        written = result.plan_dir
        print(
            f"wrote {written.plan_file}, {written.kfp_dir}/, {written.candidates_file} (plan {plan.plan_id}) "
            "and the forms:"
        )
        for form in written.forms or (MANIFESTS_FORM,):
            where = written.form_path(form)
            print(f"  {form}: {where}/" if where.is_dir() else f"  {form}: {where}")
        return 0
