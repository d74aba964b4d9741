"""KFP component ``repeat_runs``: a thin adapter over :func:`gpuplace.steps.compare.repeat_runs`.

Turns the ``repeats`` count of ``orchestration_comparison`` into the list its ``dsl.ParallelFor`` loops
over (KFP loops over lists, not counts), refusing a count outside 1..20 before anything is deployed.
Only the standard library and kfp are imported here.
"""

from kfp import dsl

from gpuplace.components.images import COMPONENTS_IMAGE


@dsl.component(base_image=COMPONENTS_IMAGE, install_kfp_package=False)
def repeat_runs(repeats: int = 3) -> list:
    """The run numbers 1..repeats, one loop item per repeated run of both paths.

    Args:
        repeats: How many times each path is deployed and load-tested with the same workload
            (1–20); fewer than 3 name no winner.
    """
    from gpuplace.steps.compare import repeat_runs as runs

    return runs(repeats)
