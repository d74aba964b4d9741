"""Prompts of an exact token count, built with the endpoint's tokenizer.

Prompt text does not matter for latency, its length does. A prompt is a seeded sequence of words that
the tokenizer maps to one token each (``" word"`` with a leading space is one pre-token in byte-level
and SentencePiece-style BPE), so ``n`` words are ``n`` tokens; every prompt is re-encoded to check, and
trimmed or padded if the tokenizer merges across words. Random words, not a repeated one, so that a
server's prefix cache cannot turn the load into cache hits. Counts include what the server adds: the
BOS token for completions, the chat template for chat.

Without a tokenizer (a remote endpoint serving a model that is not available here) the builder falls
back to common English words, which are one token in most vocabularies; the records then carry the
server's own ``usage.prompt_tokens`` to check against.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from gpuplace.errors import InvalidInput

FALLBACK_WORDS = (
    " the", " of", " and", " to", " in", " is", " that", " for", " it", " as", " was", " with", " be",
    " by", " on", " not", " he", " this", " are", " or", " his", " from", " at", " which", " but",
    " have", " an", " had", " they", " you", " were", " their", " one", " all", " we", " can", " her",
)  # fmt: skip
_MAX_POOL_CANDIDATES = 50_000


def load_tokenizer(spec: str) -> Any:
    """A tokenizer from a model directory or a preset name (whose local model directory is built)."""
    from transformers import AutoTokenizer

    path = Path(spec).expanduser()
    if not path.is_dir():
        from gpuplace.catalog.modeldir import build_model_dir

        path = build_model_dir(spec)
    try:
        return AutoTokenizer.from_pretrained(path)
    except (OSError, ValueError) as e:
        raise InvalidInput(
            "tokenizer", spec, f"cannot load a tokenizer ({e})", "Give a model directory"
        ) from None


class PromptBuilder:
    """Builds prompts of a given token count for ``api`` ("completions" or "chat")."""

    def __init__(self, tokenizer: Any, *, api: str = "completions", seed: int = 0) -> None:
        self.tokenizer = tokenizer
        self.api = api
        self.rng = random.Random(seed)
        self.exact = tokenizer is not None
        self.pool = self._word_pool() if tokenizer is not None else list(FALLBACK_WORDS)
        self.overhead = self._count("x") - self._count_plain("x") if tokenizer is not None else 1

    def _count_plain(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))

    def _count(self, text: str) -> int:
        """Tokens the server will see for ``text`` as the prompt (specials / chat template included)."""
        if self.api == "chat":
            ids = self.tokenizer.apply_chat_template(
                [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True
            )
            if isinstance(ids, dict) or hasattr(ids, "keys"):
                ids = ids["input_ids"]
            return len(ids)
        return len(self.tokenizer.encode(text))

    def _word_pool(self) -> list[str]:
        vocab = self.tokenizer.get_vocab()
        special = set(getattr(self.tokenizer, "all_special_ids", ()))
        pool = []
        for _token, tid in sorted(vocab.items(), key=lambda kv: kv[1])[:_MAX_POOL_CANDIDATES]:
            if tid in special:
                continue
            text = self.tokenizer.decode([tid])
            word = text.strip()
            if not text.startswith(" ") or not word.isalpha() or not word.isascii():
                continue
            if self.tokenizer.encode(" " + word, add_special_tokens=False) == [tid]:
                pool.append(" " + word)
        if len(pool) < 16:
            return list(FALLBACK_WORDS)
        return pool

    def build(self, tokens: int) -> str:
        """A prompt of ``tokens`` tokens as the server counts them (≥ the template's own tokens)."""
        words = [self.rng.choice(self.pool) for _ in range(max(1, tokens - self.overhead))]
        if not self.exact:
            return "".join(words)
        for _ in range(8):
            text = "".join(words)
            diff = self._count(text) - tokens
            if diff == 0 or (diff > 0 and len(words) == 1):
                return text
            if diff > 0:
                del words[-min(diff, len(words) - 1) :]
            else:
                words.extend(self.rng.choice(self.pool) for _ in range(-diff))
        return "".join(words)
