"""The layers above the steps held together where they share a value: ``gpuplace run``'s flags and the main
job's configuration (one field per flag, the defaults written once in ``jobs.config``), its choices and the
deploy targets', and the two pipelines' shared parameters. Issue 34's run table (every layer made from the
step tables) is not built; these hold what it would replace."""

from __future__ import annotations

import argparse
import inspect
from dataclasses import MISSING, fields

from gpuplace.jobs.config import MainJobConfig
from tests.unit.test_step_params import _subparser


def _run_flags() -> dict[str, argparse.Action]:
    return {a.dest: a for a in _subparser("run")._actions if a.dest != "help"}


def test_every_field_of_the_main_job_is_a_run_flag_with_its_default() -> None:
    flags = _run_flags()
    config = {f.name: f for f in fields(MainJobConfig)}
    assert set(flags) == set(config), (sorted(set(flags) - set(config)), sorted(set(config) - set(flags)))
    for name, f in config.items():
        assert f.default is not MISSING, name
        assert flags[name].default == (str(f.default) if name == "workdir" else f.default), name
        assert flags[name].option_strings == ["--" + name.replace("_", "-")], name


def test_the_run_flags_choices_are_the_deploy_targets_and_runtimes() -> None:
    from gpuplace.deploy import RUNTIMES, TARGETS

    flags = _run_flags()
    assert set(flags["target"].choices) == set(TARGETS)
    assert tuple(flags["runtime"].choices) == RUNTIMES


def test_the_two_pipelines_agree_on_every_parameter_they_share() -> None:
    """``llm_placement`` and ``orchestration_comparison`` repeat 21 parameters: one default, one type each."""
    from gpuplace.pipelines.llm_placement.pipeline import pipeline as placement
    from gpuplace.pipelines.orchestration_comparison.pipeline import pipeline as comparison

    a = inspect.signature(placement.pipeline_func).parameters
    b = inspect.signature(comparison.pipeline_func).parameters
    shared = set(a) & set(b)
    assert len(shared) >= 20
    differ = {
        n: (a[n].default, b[n].default)
        for n in shared
        if (a[n].default, a[n].annotation) != (b[n].default, b[n].annotation)
    }
    assert not differ, differ


def test_the_run_command_builds_its_config_from_the_flags_by_field_name() -> None:
    """What ``gpuplace run`` hands the job is the flags' values by the config's field names: a value given on
    the command line reaches its field."""
    from pathlib import Path

    from gpuplace.cli import build_parser
    from gpuplace.cli.run import config_from_args

    args = build_parser().parse_args(["run", "--slo-tpot-ms", "35", "--repeats", "5", "--workdir", "w"])
    config = config_from_args(args)
    assert config == MainJobConfig(slo_tpot_ms=35.0, repeats=5, workdir=Path("w"))
