"""A pipeline run's folder of task outputs, as kfp's local runner lays it out, read back for the main job.

A task's output sits at ``<task>/<name>``, or, for a task in a loop (``orchestration_comparison``'s
repeated runs), at ``for-loop-N-iteration-I/<task>/<name>``; :func:`all_outputs` finds them in run order.
:func:`path_outputs` pairs each path's runs with their deployment records and load-test reports,
:func:`format_paths` prints what each measured, and :func:`mlflow_url` is where the tracking task said
the MLflow run is.
"""

from __future__ import annotations

from pathlib import Path

from gpuplace.units import ms


def all_outputs(outputs: Path, task: str, name: str) -> list[Path]:
    """Every run's output ``name`` of ``task``, in run order: at the top, or in a loop's iterations."""
    top = sorted(p for p in outputs.glob(f"{task}*/{name}") if p.exists())
    loop = sorted(
        outputs.glob(f"*-iteration-*/{task}*/{name}"), key=lambda p: int(p.parts[-3].split("-")[-1])
    )
    return top + [p for p in loop if p.exists()]


def one_output(outputs: Path, task: str, name: str) -> Path:
    found = all_outputs(outputs, task, name)
    if not found:
        raise FileNotFoundError(f"{outputs}: no output {name!r} of task {task!r}")
    return found[0]


def mlflow_url(outputs: Path) -> str:
    """The MLflow parent run's page, from what the tracking task recorded: ``compare_paths``'s comparison
    metadata, or ``track_run``'s return value ("...; the run: URL"); "" when neither did."""
    import json
    import re

    for f in sorted(outputs.glob("*/executor_output.json")):
        data = json.loads(f.read_text())
        for art in ((data.get("artifacts") or {}).get("comparison") or {}).get("artifacts") or []:
            if url := (art.get("metadata") or {}).get("mlflow_url"):
                return str(url)
        found = re.search(r"the run: (\S+)", str((data.get("parameterValues") or {}).get("Output", "")))
        if found:
            return found.group(1)
    return ""


def path_outputs(outputs: Path) -> list[tuple[str, Path | None, Path | None]]:
    """(path, deployment.json, load-test report) of each path's runs whose outputs exist, in flow order;
    with repeated runs the path is labelled with the run's number (``native #2``)."""
    found: list[tuple[str, Path | None, Path | None]] = []
    for path, deploy_task, report_task in (
        ("native", "deploy-inference", "load-test"),
        ("kubeflow", "serve-and-load-test", "serve-and-load-test"),
    ):
        deps: list[Path | None] = [p for p in all_outputs(outputs, deploy_task, "deployment") if p.is_file()]
        reps: list[Path | None] = [p for p in all_outputs(outputs, report_task, "report") if p.is_file()]
        n = max(len(deps), len(reps))
        for i in range(n):
            label = f"{path} #{i + 1}" if n > 1 else path
            found.append((label, (deps[i:] or [None])[0], (reps[i:] or [None])[0]))
    return found


def format_paths(outputs: Path) -> list[str]:
    """One line per path that ran: measured nodes and GPU devices, provisioning, and the load test."""
    from gpuplace.deploy import read_record
    from gpuplace.loadtest.io import read_report

    lines = [
        f"{'path':11} {'nodes (measured)':18} {'GPUs (measured)':30} {'provisioning s':>14} "
        f"{'p99 TTFT ms':>11} {'p99 TPOT ms':>11} {'ok/failed':>9}"
    ]
    for path, dep_file, rep_file in path_outputs(outputs):
        dep = read_record(dep_file) if dep_file is not None else None
        rep = read_report(rep_file) if rep_file is not None else None
        nodes = ",".join(sorted({p.node for p in dep.pods if p.node})) if dep else "-"
        gpus = "-"
        if dep is not None:
            ids = [g for p in dep.pods for g in p.gpu_ids]
            held = sum(p.gpu_count for p in dep.pods)
            gpus = (
                ",".join(ids)
                if ids
                else (f"{held}× {dep.pods[0].gpu_resource} (node level)" if held else "none")
            )
        prov = dep.provisioning() if dep else None
        provisioning = f"{prov.max:.2f}" if prov is not None and prov.count else "unknown"
        ttft = ms(rep.ttft.p99, 2) if rep else "-"
        tpot = ms(rep.tpot.p99, 2) if rep else "-"
        done = f"{rep.completed}/{rep.failed}" if rep else "-"
        lines.append(
            f"{path:11} {nodes or '-':18} {gpus:30} {provisioning:>14} {ttft:>11} {tpot:>11} {done:>9}"
        )
        if dep is not None and dep.mismatches():
            lines += [f"{'':11} placement mismatch: {m}" for m in dep.mismatches()]
        if dep is not None:
            from gpuplace.deploy import provisioning_split

            lines += [f"{'':11} {line}" for line in provisioning_split(dep)]
    return lines


def format_partial(outputs: Path) -> str:
    """What the tasks that finished measured, for a run that failed."""
    lines = format_paths(outputs)
    return "\n".join(lines) if len(lines) > 1 else ""


def served_on(outputs: Path) -> list[str]:
    from gpuplace.deploy import read_record

    return [read_record(d).served_on for _, d, _ in path_outputs(outputs) if d is not None]
