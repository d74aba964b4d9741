"""Model presets, the analytic parameter count (checked against transformers on the meta device),
and how :func:`resolve_model` reports a config it cannot use."""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import torch

from gpuplace.catalog import load_model_config, model_arch_from_config, model_preset_names, resolve_model
from gpuplace.catalog.models import MODELS_DIR, ModelSource, count_params, hf_config
from gpuplace.errors import InvalidInput, UnknownName

REQUIRED_PRESETS = ("tiny", "llama-100m", "llama-3.1-8b", "llama-3.1-70b", "mistral-7b", "qwen2.5-7b")
TINY_JSON = MODELS_DIR / "tiny.json"


def _meta_param_count(source: ModelSource) -> int:
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):  # shapes only: no memory, no initialisation
        model = AutoModelForCausalLM.from_config(hf_config(source))
    return sum(p.numel() for p in model.parameters())


def _tiny_config() -> dict[str, Any]:
    config: dict[str, Any] = json.loads(TINY_JSON.read_text())
    config.pop("_gpuplace")
    return config


def _config_file(tmp_path: Path, config: object, name: str = "config.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(config))
    return path


# --- presets and parameter counts ---------------------------------------------------------------


def test_required_presets_exist() -> None:
    names = model_preset_names()

    assert set(REQUIRED_PRESETS) <= set(names)
    assert list(names) == sorted(names)


@pytest.mark.parametrize("name", model_preset_names())
def test_every_preset_resolves_as_a_preset(name: str) -> None:
    source = resolve_model(name)

    assert source.kind == "preset"
    assert source.name == name
    assert source.weights_dir is None
    assert "_gpuplace" not in source.config  # gpuplace's own notes are not part of the HF config


@pytest.mark.parametrize("name", model_preset_names())
def test_analytic_param_count_equals_transformers(name: str) -> None:
    source = resolve_model(name)

    assert count_params(source.config) == _meta_param_count(source)


def _variant(**changes: Any) -> dict[str, Any]:
    config = _tiny_config()
    config.pop("architectures")
    config.update(changes)
    return config


@pytest.mark.parametrize(
    "config",
    [
        pytest.param(_variant(tie_word_embeddings=False), id="llama-untied"),
        pytest.param(_variant(attention_bias=True), id="llama-attention-bias-includes-o"),
        pytest.param(_variant(mlp_bias=True), id="llama-mlp-bias"),
        pytest.param(_variant(attention_bias=True, mlp_bias=True), id="llama-biases"),
        pytest.param(_variant(model_type="qwen3", attention_bias=True), id="qwen3-attention-bias"),
        pytest.param(_variant(model_type="qwen3", mlp_bias=True), id="qwen3-ignores-mlp-bias"),
        pytest.param(_variant(model_type="qwen2", mlp_bias=True), id="qwen2-ignores-mlp-bias"),
        pytest.param(_variant(model_type="mistral", attention_bias=True), id="mistral-ignores-biases"),
        pytest.param(_variant(num_key_value_heads=4, head_dim=None), id="llama-mha-derived-head-dim"),
        pytest.param(_variant(model_type="qwen2", tie_word_embeddings=False), id="qwen2"),
        pytest.param(_variant(model_type="qwen3"), id="qwen3-qk-norm"),
        pytest.param(_variant(model_type="mistral", head_dim=32), id="mistral-wide-heads"),
    ],
)
def test_analytic_param_count_covers_family_variants(config: dict[str, Any]) -> None:
    source = ModelSource(name="variant", kind="config", config=config)

    assert count_params(config) == _meta_param_count(source)


def test_big_presets_have_their_published_sizes() -> None:
    p8 = count_params(resolve_model("llama-3.1-8b").config)
    p70 = count_params(resolve_model("llama-3.1-70b").config)

    assert p8 == pytest.approx(8.03e9, rel=1e-3)
    assert p70 == pytest.approx(70.6e9, rel=1e-3)


def test_count_params_of_tiny_by_hand() -> None:
    # h=64, i=256, 2 layers, 4 heads, 2 kv heads, head_dim 16, vocab 1024, tied
    attn = 64 * 64 + 2 * 64 * 32 + 64 * 64
    mlp = 3 * 64 * 256
    per_layer = attn + mlp + 2 * 64  # two RMSNorms
    expected = 1024 * 64 + 2 * per_layer + 64  # embedding, layers, final norm; head is tied

    assert count_params(resolve_model("tiny").config) == expected == 188_736


def test_count_params_is_none_for_an_unmodelled_family() -> None:
    assert count_params({**_tiny_config(), "model_type": "gpt_neox"}) is None


def test_unknown_preset_suggests_the_close_name() -> None:
    with pytest.raises(UnknownName) as info:
        resolve_model("llama-3.1-8")

    assert info.value.suggestions[0] == "llama-3.1-8b"
    assert "Did you mean 'llama-3.1-8b'" in str(info.value)
    assert str(info.value).startswith("model='llama-3.1-8': unknown name")


def test_unknown_preset_uses_the_callers_field() -> None:
    with pytest.raises(UnknownName, match=r"^draft_model='mistral7b'.*Did you mean 'mistral-7b'"):
        resolve_model("mistral7b", field="draft_model")


# --- config files and directories ---------------------------------------------------------------


def test_config_json_path(tmp_path: Path) -> None:
    path = tmp_path / "tiny-copy.json"
    shutil.copy(TINY_JSON, path)

    source = resolve_model(str(path))

    assert source.kind == "config"
    assert source.weights_dir is None
    assert source.config["hidden_size"] == 64
    assert "_gpuplace" not in source.config
    with pytest.raises(TypeError):
        source.config["hidden_size"] = 1  # type: ignore[index]


def test_directory_with_config_json_is_a_weights_dir(tmp_path: Path) -> None:
    shutil.copy(TINY_JSON, tmp_path / "config.json")

    source = resolve_model(str(tmp_path))

    assert source.kind == "weights"
    assert source.weights_dir == tmp_path
    assert source.config["num_hidden_layers"] == 2


def test_load_model_config_is_a_private_copy() -> None:
    first = load_model_config("tiny")
    first["hidden_size"] = 1

    assert load_model_config("tiny")["hidden_size"] == 64


def test_directory_without_config_json(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as info:
        resolve_model(str(tmp_path))

    assert info.value.field == "model"
    assert "directory has no config.json" in str(info.value)


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("/nonexistent/gpuplace/model", "no such file or directory"),
        ("./no-such-model-dir", "no such file or directory"),
        ("/nonexistent/gpuplace/config.json", "no such file"),
        ("not-here.json", "no such file"),
    ],
)
def test_nonexistent_path(spec: str, problem: str) -> None:
    with pytest.raises(InvalidInput) as info:
        resolve_model(spec)

    assert not isinstance(info.value, UnknownName)  # a path is not offered preset names
    assert str(info.value).startswith(f"model={spec!r}: {problem}")


def test_invalid_json_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{\n  "model_type": "llama",\n  hidden_size: 64\n}\n')

    with pytest.raises(InvalidInput) as info:
        resolve_model(str(path))

    message = str(info.value)
    assert "is not valid JSON" in message
    assert "line 3 column 3" in message


def test_json_list_is_not_a_config(tmp_path: Path) -> None:
    path = _config_file(tmp_path, [_tiny_config()])

    with pytest.raises(InvalidInput, match="holds a list, not an object"):
        resolve_model(str(path))


def test_invalid_json_in_a_weights_dir(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("{")

    with pytest.raises(InvalidInput, match="is not valid JSON"):
        resolve_model(str(tmp_path))


def _bad(tmp_path: Path, **changes: Any) -> InvalidInput:
    config = _tiny_config()
    for key, value in changes.items():
        if value is ...:
            del config[key]
        else:
            config[key] = value
    with pytest.raises(InvalidInput) as info:
        resolve_model(str(_config_file(tmp_path, config)))
    return info.value


def test_missing_key_is_named(tmp_path: Path) -> None:
    err = _bad(tmp_path, hidden_size=...)

    assert err.field == "model.hidden_size"
    assert str(err).startswith("model.hidden_size=None: missing")
    assert "(missing: hidden_size)" in str(err)


def test_all_missing_keys_are_listed(tmp_path: Path) -> None:
    err = _bad(tmp_path, vocab_size=..., model_type=...)

    assert err.field == "model.model_type"
    assert "missing: model_type, vocab_size" in str(err)


@pytest.mark.parametrize(
    ("key", "value"),
    [("hidden_size", 0), ("num_hidden_layers", -2), ("vocab_size", "1024"), ("intermediate_size", True)],
)
def test_non_positive_or_non_integer_shape_is_named(tmp_path: Path, key: str, value: object) -> None:
    err = _bad(tmp_path, **{key: value})

    assert err.field == f"model.{key}"
    assert err.value == value
    assert "must be a positive integer" in str(err)


def test_kv_heads_must_divide_attention_heads(tmp_path: Path) -> None:
    err = _bad(tmp_path, num_key_value_heads=3)

    assert err.field == "model.num_key_value_heads"
    assert str(err).startswith("model.num_key_value_heads=3: does not divide num_attention_heads=4")


def test_hidden_size_must_split_into_heads_without_head_dim(tmp_path: Path) -> None:
    err = _bad(tmp_path, head_dim=..., hidden_size=66)

    assert err.field == "model.hidden_size"
    assert "is not a multiple of num_attention_heads=4" in str(err)


def test_hidden_size_need_not_split_into_heads_with_head_dim() -> None:
    arch = model_arch_from_config("odd", {**_tiny_config(), "hidden_size": 66})

    assert arch.head_dim == 16
    assert arch.hidden_size == 66


# --- ModelArch from a config --------------------------------------------------------------------


def test_model_arch_of_tiny() -> None:
    arch = model_arch_from_config("tiny", resolve_model("tiny").config)

    assert arch.name == "tiny"
    assert arch.model_type == "llama"
    assert (arch.num_layers, arch.hidden_size, arch.intermediate_size, arch.vocab_size) == (2, 64, 256, 1024)
    assert (arch.num_attention_heads, arch.num_kv_heads, arch.head_dim) == (4, 2, 16)
    assert arch.max_position_embeddings == 2048
    assert arch.tie_word_embeddings is True
    assert arch.num_params == 188_736


def test_model_arch_defaults_kv_heads_and_head_dim() -> None:
    config: Mapping[str, Any] = {
        k: v for k, v in _tiny_config().items() if k not in ("num_key_value_heads", "head_dim")
    }
    arch = model_arch_from_config("mha", config)

    assert arch.num_kv_heads == 4
    assert arch.head_dim == 16


def test_unsupported_family_without_num_params_is_refused() -> None:
    config = {**_tiny_config(), "model_type": "gpt_neox"}

    with pytest.raises(InvalidInput) as info:
        model_arch_from_config("neox", config)

    assert info.value.field == "model.model_type"
    assert info.value.value == "gpt_neox"
    assert str(info.value).startswith("model.model_type='gpt_neox': parameter count is not modelled")


def test_unsupported_family_with_num_params_works() -> None:
    config = {**_tiny_config(), "model_type": "gpt_neox"}

    arch = model_arch_from_config("neox", config, num_params=123_456)

    assert arch.model_type == "gpt_neox"
    assert arch.num_params == 123_456


def test_num_params_overrides_the_analytic_count() -> None:
    arch = model_arch_from_config("tiny", resolve_model("tiny").config, num_params=200_000)

    assert arch.num_params == 200_000


def test_model_arch_validates_its_config() -> None:
    with pytest.raises(InvalidInput, match=r"^model\.vocab_size=0"):
        model_arch_from_config("broken", {**_tiny_config(), "vocab_size": 0})
