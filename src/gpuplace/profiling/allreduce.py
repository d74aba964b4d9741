"""All-reduce times by message size over several processes, for the operator table
(:mod:`gpuplace.profiling.operators`): NCCL with one process per GPU, or gloo on the CPU (which is how the
tests run it). Each rank runs in its own interpreter (``python -c``), so the caller's ``__main__`` is
never re-imported, as multiprocessing's spawn would.

A size's time is the slowest rank's median over ``repeats`` all-reduces, each after a barrier.
"""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import torch

from gpuplace.profiling.timing import median_spread, synchronize
from gpuplace.types.operators import ALL_REDUCE, OperatorRow


def _allreduce_worker(
    rank: int, ranks: int, port: int, kind: str, sizes: Sequence[int], repeats: int, out: str
) -> None:
    import time

    import torch.distributed as dist

    backend = "nccl" if kind == "cuda" else "gloo"
    device = torch.device("cuda", rank) if kind == "cuda" else torch.device("cpu")
    if kind == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=ranks)
    try:
        results = []
        for size in sizes:
            dtype = torch.bfloat16 if kind == "cuda" else torch.float32  # gloo has no bf16 sum everywhere
            x = torch.ones(max(1, size // dtype.itemsize), dtype=dtype, device=device)
            for _ in range(3):
                dist.all_reduce(x)
            samples = []
            for _ in range(repeats):
                dist.barrier()
                synchronize(device)
                t0 = time.perf_counter()
                dist.all_reduce(x)
                synchronize(device)
                samples.append(time.perf_counter() - t0)
            # every rank's time: the collective is done when the slowest rank is
            gathered = [0.0] * ranks
            dist.all_gather_object(gathered, statistics.median(samples))
            results.append((x.numel() * x.element_size(), max(gathered), median_spread(samples)[1]))
        if rank == 0:
            Path(out).write_text(json.dumps(results))
    finally:
        dist.destroy_process_group()


def measure_allreduce(
    device: torch.device, ranks: int, sizes: Sequence[int], repeats: int
) -> list[OperatorRow]:
    """All-reduce times over ``ranks`` processes, one per GPU (NCCL) or on the CPU (gloo)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "allreduce.json")
        args = [ranks, port, device.type, list(sizes), repeats, out]
        # one interpreter per rank (not multiprocessing's spawn, which re-imports the caller's __main__)
        code = (
            "import json, sys; from gpuplace.profiling.allreduce import _allreduce_worker as w; "
            "w(*json.loads(sys.argv[1]))"
        )
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", code, json.dumps([rank, *args])],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for rank in range(ranks)
        ]
        logs = [p.communicate(timeout=600)[0] for p in procs]
        failed = [(rank, log) for rank, (p, log) in enumerate(zip(procs, logs, strict=True)) if p.returncode]
        if failed:
            rank, log = failed[0]
            last = log.strip().splitlines()[-1] if log.strip() else "no output"
            raise RuntimeError(f"all-reduce rank {rank} failed: {last}")
        results = json.loads(Path(out).read_text())
    dtype = "bfloat16" if device.type == "cuda" else "float32"
    rows = [
        OperatorRow(
            op=ALL_REDUCE,
            dtype=dtype,
            seconds=s,
            ranks=ranks,
            bytes=float(n),
            repeats=repeats,
            spread=sp,
        )
        for n, s, sp in results
    ]
    return rows
