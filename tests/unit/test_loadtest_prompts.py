"""Prompts of an exact token count, checked with a tokenizer trained here (the local target's recipe)."""

from __future__ import annotations

import pytest

from gpuplace.catalog.modeldir import train_tokenizer
from gpuplace.loadtest.prompts import FALLBACK_WORDS, PromptBuilder


@pytest.fixture(scope="module")
def tokenizer() -> object:
    return train_tokenizer(1024, seed=0)


@pytest.mark.parametrize("n", [1, 2, 7, 64, 300])
def test_completion_prompts_have_exactly_n_tokens_with_bos(tokenizer: object, n: int) -> None:
    builder = PromptBuilder(tokenizer, seed=n)
    text = builder.build(n)
    ids = tokenizer.encode(text)  # type: ignore[attr-defined]
    assert ids[0] == tokenizer.bos_token_id  # type: ignore[attr-defined]
    assert len(ids) == max(n, 2)  # one word is the least a prompt can hold


def test_chat_prompts_count_the_template(tokenizer: object) -> None:
    builder = PromptBuilder(tokenizer, api="chat", seed=0)
    text = builder.build(40)
    ids = tokenizer.apply_chat_template(  # type: ignore[attr-defined]
        [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True
    )
    ids = ids["input_ids"] if hasattr(ids, "keys") else ids
    assert len(ids) == 40


def test_prompts_are_seeded_and_differ_between_requests(tokenizer: object) -> None:
    a, b = PromptBuilder(tokenizer, seed=1), PromptBuilder(tokenizer, seed=1)
    first = a.build(32)
    assert first == b.build(32)
    assert a.build(32) != first  # no two requests share a prefix for a cache to hit


def test_without_a_tokenizer_it_falls_back_to_common_words() -> None:
    builder = PromptBuilder(None, seed=0)
    assert not builder.exact
    text = builder.build(10)
    assert len(text.split()) == 9 and all(f" {w}" in FALLBACK_WORDS for w in text.split())
