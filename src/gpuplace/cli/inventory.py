"""``gpuplace inventory``: load a fleet and print it, or write it as JSON for the planner and components."""

from __future__ import annotations

import argparse
import sys

from gpuplace.cli.base import Command
from gpuplace.types import Inventory


class InventoryCommand(Command):
    name = "inventory"
    help = "show a fleet: nodes, GPUs, MIG slices, topology, what is in use"
    description = (
        "Load a fleet (docs/inventory.md): a bundled fleet, a fleet YAML, an Alibaba node CSV, or the\n"
        "live cluster ('cluster', through GPU Feature Discovery's labels). --out writes it as JSON."
    )
    epilog = "example: gpuplace inventory --inventory mixed-a100-h100-l4"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        from gpuplace.params import add_flags
        from gpuplace.steps.inventory import PARAMS

        add_flags(p, PARAMS)
        p.add_argument("--gpu-catalog", default=None, help="a gpus.csv to use instead of the bundled one")
        p.add_argument("--out", default=None, help="also write the inventory as JSON here")
        p.add_argument("--list-bundled", action="store_true", help="list the bundled fleets and exit")

    def run(self, args: argparse.Namespace) -> int:
        from gpuplace.catalog import load_gpu_catalog
        from gpuplace.inventory import bundled_fleet_names
        from gpuplace.steps.inventory import run_inventory_step

        if args.list_bundled:
            print("\n".join(bundled_fleet_names()))
            return 0
        inventory = run_inventory_step(vars(args), args.out, catalog=load_gpu_catalog(args.gpu_catalog))
        for w in inventory.warnings:
            print(f"warning: {w}", file=sys.stderr)
        if len(inventory.nodes) <= 200:
            print(summary(inventory))
        else:
            print(
                f"{len(inventory.nodes)} nodes, {inventory.physical_gpu_count} GPUs from {inventory.source}"
            )
        if args.out:
            print(f"wrote {args.out}")
        return 0


def summary(inventory: Inventory) -> str:
    lines = [f"{'node':18} {'zone':8} {'rack':9} {'NUMA':>4} {'MIG':6} GPUs (free/total by model; slices)"]
    for n in inventory.nodes:
        by_model: dict[str, list[int]] = {}
        for g in n.whole_gpus:
            c = by_model.setdefault(g.gpu or f"unknown:{g.product}", [0, 0])
            c[0] += g.allocated == 0
            c[1] += 1
        parts = [f"{m} {free}/{total}" for m, (free, total) in sorted(by_model.items())]
        slices: dict[str, list[int]] = {}
        for s in n.mig_slices:
            c = slices.setdefault(s.mig_profile, [0, 0])
            c[0] += s.allocated == 0
            c[1] += 1
        parts += [f"MIG {p} {free}/{total}" for p, (free, total) in sorted(slices.items())]
        if n.gpu_sharing > 1:
            parts.append(f"time-sliced ×{n.gpu_sharing}")
        lines.append(
            f"{n.name:18} {n.zone:8} {n.rack:9} {n.numa_nodes:>4} {n.mig_strategy:6} {'; '.join(parts)}"
        )
    lines.append(
        f"{len(inventory.nodes)} nodes, {inventory.physical_gpu_count} GPUs "
        f"({inventory.mig_slice_count} MIG slices) from {inventory.source}"
    )
    return "\n".join(lines)
