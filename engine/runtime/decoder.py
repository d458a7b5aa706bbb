"""The decoder: what goes into a context's batch and what comes out of a decode.

The one place that fills ``llama_batch`` (steps, drafts, evaluation and embeddings all go
through ``fill``), and the readers of a decode's outputs: a row of logits, a token's
log-probability with its best alternatives, the logits over a whole text, a pooled
embedding. It knows the context (``model_loading.LlamaContext``) and nothing of sequences or
slots, so the model, its sequences and the draft model all use it without reaching into one
another.
"""

from __future__ import annotations

import math
import threading

import numpy as np

from ..base import ModelLoadError, TokenLogprob
from .batch import ALL, LAST, NONE, BatchRow
from .model_loading import LlamaContext


class Decoder:
    """Batches in, logits and embeddings out, on one context."""

    def __init__(self, context: LlamaContext) -> None:
        self.context = context

    def fill(self, rows: list[BatchRow]) -> list[int]:
        """Write ``rows`` into the reusable batch; the batch index of each row's last token
        (-1 for a row that wants no logits)."""
        batch = self.context.batch
        n = 0
        last_rows = []
        for row in rows:
            for i, token in enumerate(row.tokens):
                batch.token[n] = token
                batch.pos[n] = row.first_pos + i
                batch.n_seq_id[n] = 1
                batch.seq_id[n][0] = row.seq_id
                batch.logits[n] = 1 if row.logits == ALL else 0
                n += 1
            if row.logits == LAST:
                batch.logits[n - 1] = 1
            last_rows.append(n - 1 if row.logits != NONE else -1)
        batch.n_tokens = n
        return last_rows

    def decode(self, rows: list[BatchRow]) -> tuple[list[int], int]:
        """``fill`` then ``llama_decode``: each row's logits index and llama.cpp's status
        (the caller decides what a failure clears: it knows whose rows they were)."""
        indices = self.fill(rows)
        return indices, self.context.decode()

    def logits_at(self, index: int) -> np.ndarray:
        """A copy of the logits row at batch ``index`` of the last decode."""
        context = self.context
        pointer = context.lib.llama_get_logits_ith(context.ctx, index)
        return np.ctypeslib.as_array(pointer, shape=(context.n_vocab,)).astype(np.float32, copy=True)

    def logprob_entry(self, logits: np.ndarray, token: int, top_n: int) -> TokenLogprob:
        """``token``'s log-probability under ``logits``, with the ``top_n`` likeliest tokens."""
        vocabulary = self.context.vocabulary
        peak = float(logits.max())
        log_z = peak + math.log(float(np.exp(logits - peak).sum()))
        top: list[tuple[str, bytes, float]] = []
        if top_n:
            best = np.argpartition(-logits, top_n)[:top_n]
            for candidate in best[np.argsort(-logits[best])]:
                raw = vocabulary.token_bytes(int(candidate))
                top.append((raw.decode("utf-8", errors="replace"), raw, float(logits[candidate]) - log_z))
        raw = vocabulary.token_bytes(token)
        return TokenLogprob(raw.decode("utf-8", errors="replace"), raw, float(logits[token]) - log_z, top)

    def logprob_at(self, index: int, token: int, top_n: int) -> TokenLogprob:
        """``logprob_entry`` of the logits row at batch ``index``."""
        return self.logprob_entry(self.logits_at(index), token, top_n)

    def logits_over(self, tokens: list[int], chunk_size: int, cancel: threading.Event | None = None) -> np.ndarray:
        """Next-token logits after every position of ``tokens`` on sequence 0, decoded
        ``chunk_size`` at a time into a KV cache the caller has cleared: shape
        (len(tokens), n_vocab); an empty array when cancelled."""
        context = self.context
        if context.output_rows is not None:
            # llama.cpp sized this context's buffers for a chat step's rows, and stops the
            # process (an assertion) on a batch that asks for more.
            raise ValueError(f"{context.record.id} was loaded for chat; logits after every position need "
                             "LoadOptions(every_logit=True)")
        out = np.empty((len(tokens), context.n_vocab), dtype=np.float32)
        for start in range(0, len(tokens), chunk_size):
            if cancel is not None and cancel.is_set():
                return out[:0]
            chunk = tokens[start : start + chunk_size]
            if self.decode([BatchRow(0, start, chunk, ALL)])[1] != 0:
                raise ModelLoadError(f"llama.cpp failed to evaluate the text with {context.record.id}")
            pointer = context.lib.llama_get_logits(context.ctx)
            out[start : start + len(chunk)] = np.ctypeslib.as_array(pointer, shape=(len(chunk), context.n_vocab))
        return out

    def pooled_embedding(self, tokens: list[int]) -> np.ndarray:
        """Decode ``tokens`` as one batch on sequence 0 (pooling needs them together) and
        read the sequence's pooled embedding, into a KV cache the caller clears after."""
        context = self.context
        status = self.decode([BatchRow(0, 0, tokens, ALL)])[1]
        if status != 0:
            raise ModelLoadError(f"llama.cpp failed to process the input (status {status})")
        pointer = context.lib.llama_get_embeddings_seq(context.ctx, 0)
        if not pointer:
            raise ModelLoadError(f"{context.record.id} produced no embedding")
        n_embd = context.lib.llama_model_n_embd(context.model)
        return np.ctypeslib.as_array(pointer, shape=(n_embd,)).astype(np.float64)
