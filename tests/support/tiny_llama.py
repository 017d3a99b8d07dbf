"""A tiny llama model with random weights, written as GGUF, for tests that run llama.cpp.

Nothing is downloaded: the model is made at test time (2 layers, 64 wide, a 512-token
SentencePiece vocabulary; about 600 KB, written in milliseconds) from a seeded generator, so the
same seed writes the same bytes. What it says is noise, but it is a real model: llama.cpp loads
it, tokenizes the prompt and samples every token it streams.

Its output is easy to check: the output projection is zero for every token but the word pieces,
whose random logits are well above zero at the top, so sampling only ever picks a piece (each
decodes to visible text, never a partial UTF-8 byte) and never end-of-sequence. A request gets
exactly `max_tokens` tokens, each one of `PIECE_TEXTS`.
"""

from __future__ import annotations

import os
import string
import tempfile
from pathlib import Path

import gguf
import numpy as np

EMBEDDING = 64
LAYERS = 2
HEADS = 4
FEED_FORWARD = 128
CONTEXT = 2048
VOCABULARY = 512
SPACE = "\u2581"
"""SentencePiece's word boundary: a piece starting with it decodes with a leading space."""
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n"
    "{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}"
)

_SPECIAL = ("<unk>", "<s>", "</s>")
_UNKNOWN, _BOS, _EOS = range(3)
_BYTES = tuple(f"<0x{value:02X}>" for value in range(256))
_CHARACTERS = (SPACE, *(c for c in string.printable if c.isprintable() and c != " "))
_SYLLABLES = tuple(c + v for c in "bdfgklmnprstvz" for v in "aeiou")
_FIRST_PIECE = len(_SPECIAL) + len(_BYTES)


def _pieces() -> tuple[str, ...]:
    """Single characters (so any printable ASCII prompt tokenizes), then syllables alone and as
    word starts, up to the vocabulary's size."""
    words = tuple(SPACE + s for s in _SYLLABLES) + _SYLLABLES
    syllable_pairs = (SPACE + a + b for a in _SYLLABLES for b in _SYLLABLES)
    pieces = [*_CHARACTERS, *words]
    pieces += [next(syllable_pairs) for _ in range(VOCABULARY - _FIRST_PIECE - len(pieces))]
    return tuple(pieces)


PIECES = _pieces()
PIECE_TEXTS = frozenset(piece.replace(SPACE, " ") for piece in PIECES)
"""What each token the model can emit decodes to (a leading space for a word start)."""


def write_tiny_llama(path: Path, *, seed: int = 0) -> Path:
    """Write the model to `path` (replaced whole, never seen half-written) and return `path`."""
    tokens = (*_SPECIAL, *_BYTES, *PIECES)
    assert len(tokens) == VOCABULARY
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    types += [gguf.TokenType.BYTE] * len(_BYTES) + [gguf.TokenType.NORMAL] * len(PIECES)
    # SentencePiece merges toward the highest score: longer pieces win over their parts.
    scores = [0.0] * _FIRST_PIECE + [float(len(piece)) for piece in PIECES]

    fd, partial = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    writer = gguf.GGUFWriter(partial, "llama")
    writer.add_name("noctaya-tiny-llama")
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(EMBEDDING)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FEED_FORWARD)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(HEADS)
    writer.add_rope_dimension_count(EMBEDDING // HEADS)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(_UNKNOWN)
    writer.add_bos_token_id(_BOS)
    writer.add_eos_token_id(_EOS)
    writer.add_add_bos_token(True)
    writer.add_chat_template(CHAT_TEMPLATE)
    for name, tensor in _tensors(np.random.default_rng(seed)).items():
        writer.add_tensor(name, tensor)
    try:
        try:
            writer.write_header_to_file()
            writer.write_kv_data_to_file()
            writer.write_tensors_to_file()
        finally:
            writer.close()
        os.replace(partial, path)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise
    return path


def _tensors(rng: np.random.Generator) -> dict[str, np.ndarray]:
    """llama's tensors by their GGUF names; a matrix's numpy shape is (outputs, inputs)."""

    def matrix(outputs: int, inputs: int) -> np.ndarray:
        return rng.normal(0.0, inputs**-0.5, (outputs, inputs)).astype(np.float32)

    norm = np.ones(EMBEDDING, dtype=np.float32)
    output = matrix(VOCABULARY, EMBEDDING)
    output[:_FIRST_PIECE] = 0.0
    tensors = {
        "token_embd.weight": matrix(VOCABULARY, EMBEDDING),
        "output_norm.weight": norm,
        "output.weight": output,
    }
    for layer in range(LAYERS):
        block = f"blk.{layer}"
        tensors |= {
            f"{block}.attn_norm.weight": norm,
            f"{block}.attn_q.weight": matrix(EMBEDDING, EMBEDDING),
            f"{block}.attn_k.weight": matrix(EMBEDDING, EMBEDDING),
            f"{block}.attn_v.weight": matrix(EMBEDDING, EMBEDDING),
            f"{block}.attn_output.weight": matrix(EMBEDDING, EMBEDDING),
            f"{block}.ffn_norm.weight": norm,
            f"{block}.ffn_gate.weight": matrix(FEED_FORWARD, EMBEDDING),
            f"{block}.ffn_up.weight": matrix(FEED_FORWARD, EMBEDDING),
            f"{block}.ffn_down.weight": matrix(EMBEDDING, FEED_FORWARD),
        }
    return tensors
