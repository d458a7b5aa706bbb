"""Asks llama.cpp's own grammar engine whether a text is allowed by a GBNF grammar.

A grammar is only as good as what llama.cpp does with it, so the converter's tests run
texts through the real grammar sampler: the text is fed one character at a time (each a
token of the starter model's vocabulary, loaded vocabulary-only), and it is accepted when
every character is allowed and the end of generation is allowed after the last one.
"""

from __future__ import annotations

import ctypes
import math
from pathlib import Path
from typing import Any


class GrammarProbe:
    def __init__(self, model_path: Path) -> None:
        from inglenook.engine.runtime.native import llama

        self.lib = lib = llama()
        params = lib.llama_model_default_params()
        params.vocab_only = True
        self.model = lib.llama_model_load_from_file(str(model_path).encode(), params)
        assert self.model, "the starter model's vocabulary did not load"
        self.vocab = lib.llama_model_get_vocab(self.model)
        self.eos = lib.llama_vocab_eos(self.vocab)
        self._char_tokens: dict[str, int] = {}

    def compiles(self, grammar: str) -> bool:
        sampler = self.lib.llama_sampler_init_grammar(self.vocab, grammar.encode(), b"root")
        if sampler:
            self.lib.llama_sampler_free(sampler)
        return bool(sampler)

    def accepts(self, grammar: str, text: str) -> bool:
        lib = self.lib
        sampler = lib.llama_sampler_init_grammar(self.vocab, grammar.encode(), b"root")
        assert sampler, "the grammar did not compile"
        try:
            for char in text:
                token = self.char_token(char)
                if not self._allowed(sampler, token):
                    return False
                lib.llama_sampler_accept(sampler, token)
            return self._allowed(sampler, self.eos)
        finally:
            lib.llama_sampler_free(sampler)

    def _allowed(self, sampler: Any, token: int) -> bool:
        data = (self.lib.llama_token_data * 1)()
        data[0].id, data[0].logit, data[0].p = token, 0.0, 0.0
        candidates = self.lib.llama_token_data_array(data, 1, -1, False)
        self.lib.llama_sampler_apply(sampler, ctypes.byref(candidates))
        return math.isfinite(data[0].logit)

    def char_token(self, char: str) -> int:
        """The vocabulary's token for exactly this one character."""
        if char not in self._char_tokens:
            lib = self.lib
            raw = char.encode()
            out = (lib.llama_token * 8)()
            n = lib.llama_tokenize(self.vocab, raw, len(raw), out, 8, False, False)
            assert n == 1, f"{char!r} is not a single token in the starter vocabulary"
            self._char_tokens[char] = out[0]
        return self._char_tokens[char]

    def close(self) -> None:
        if self.model:
            self.lib.llama_model_free(self.model)
            self.model = None
