"""A servable model directory built offline from a preset: random weights and a locally trained tokenizer.

Latency depends on shapes, not values (DESIGN.md), so the local target serves a model with the preset's
architecture and random-initialised weights, saved with ``save_pretrained``, beside a byte-level BPE
tokenizer trained here with ``tokenizers`` on a seeded synthetic corpus (no hub access) and a chat
template. Built directories are cached under ``~/.cache/gpuplace/models/<preset>-<hash>`` (or
``$GPUPLACE_CACHE``), keyed by the config, the seed and the builder version, so tests and ``make run``
build once.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import tempfile
from pathlib import Path

from gpuplace.catalog.models import hf_config, resolve_model
from gpuplace.errors import InvalidInput

# Bump when the directory layout or the tokenizer recipe changes, so stale caches are not reused.
BUILDER_VERSION = 2
SPECIAL_TOKENS: tuple[str, ...] = ("<pad>", "<s>", "</s>")  # ids 0, 1, 2: the presets' pad/bos/eos
# Llama-3-like, without the date preamble; the tokenizer's own bos starts every prompt.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}{{ eos_token }}\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
_SYLLABLES = (
    "ka", "lo", "mi", "ne", "ru", "ta", "po", "si", "de", "va", "zu", "an", "er", "in", "or", "el",
    "the", "and", "ing", "ion", "ent", "pre", "for", "com", "ter", "ver", "gra", "sto", "pla", "cle",
)  # fmt: skip


def default_cache_dir() -> Path:
    root = os.environ.get("GPUPLACE_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "gpuplace"


def _corpus(seed: int, lines: int = 4000) -> list[str]:
    """Seeded pseudo-words with punctuation and digits: enough variety for a byte-level BPE vocabulary."""
    rng = random.Random(seed)
    words = ["".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 3))) for _ in range(3000)]
    out = []
    for _ in range(lines):
        sentence = " ".join(rng.choice(words) for _ in range(rng.randint(4, 16)))
        out.append(sentence.capitalize() + rng.choice((".", "?", "!", ",", " 42.", " 7:")))
    return out


def train_tokenizer(vocab_size: int, *, seed: int = 0) -> object:
    """A ``PreTrainedTokenizerFast`` (byte-level BPE, ``vocab_size`` entries) with a chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    if vocab_size < 256 + len(SPECIAL_TOKENS):
        raise InvalidInput(
            "model.vocab_size", vocab_size, "too small for a byte-level tokenizer", "Use at least 259"
        )
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_corpus(seed), trainer=trainer)
    # The corpus is too small to learn every merge of a large vocabulary, but a random-weight model
    # samples every id: ids the tokenizer lacks would decode to nothing and stream no text at all.
    # Plain added tokens fill the vocabulary, so every generated token is a streamed chunk.
    missing = vocab_size - tok.get_vocab_size()
    if missing > 0:
        tok.add_tokens([f"<x{i}>" for i in range(missing)])
    bos_id = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos_id)]
    )
    return PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        chat_template=CHAT_TEMPLATE,
    )


def model_dir_key(preset: str, seed: int = 0) -> str:
    """``<preset>-<hash>``: the cache entry name for a preset's config and seed."""
    config = dict(resolve_model(preset).config)
    blob = json.dumps({"config": config, "seed": seed, "v": BUILDER_VERSION}, sort_keys=True)
    digest = hashlib.sha256(blob.encode()).hexdigest()[:12]
    return f"{Path(preset).name.removesuffix('.json')}-{digest}"


def build_model_dir(preset: str, out: Path | None = None, *, seed: int = 0) -> Path:
    """Build (or reuse) a Hugging Face model directory for ``preset`` and return its path.

    ``out`` is the directory to write; ``None`` uses the cache. An existing complete directory
    (marked by ``gpuplace-model.json``) with the same key is reused as is. The directory appears
    atomically: it is built beside ``out`` and renamed, so a crash never leaves half a model.
    """
    import torch
    from transformers import AutoModelForCausalLM

    source = resolve_model(preset)
    key = model_dir_key(preset, seed)
    target = Path(out) if out is not None else default_cache_dir() / "models" / key
    marker = target / "gpuplace-model.json"
    if marker.is_file() and json.loads(marker.read_text()).get("key") == key:
        return target
    vocab_size = int(source.config["vocab_size"])
    tokenizer = train_tokenizer(vocab_size, seed=seed)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        config = hf_config(source)
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config)  # type: ignore[no-untyped-call]
        # The tokenizer fills the preset's vocabulary (train_tokenizer), so the model keeps its shape
        # (latency depends on it) and every id it samples decodes to text.
        model.generation_config.bos_token_id = 1
        model.generation_config.eos_token_id = 2
        model.generation_config.pad_token_id = 0
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)  # type: ignore[attr-defined]
        (tmp / "gpuplace-model.json").write_text(
            json.dumps({"key": key, "preset": preset, "seed": seed, "builder_version": BUILDER_VERSION})
        )
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def main(argv: list[str] | None = None) -> int:
    """``python -m gpuplace.catalog.modeldir PRESET OUT``: build ``PRESET``'s model directory at ``OUT``
    (what the serving container runs before ``transformers serve``, :mod:`gpuplace.manifests.local`)."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m gpuplace.catalog.modeldir PRESET OUT", file=sys.stderr)
        return 2
    print(build_model_dir(args[0], Path(args[1])))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
