"""Write a tiny BERT encoder GGUF that llama.cpp loads as an embedding model.

No small encoder ships on PyPI, so the tests make one for the encoder path of document
search: a BERT (``general.architecture = "bert"``, WordPiece vocabulary, mean pooling) with
one layer, 32-wide, random weights. Its vectors mean nothing, but they come from llama.cpp's
BERT graph through the engine's embedding path, as a real encoder's would.

The keys and tensor names are the ones llama.cpp reads for ``LLM_ARCH_BERT``
(``llama-model.cpp``, ``llama-vocab.cpp``); the vocabulary is written as llama.cpp's own
converter writes BERT's: a word-initial piece carries "▁", a continuation (WordPiece's
"##") none. Shapes are numpy-style (outermost first), which the ``gguf`` package reverses
into ggml's ``ne`` order.
"""

from __future__ import annotations

import string
from pathlib import Path

import numpy as np

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
# Whole words of the tests' documents (tests/integration/test_document_retrieval.py): an
# input is embedded in one batch of at most 512 tokens, and a word spelled out letter by
# letter is as many tokens as letters.
WORDS = ["the", "harbour", "mill", "crates", "pence", "district", "section", "report", "page", "sent", "to",
         "of", "in", "and", "what", "which", "how", "much", "were", "is", "a", "on", "it", "this", "paragraph",
         "reports", "as", "discussed", "at", "meeting", "weather", "coast", "price", "wool", "railway",
         "timetable", "village", "fete", "repairs", "church", "roof", "school", "new", "teacher", "fishing",
         "season", "town", "band", "name", "dog", "when", "does", "ferry", "leave", "planted", "tree"]


def vocabulary() -> list[str]:
    """Specials, whole words, then every letter, digit and punctuation mark as a word start and
    as a continuation, so any ASCII text tokenizes without [UNK]."""
    pieces = string.ascii_lowercase + string.digits + string.punctuation
    # Once each: llama.cpp aborts the process on a vocabulary with a piece twice.
    return list(dict.fromkeys([*SPECIALS, *(f"\u2581{w}" for w in WORDS), *(f"\u2581{c}" for c in pieces), *pieces]))


def write_encoder(path: Path, *, width: int = 32, heads: int = 2, ffn: int = 64, layers: int = 1,
                  context: int = 512, seed: int = 0, name: str = "Tiny Test Encoder") -> Path:
    import gguf  # test-only dependency (the dev extra)

    rng = np.random.default_rng(seed)
    tokens = vocabulary()

    def weight(*shape: int, scale: float = 0.1) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def ones(n: int) -> np.ndarray:
        return np.ones(n, dtype=np.float32)

    def zeros(n: int) -> np.ndarray:
        return np.zeros(n, dtype=np.float32)

    writer = gguf.GGUFWriter(str(path), "bert")
    writer.add_name(name)
    writer.add_file_type(0)  # all F32
    writer.add_context_length(context)
    writer.add_embedding_length(width)
    writer.add_feed_forward_length(ffn)
    writer.add_block_count(layers)
    writer.add_head_count(heads)
    writer.add_layer_norm_eps(1e-12)
    writer.add_causal_attention(False)
    writer.add_pooling_type(gguf.PoolingType.MEAN)
    writer.add_token_type_count(2)
    writer.add_tokenizer_model("bert")
    writer.add_token_list(tokens)
    writer.add_token_types([gguf.TokenType.CONTROL] * len(SPECIALS) + [gguf.TokenType.NORMAL] * (len(tokens) - len(SPECIALS)))
    writer.add_pad_token_id(0)
    writer.add_unk_token_id(1)
    writer.add_sep_token_id(3)
    writer.add_mask_token_id(4)
    writer.add_bos_token_id(2)
    writer.add_eos_token_id(3)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(True)

    writer.add_tensor("token_embd.weight", weight(len(tokens), width))
    writer.add_tensor("token_types.weight", weight(2, width))
    writer.add_tensor("position_embd.weight", weight(context, width))
    writer.add_tensor("token_embd_norm.weight", ones(width))
    writer.add_tensor("token_embd_norm.bias", zeros(width))
    for layer in range(layers):
        block = f"blk.{layer}"
        for part in ("attn_q", "attn_k", "attn_v", "attn_output"):
            writer.add_tensor(f"{block}.{part}.weight", weight(width, width))
            writer.add_tensor(f"{block}.{part}.bias", zeros(width))
        writer.add_tensor(f"{block}.attn_output_norm.weight", ones(width))
        writer.add_tensor(f"{block}.attn_output_norm.bias", zeros(width))
        writer.add_tensor(f"{block}.ffn_up.weight", weight(ffn, width))
        writer.add_tensor(f"{block}.ffn_up.bias", zeros(ffn))
        writer.add_tensor(f"{block}.ffn_down.weight", weight(width, ffn))
        writer.add_tensor(f"{block}.ffn_down.bias", zeros(width))
        writer.add_tensor(f"{block}.layer_output_norm.weight", ones(width))
        writer.add_tensor(f"{block}.layer_output_norm.bias", zeros(width))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
