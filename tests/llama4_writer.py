"""A tiny Llama 4 GGUF written in the test, for chunked attention windows.

Llama 4 (and MobileLLM-R1, the same architecture) attends in three of every four layers
only within fixed chunks of 8,192 positions (llama.cpp's ``LLAMA_SWA_TYPE_CHUNKED``, a size
its loader sets whatever the file says): position 8,200 sees 8,192 onward there, not the
8,192 positions before it. No small Llama 4 file ships anywhere the suite can fetch, so this
writes one with random weights and SmolLM2's tokenizer (copied from its GGUF): 4 layers of
64 dimensions, two experts in every second layer. Its answers mean nothing; what the tests
compare is that a resumed context gives the same greedy tokens as reading the whole prompt.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import gguf

N_EMBD, N_HEAD, N_HEAD_KV, N_LAYER, N_FF, N_EXPERT, N_FF_EXP = 64, 4, 2, 4, 128, 2, 64
CHUNK = 8192  # llama.cpp's fixed chunk for llama4 (models/llama4.cpp)
TRAINED_CONTEXT = 32768

_TOKENIZER_KEYS = ("tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
                   "tokenizer.ggml.token_type", "tokenizer.ggml.merges", "tokenizer.ggml.bos_token_id",
                   "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id",
                   "tokenizer.ggml.padding_token_id", "tokenizer.chat_template")


def _copy_tokenizer(writer: "gguf.GGUFWriter", source: Path) -> int:
    """Copy ``source``'s tokenizer fields into ``writer``; returns its vocabulary size."""
    import gguf  # a dev dependency

    reader = gguf.GGUFReader(str(source))
    n_vocab = 0
    for key in _TOKENIZER_KEYS:
        field = reader.get_field(key)
        if field is None:
            continue
        kind = field.types[0]
        if kind == gguf.GGUFValueType.ARRAY:
            values = field.contents()
            writer.add_array(key, values)
            if key == "tokenizer.ggml.tokens":
                n_vocab = len(values)
        elif kind == gguf.GGUFValueType.STRING:
            writer.add_string(key, field.contents())
        else:
            writer.add_uint32(key, int(field.contents()))
    return n_vocab


def write_llama4(path: Path, tokenizer_from: Path, seed: int = 0) -> Path:
    """Write the tiny Llama 4 model to ``path`` (its tokenizer from the GGUF ``tokenizer_from``)."""
    import gguf  # a dev dependency

    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), arch="llama4")
    writer.add_string("general.name", "tiny-llama4-test")
    writer.add_context_length(TRAINED_CONTEXT)
    writer.add_embedding_length(N_EMBD)
    writer.add_block_count(N_LAYER)
    writer.add_feed_forward_length(N_FF)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD_KV)
    writer.add_rope_dimension_count(N_EMBD // N_HEAD)
    writer.add_rope_freq_base(500000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_expert_count(N_EXPERT)
    writer.add_expert_used_count(1)
    writer.add_expert_feed_forward_length(N_FF_EXP)
    writer.add_interleave_moe_layer_step(2)
    n_vocab = _copy_tokenizer(writer, tokenizer_from)
    writer.add_vocab_size(n_vocab)

    def weight(*shape: int, scale: float = 0.2) -> np.ndarray:
        # numpy's shape is ggml's reversed: (n_out, n_in) for a matrix [n_in, n_out].
        return (rng.standard_normal(shape) * scale / np.sqrt(shape[-1]) * 8).astype(np.float32)

    head = N_EMBD // N_HEAD
    writer.add_tensor("token_embd.weight", (rng.standard_normal((n_vocab, N_EMBD)) * 0.5).astype(np.float16))
    writer.add_tensor("output_norm.weight", np.ones(N_EMBD, dtype=np.float32))
    for layer in range(N_LAYER):
        block = f"blk.{layer}"
        writer.add_tensor(f"{block}.attn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        writer.add_tensor(f"{block}.attn_q.weight", weight(N_HEAD * head, N_EMBD))
        writer.add_tensor(f"{block}.attn_k.weight", weight(N_HEAD_KV * head, N_EMBD))
        writer.add_tensor(f"{block}.attn_v.weight", weight(N_HEAD_KV * head, N_EMBD))
        writer.add_tensor(f"{block}.attn_output.weight", weight(N_EMBD, N_HEAD * head))
        writer.add_tensor(f"{block}.ffn_norm.weight", np.ones(N_EMBD, dtype=np.float32))
        if (layer + 1) % 2 == 0:  # a mixture-of-experts layer, with its shared expert
            writer.add_tensor(f"{block}.ffn_gate_inp.weight", weight(N_EXPERT, N_EMBD))
            writer.add_tensor(f"{block}.ffn_gate_exps.weight", weight(N_EXPERT, N_FF_EXP, N_EMBD))
            writer.add_tensor(f"{block}.ffn_up_exps.weight", weight(N_EXPERT, N_FF_EXP, N_EMBD))
            writer.add_tensor(f"{block}.ffn_down_exps.weight", weight(N_EXPERT, N_EMBD, N_FF_EXP))
            writer.add_tensor(f"{block}.ffn_gate_shexp.weight", weight(N_FF_EXP, N_EMBD))
            writer.add_tensor(f"{block}.ffn_up_shexp.weight", weight(N_FF_EXP, N_EMBD))
            writer.add_tensor(f"{block}.ffn_down_shexp.weight", weight(N_EMBD, N_FF_EXP))
        else:
            writer.add_tensor(f"{block}.ffn_gate.weight", weight(N_FF, N_EMBD))
            writer.add_tensor(f"{block}.ffn_up.weight", weight(N_FF, N_EMBD))
            writer.add_tensor(f"{block}.ffn_down.weight", weight(N_EMBD, N_FF))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
