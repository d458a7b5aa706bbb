"""Small LoRA adapter GGUFs written in the test, with the ``gguf`` package's writer.

llama.cpp's convention (``llama-adapter.cpp``), in ggml's dimension order: a weight
``[n_in, n_out]`` gets ``<name>.lora_a`` of ``[n_in, r]`` and ``<name>.lora_b`` of
``[r, n_out]``; numpy's shapes are the reverse, ``(r, n_in)`` and ``(n_out, r)``.
A helper module the LoRA tests import (tests/unit/test_lora_files.py checks that what it
writes is what the engine's reader calls a LoRA adapter).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

# SmolLM2-135M (llama): n_embd 576, 3 KV heads of 64.
SMOLLM2_TARGETS = {"attn_q": (576, 576), "attn_v": (576, 192)}
# gemma-3-270m (gemma3): n_embd 640, 4 heads of 256 for q.
GEMMA_TARGETS = {"attn_q": (640, 1024)}


def write_adapter(path: Path, architecture: str = "llama", targets: dict[str, tuple[int, int]] | None = None,
                  blocks: range = range(0, 30), rank: int = 8, alpha: float = 16.0, seed: int = 0,
                  strength: float = 0.05, general_type: str = "adapter", adapter_type: str = "lora") -> Path:
    """An adapter with random low-rank A/B for ``targets`` ({tensor: (n_in, n_out)}) in ``blocks``."""
    import gguf  # a dev dependency, only the LoRA tests need it

    rng = np.random.default_rng(seed)
    writer = gguf.GGUFWriter(str(path), arch=architecture)
    writer.add_string("general.type", general_type)
    writer.add_string("general.name", path.stem)
    if general_type == "adapter":
        writer.add_string("adapter.type", adapter_type)
        writer.add_float32("adapter.lora.alpha", alpha)
    for block in blocks:
        for tensor, (n_in, n_out) in (targets or SMOLLM2_TARGETS).items():
            a = rng.normal(0.0, strength, size=(rank, n_in)).astype(np.float32)
            b = rng.normal(0.0, strength, size=(n_out, rank)).astype(np.float32)
            writer.add_tensor(f"blk.{block}.{tensor}.weight.lora_a", a)
            writer.add_tensor(f"blk.{block}.{tensor}.weight.lora_b", b)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path



# How far apart the log-probabilities of two answers must be for two configurations (an
# adapter on and off, two scales) to count as different. Greedy text is no such test: which
# token wins a close call depends on the CPU's kernels ("My favourite colour is" ends
# " blue." with and without the seed-1 adapter on AVX2 kernels but not on AVX-512 ones,
# while the first token's log-probability moves by 0.30 on both).
CHANGED_LOGPROB = 0.05

TokenLogprobs = tuple[tuple[str, float], ...]


def answers_differ(base: TokenLogprobs, other: TokenLogprobs) -> bool:
    """True when two greedy answers, as (token, logprob) pairs, show another model: along
    their common start some token's log-probability is ``CHANGED_LOGPROB`` away, or where
    they first part the tokens differ (the same context gave another choice)."""
    for (token, logprob), (other_token, other_logprob) in zip(base, other):
        if token != other_token or abs(logprob - other_logprob) >= CHANGED_LOGPROB:
            return True
    return False
