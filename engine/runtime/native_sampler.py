"""llama.cpp's native sampler chain, with grammars checked lazily.

A grammar (JSON mode, forced tool calls) constrains which tokens may come next. Applying
it to the whole vocabulary at every step costs more than the model's forward pass on
small models, so — as llama.cpp's own common sampler does — the chain samples first and
the grammar only checks that one token; only when it rejects the token is the grammar
applied to every candidate and the token drawn again.

Plain greedy decoding (temperature 0, no penalties, no grammar) skips the chain: the chain
copies the whole vocabulary into a candidate array at every token (0.28 ms a token with
gemma-3's 262,144 entries, ~4% of its decode step on a 2-core CPU), where an argmax over a
kept view of llama.cpp's logits row takes 0.07–0.1 ms in the decode loop and picks the same
token: the first of the highest logits, as llama.cpp's greedy sampler does. A logit bias that
only lowers other tokens than the winner (end tokens kept out) cannot change it and costs
nothing; any other bias is added in place and the row's entries put back.
"""

from __future__ import annotations

import ctypes
import math
from types import ModuleType

import numpy as np

from ..base import InvalidRequest, SamplingParams
from .native import logits_row_address

_TOKEN_DATA = np.dtype([("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])


class NativeSampler:
    def __init__(self, lib: ModuleType, vocab: ctypes.c_void_p, n_vocab: int, sampling: SamplingParams) -> None:
        self._lib = lib
        self._n_vocab = n_vocab
        # Both are None once free() has given them back to llama.cpp.
        self.chain: ctypes.c_void_p | None = _build_chain(lib, n_vocab, sampling)
        self.grammar: ctypes.c_void_p | None = None
        self._argmax = _plain_greedy(sampling)
        if self._argmax:
            bias = sampling.logit_bias or {}
            self._bias_ids = np.fromiter(bias.keys(), dtype=np.int64, count=len(bias))
            self._bias_values = np.fromiter(bias.values(), dtype=np.float32, count=len(bias))
            self._bias_set = frozenset(bias)
            self._bias_raises = any(value > 0 for value in bias.values())
            self._row_address = logits_row_address()
            self._view_address = 0
            self._view = np.empty(0, dtype=np.float32)
        if sampling.grammar:
            self.grammar = lib.llama_sampler_init_grammar(vocab, sampling.grammar.encode(), b"root")
            if not self.grammar:
                self.free()
                raise InvalidRequest("the grammar for response_format could not be parsed", param="response_format")
            self._one = (lib.llama_token_data * 1)()
            self._all = (lib.llama_token_data * n_vocab)()
            self._all_view = np.frombuffer(self._all, dtype=_TOKEN_DATA)
            self._ids = np.arange(n_vocab, dtype=np.int32)

    def sample(self, ctx: ctypes.c_void_p, index: int = -1) -> int:
        """Draw the next token from the logits of batch row ``index`` (default: the last row)
        and accept it into every sampler."""
        lib = self._lib
        if self._argmax:
            return self._argmax_token(ctx, index)
        token = lib.llama_sampler_sample(self.chain, ctx, index)
        if self.grammar is None or self._grammar_allows(token):
            if self.grammar is not None:
                lib.llama_sampler_accept(self.grammar, token)
            return token
        return self._resample_with_grammar(ctx, index)

    def _argmax_token(self, ctx: ctypes.c_void_p, index: int) -> int:
        logits = self._logits_row(ctx, index)
        best = int(np.argmax(logits))
        if not self._bias_may_change(best):
            return best
        # The bias goes into llama.cpp's buffer and its entries are put back after: a copy of
        # the whole row (1 MB for gemma-3) cost more than the argmax itself. The buffer must
        # end as the model wrote it (logprobs read it), so the old values are restored, not
        # the bias subtracted (float addition does not always undo).
        kept = logits[self._bias_ids]
        logits[self._bias_ids] += self._bias_values
        try:
            return int(np.argmax(logits))
        finally:
            logits[self._bias_ids] = kept

    def _bias_may_change(self, best: int) -> bool:
        """Whether the logit bias could pick another token than ``best``, the argmax of the
        unbiased row: only when it raises some token or touches ``best`` itself (lowering
        other tokens leaves the first highest logit where it was). A bias that keeps end
        tokens out, the common one, then costs nothing."""
        return bool(self._bias_raises or best in self._bias_set)

    def _logits_row(self, ctx: ctypes.c_void_p, index: int) -> np.ndarray:
        """The logits row at batch ``index``, as a view of llama.cpp's buffer. The view is
        kept while llama.cpp hands out the same address: wrapping the pointer anew cost
        40 µs a token in the decode loop (the decode leaves Python's data out of cache)."""
        address = self._row_address(ctx, index)
        if address != self._view_address:
            if not address:
                raise RuntimeError("llama.cpp returned no logits for the row sampled")
            row = (ctypes.c_float * self._n_vocab).from_address(address)
            self._view, self._view_address = np.ctypeslib.as_array(row), address
        return self._view

    def _grammar_allows(self, token: int) -> bool:
        self._one[0].id, self._one[0].logit, self._one[0].p = token, 0.0, 0.0
        candidates = self._lib.llama_token_data_array(self._one, 1, -1, False)
        self._lib.llama_sampler_apply(self.grammar, ctypes.byref(candidates))
        return math.isfinite(self._one[0].logit)

    def _resample_with_grammar(self, ctx: ctypes.c_void_p, index: int) -> int:
        lib = self._lib
        logits = np.ctypeslib.as_array(lib.llama_get_logits_ith(ctx, index), shape=(self._n_vocab,))
        view = self._all_view
        view["id"], view["logit"], view["p"] = self._ids, logits, 0.0
        candidates = lib.llama_token_data_array(self._all, self._n_vocab, -1, False)
        lib.llama_sampler_apply(self.grammar, ctypes.byref(candidates))
        lib.llama_sampler_apply(self.chain, ctypes.byref(candidates))
        token = int(candidates.data[candidates.selected].id)
        lib.llama_sampler_accept(self.grammar, token)
        # The chain already accepted the rejected draw; it also sees the token kept.
        lib.llama_sampler_accept(self.chain, token)
        return token

    def free(self) -> None:
        if self.chain:
            self._lib.llama_sampler_free(self.chain)
            self.chain = None
        if self.grammar:
            self._lib.llama_sampler_free(self.grammar)
            self.grammar = None


def _plain_greedy(sampling: SamplingParams) -> bool:
    """Greedy with nothing that keeps state between tokens: an argmax gives the chain's token."""
    return (sampling.greedy and not sampling.grammar and sampling.repeat_penalty == 1.0
            and not sampling.presence_penalty and not sampling.frequency_penalty)


def _build_chain(lib: ModuleType, n_vocab: int, sampling: SamplingParams) -> ctypes.c_void_p:
    chain = lib.llama_sampler_chain_init(lib.llama_sampler_chain_default_params())

    def add(sampler: ctypes.c_void_p) -> None:
        lib.llama_sampler_chain_add(chain, sampler)

    if sampling.logit_bias:
        biases = (lib.llama_logit_bias * len(sampling.logit_bias))()
        for i, (token, bias) in enumerate(sampling.logit_bias.items()):
            biases[i].token = token
            biases[i].bias = bias
        add(lib.llama_sampler_init_logit_bias(n_vocab, len(sampling.logit_bias), biases))
    if sampling.repeat_penalty != 1.0 or sampling.presence_penalty or sampling.frequency_penalty:
        add(lib.llama_sampler_init_penalties(
            n_vocab, sampling.repeat_last_n, sampling.repeat_penalty,
            sampling.frequency_penalty, sampling.presence_penalty,
        ))
    if sampling.greedy:
        add(lib.llama_sampler_init_greedy())
        return chain
    add(lib.llama_sampler_init_top_k(sampling.top_k))
    add(lib.llama_sampler_init_top_p(sampling.top_p, 1))
    add(lib.llama_sampler_init_min_p(sampling.min_p, 1))
    add(lib.llama_sampler_init_temp(sampling.temperature))
    seed = lib.LLAMA_DEFAULT_SEED if sampling.seed is None else sampling.seed & 0xFFFFFFFF
    add(lib.llama_sampler_init_dist(seed))
    return chain
