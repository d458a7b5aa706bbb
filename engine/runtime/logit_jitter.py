"""A test-only perturbation of the logits, so that a test which holds only for one exact greedy
path fails on every machine, not only on the CPU whose kernels happen to take another path.

Different CPUs compute slightly different logits for the same model and prompt: the llama.cpp
CPU variant (AVX2, AVX-512, AMX kernels), the C library's maths routines and the order of
floating-point sums all move the last bits. A 135M model's greedy answer follows those bits
wherever two candidates are close, so "the answer ends within 128 tokens" may be true on one
CPU and false on another. With ``INGLENOOK_TEST_LOGIT_JITTER`` set, every logits row that
llama.cpp writes gets a small, seeded noise added in place, before anything reads it (the
sampler chain, the greedy argmax, grammars, logprobs, drafts' verification, the lab).

The noise of a row is a function of the row's position and the token fed there, not of the
sequence id, the batch, or what was decoded before: a prompt restored from a saved state and
the same prompt read in full, or a sequence decoded beside others and alone, see the same
noise and so still agree exactly. It is read once per loaded context, never active unless the
variable is set; ``make test-portable`` sets it.

The variable's value is the noise's standard deviation in logits (``1`` takes the default,
``DEFAULT_SCALE``), optionally followed by ``,SEED``.
"""

from __future__ import annotations

import ctypes
import logging
import os
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

ENVIRONMENT = "INGLENOOK_TEST_LOGIT_JITTER"
# Measured with benchmarks/variant_logits.py over 512 positions of the lab's evaluation text
# (2026-12-05): llama.cpp's AVX2 variants (haswell, alderlake) and its AVX-512 ones (skylakex,
# icelake, zen4) of one build differ by a standard deviation of 0.18 logits (SmolLM2) and 0.23
# (gemma-3-270m), and put a different token on top at 24 and 25 of the 512 positions. Noise of
# 0.1 flips the top token as often (25 and 32 of 512): a test under it meets as many changed
# greedy choices as it would on another machine.
DEFAULT_SCALE = 0.1
DEFAULT_SEED = 39
# Each row's noise is a window of one shared noise vector, starting at an offset chosen by
# the row's position and token: rows differ without a random draw per row.
_OFFSETS = 1 << 16


class LogitJitter:
    def __init__(self, n_vocab: int, scale: float = DEFAULT_SCALE, seed: int = DEFAULT_SEED) -> None:
        self.n_vocab = n_vocab
        self.scale = scale
        rng = np.random.default_rng(seed)
        self._noise = (rng.standard_normal(n_vocab + _OFFSETS) * scale).astype(np.float32)

    @classmethod
    def from_environment(cls, n_vocab: int) -> LogitJitter | None:
        """The jitter the environment asks for, or None (the normal case: no variable)."""
        value = os.environ.get(ENVIRONMENT, "").strip()
        if not value or value == "0":
            return None
        scale_text, _, seed_text = value.partition(",")
        try:
            scale = float(scale_text)
            seed = int(seed_text) if seed_text else DEFAULT_SEED
        except ValueError:
            raise ValueError(f"{ENVIRONMENT} must be a scale, optionally followed by ',SEED'; got {value!r}") from None
        if scale == 1.0:
            scale = DEFAULT_SCALE
        log.warning("test-only logit jitter is on (%s=%s): answers are perturbed", ENVIRONMENT, value)
        return cls(n_vocab, scale, seed)

    def noise_for(self, position: int, token: int) -> np.ndarray:
        """The noise added to the logits row computed at ``position`` after feeding ``token``."""
        # A fixed integer mix (not Python's hash, which is salted per process for strings
        # and would differ between a test's two runs only if it were used on them).
        key = (position * 0x9E3779B1 + (token + 1) * 0x85EBCA77) & 0xFFFFFFFF
        key ^= key >> 15
        offset = (key * 0x2C1B3C6D & 0xFFFFFFFF) % _OFFSETS
        return self._noise[offset : offset + self.n_vocab]

    def perturb(self, lib: Any, ctx: Any, batch: Any) -> None:
        """Add each output row's noise to the logits llama.cpp just wrote for ``batch``."""
        tokens = batch.token if batch.token else None  # an embeddings batch (images) has none
        for i in range(batch.n_tokens):
            if not batch.logits[i]:
                continue
            pointer = lib.llama_get_logits_ith(ctx, i)
            if not pointer:
                continue
            row = np.ctypeslib.as_array(ctypes.cast(pointer, ctypes.POINTER(ctypes.c_float)), shape=(self.n_vocab,))
            row += self.noise_for(int(batch.pos[i]), int(tokens[i]) if tokens is not None else -1)
