"""Serving: vLLM arguments from a plan's shape, model-directory cache keys, and the local target's guards."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpuplace.catalog.modeldir import model_dir_key
from gpuplace.deploy.local import deploy_local, teardown_local
from gpuplace.errors import InvalidInput, UnknownName
from gpuplace.serving.runtime import vllm_args
from gpuplace.types import DeploymentRecord


def test_vllm_args_carry_the_plan_shape_and_each_engine_setting_once() -> None:
    args = vllm_args(
        model="meta-llama/Llama-3.1-8B", served_model_name="llama", tensor_parallel_size=2,
        dtype="bfloat16", random_weights=True, engine_args=["--max-model-len", "8192", "--max-num-seqs", "8"],
    )  # fmt: skip
    joined = " ".join(args)
    assert args[0] == "meta-llama/Llama-3.1-8B"
    assert "--tensor-parallel-size 2" in joined and "--dtype bfloat16" in joined
    assert "--max-model-len 8192" in joined and "--load-format dummy" in joined
    assert "--served-model-name llama" in joined and "--port 8000" in joined
    assert sum(a.startswith("--") for a in args) == len({a for a in args if a.startswith("--")})


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"tensor_parallel_size": 0}, "tensor_parallel_size"), ({"dtype": "int4"}, "dtype"),
     ({"engine_args": ["--max-num-seqs", "8", "--max-num-seqs", "9"]}, "engine_args")],
)  # fmt: skip
def test_vllm_args_reject_bad_values(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput, match=rf"^{field}="):
        vllm_args(model="m", **kwargs)  # type: ignore[arg-type]


def test_model_dir_key_is_stable_and_depends_on_preset_and_seed() -> None:
    assert model_dir_key("tiny") == model_dir_key("tiny")
    assert model_dir_key("tiny").startswith("tiny-")
    assert model_dir_key("tiny", seed=1) != model_dir_key("tiny")
    assert model_dir_key("llama-100m") != model_dir_key("tiny")
    with pytest.raises(UnknownName):
        model_dir_key("tinny")


def _record(pid: int | None, target: str = "local") -> DeploymentRecord:
    return DeploymentRecord(
        target=target,
        name="x",
        namespace="",
        endpoint="http://127.0.0.1:1",
        model="tiny",
        ready=True,
        pid=pid,
    )


def test_teardown_is_idempotent_and_leaves_foreign_pids_alone() -> None:
    teardown_local(_record(None))
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    teardown_local(_record(done.pid))  # gone already: nothing to do
    # A live process that is not a transformers server (a reused PID) must survive teardown.
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        teardown_local(_record(other.pid))
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()
    with pytest.raises(InvalidInput, match=r"^deployment.target="):
        teardown_local(_record(1, target="kubernetes"))


@pytest.mark.parametrize(
    ("kwargs", "field"), [({"port": 70000}, "port"), ({"startup_timeout_s": 0.0}, "startup_timeout_s")]
)
def test_deploy_local_rejects_bad_input_before_starting(
    tmp_path: Path, kwargs: dict[str, object], field: str
) -> None:
    with pytest.raises(InvalidInput, match=rf"^{field}="):
        deploy_local("tiny", workdir=tmp_path, **kwargs)  # type: ignore[arg-type]
    assert not any(tmp_path.iterdir())


def test_deploy_local_rejects_a_directory_without_config(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    with pytest.raises(InvalidInput, match=r"no config\.json"):
        deploy_local(str(tmp_path / "m"), workdir=tmp_path / "w")
