"""The local model directory's tokenizer covers the preset's whole vocabulary.

A random-weight model samples every id; one the tokenizer lacked would decode to nothing, so the
server would stream no text for it and TTFT, TPOT and ITL could not be measured (llama-100m did).
"""

from __future__ import annotations

from gpuplace.catalog.modeldir import train_tokenizer


def test_every_id_of_a_large_vocabulary_decodes_to_text() -> None:
    tok = train_tokenizer(32000)

    assert len(tok) == 32000  # type: ignore[arg-type]
    for token_id in (300, 5000, 20000, 31999):
        assert tok.decode([token_id], skip_special_tokens=True), token_id  # type: ignore[attr-defined]
