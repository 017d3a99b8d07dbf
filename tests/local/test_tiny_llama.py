"""The generated test model: a llama GGUF of the documented shape, the same bytes per seed."""

from __future__ import annotations

from pathlib import Path

import gguf
from support.tiny_llama import EMBEDDING, LAYERS, PIECES, VOCABULARY, write_tiny_llama


def test_the_model_is_a_small_llama_whose_bytes_depend_only_on_the_seed(tmp_path: Path) -> None:
    first = write_tiny_llama(tmp_path / "a.gguf").read_bytes()
    assert write_tiny_llama(tmp_path / "b.gguf").read_bytes() == first
    assert write_tiny_llama(tmp_path / "c.gguf", seed=1).read_bytes() != first
    assert 550_000 < len(first) < 650_000
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.gguf", "b.gguf", "c.gguf"]

    reader = gguf.GGUFReader(tmp_path / "a.gguf")
    fields = {name: field.contents() for name, field in reader.fields.items()}
    assert fields["general.architecture"] == "llama"
    assert fields["llama.block_count"] == LAYERS
    assert fields["llama.embedding_length"] == EMBEDDING
    assert len(fields["tokenizer.ggml.tokens"]) == VOCABULARY
    assert fields["tokenizer.ggml.tokens"][-len(PIECES) :] == list(PIECES)
    assert len(set(PIECES)) == len(PIECES)
    output = next(t for t in reader.tensors if t.name == "output.weight")
    rows = output.data.reshape(VOCABULARY, EMBEDDING)
    assert not rows[: VOCABULARY - len(PIECES)].any()
    assert rows[VOCABULARY - len(PIECES) :].any(axis=1).all()
