"""repeat_runs: the function called directly, and the real component under kfp.local."""

import pytest

from gpuplace.components.benchmarking.repeat_runs import repeat_runs
from gpuplace.errors import InvalidInput


def test_python_func_lists_the_runs() -> None:
    assert repeat_runs.python_func(repeats=3) == [1, 2, 3]
    assert repeat_runs.python_func() == [1, 2, 3]  # steps.compare.REPEAT_RUNS's default


@pytest.mark.parametrize("bad", [0, -1, 21, 2.5])
def test_python_func_refuses_a_count_outside_its_range(bad: float) -> None:
    with pytest.raises(InvalidInput, match=r"repeats="):
        repeat_runs.python_func(repeats=bad)


@pytest.mark.integration
def test_runs_under_the_local_runner(kfp_local: object) -> None:
    task = repeat_runs(repeats=2)
    assert [int(x) for x in task.output] == [1, 2]
