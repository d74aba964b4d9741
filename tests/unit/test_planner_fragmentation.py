"""FGD fragmentation on hand-made nodes, the typical task mix, and the trace replay's policies."""

from __future__ import annotations

import pytest

from gpuplace.errors import InvalidInput
from gpuplace.planner.fragmentation import (
    FragmentationModel,
    TaskClass,
    parse_mix,
    task_fragment,
    typical_mix,
)
from gpuplace.planner.replay import POLICIES, SimNode, replay

HALF = TaskClass(1, 500)
WHOLE = TaskClass(1, 1000)
TWO = TaskClass(2, 1000)


def test_fragment_of_one_task_follows_the_paper_cases() -> None:
    free = [1000, 300, 0, 600]
    assert task_fragment(free, 8000, "T4", HALF) == 300  # fits: only the 300 share is too small
    assert task_fragment(free, 8000, "T4", WHOLE) == 900  # fits on GPU0: the partial GPUs are fragments
    assert task_fragment(free, 8000, "T4", TWO) == 1900  # cannot fit: everything free is a fragment
    assert task_fragment(free, 8000, "T4", TaskClass(0, 0, 1000)) == 1900  # asks for no GPU
    assert task_fragment(free, 8000, "T4", TaskClass(1, 500, gpu_types=frozenset({"V100M16"}))) == 1900
    assert task_fragment(free, 100, "T4", TaskClass(1, 500, cpu_milli=1000)) == 1900  # lacks CPU
    assert task_fragment([0, 0], 8000, "T4", HALF) == 0


def test_node_fragmentation_is_the_popularity_weighted_expectation() -> None:
    model = FragmentationModel((TaskClass(1, 500, weight=0.5), TaskClass(1, 1000, weight=0.5)))
    assert model.node([1000, 300]) == pytest.approx(0.5 * 300 + 0.5 * 300)
    assert model.node([300, 1000]) == model.node([1000, 300])  # memoised on the sorted shares


def test_typical_mix_keeps_the_popular_shapes_and_normalises() -> None:
    shapes = (
        [(1, 1000, 0, frozenset())] * 90 + [(1, 500, 0, frozenset())] * 8 + [(8, 1000, 0, frozenset())] * 2
    )
    mix = typical_mix(shapes, popularity_threshold=0.95)
    assert [(t.num_gpu, t.gpu_milli) for t in mix] == [(1, 1000), (1, 500)]
    assert sum(t.weight for t in mix) == pytest.approx(1.0)


def test_parse_mix() -> None:
    mix = parse_mix("1:2,0.5:1,4:1")
    assert [(t.num_gpu, t.gpu_milli, t.weight) for t in mix] == [
        (1, 1000, 0.5),
        (1, 500, 0.25),
        (4, 1000, 0.25),
    ]
    with pytest.raises(InvalidInput, match="task_mix"):
        parse_mix("1.5:1")


NODES = [SimNode(f"n{i}", 16000, 4, "T4") for i in range(4)]
# Half-GPU tasks then whole 4-GPU tasks: scattering the halves leaves no node able to take a 4-GPU task.
TASKS = [TaskClass(1, 500, 1000)] * 4 + [TaskClass(4, 1000, 1000)] * 4


@pytest.mark.parametrize("policy", POLICIES)
def test_replay_never_over_allocates_and_reports_checkpoints(policy: str) -> None:
    mix = typical_mix([t.key for t in TASKS])
    result = replay(NODES, TASKS, policy, mix, seed=1, until=1.3)
    assert result.capacity_gpus == 16
    assert set(result.checkpoints) >= {0.5, 1.0}
    assert all(0 <= v <= 1 for v in result.checkpoints.values())


def test_fgd_packs_shared_tasks_where_random_fit_scatters_them() -> None:
    mix = (TaskClass(1, 500, weight=0.5), TaskClass(4, 1000, weight=0.5))
    tasks = [TaskClass(1, 500)] * 2
    nodes = [SimNode(f"n{i}", 16000, 4, "T4") for i in range(8)]
    fgd = replay(nodes, tasks, "fgd", mix, seed=0, until=1.0, checkpoints=(1.0,))
    gp = replay(nodes, tasks, "gpuplace", mix, seed=0, until=1.0, checkpoints=(1.0,))
    assert (
        fgd.checkpoints[1.0]
        <= replay(nodes, tasks, "random", mix, seed=0, until=1.0, checkpoints=(1.0,)).checkpoints[1.0]
    )
    assert gp.checkpoints[1.0] <= fgd.checkpoints[1.0] + 1e-9


def test_replay_is_deterministic_per_seed() -> None:
    mix = typical_mix([t.key for t in TASKS])
    assert replay(NODES, TASKS, "fgd", mix, seed=3) == replay(NODES, TASKS, "fgd", mix, seed=3)
