"""A loaded model's vocabulary: text to tokens and back, through llama.cpp's tokenizer.

``LoadedModel`` holds one and answers ``tokenize``/``detokenize`` through it. Pieces of text
per token are cached (the stream decodes every generated token), and long prompts are
tokenized in pieces cut where the tokenizer itself would split (``special_split``), which
keeps the work linear and lets a context check or a cancel stop it early.
"""

from __future__ import annotations

import ctypes
import functools
import threading
from collections.abc import Callable
from typing import Any

from ..base import ContextLengthExceeded, JobCancelled
from ..text import PRESERVED_MARKERS, REASONING_MARKERS, PieceCutter

# llama.cpp's LLAMA_TOKEN_ATTR_*: the tokens its tokenizer splits text at before tokenizing.
_ATTR_UNKNOWN, _ATTR_CONTROL, _ATTR_USER_DEFINED, _ATTR_LSTRIP = 1 << 0, 1 << 3, 1 << 4, 1 << 7
# Prompts longer than this are tokenized in pieces (linear time, stoppable); see special_split.
TOKENIZE_PIECE_CHARS = 16_384


class Vocabulary:
    """Tokenizing and detokenizing with one model's vocabulary (``llama_vocab``)."""

    def __init__(self, lib: Any, vocab: Any, n_vocab: int) -> None:
        self._lib = lib
        self._vocab = vocab
        self.n_vocab = n_vocab
        self._pieces: dict[int, bytes] = {}
        self._cutters: dict[bool, PieceCutter | None] = {}  # by parse_special, made on first need

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = True) -> list[int]:
        data = text.encode("utf-8")
        capacity = len(data) + 16
        buffer = (self._lib.llama_token * capacity)()
        count = self._lib.llama_tokenize(self._vocab, data, len(data), buffer, capacity, add_special, parse_special)
        if count < 0:  # the buffer was too small; llama.cpp says how many it needs
            capacity = -count
            buffer = (self._lib.llama_token * capacity)()
            count = self._lib.llama_tokenize(self._vocab, data, len(data), buffer, capacity, add_special, parse_special)
        return list(buffer[:count])

    def token_bytes(self, token: int) -> bytes:
        piece = self._pieces.get(token)
        if piece is None:
            special = token in self.preserved_markers
            buffer = ctypes.create_string_buffer(64)
            n = self._lib.llama_token_to_piece(self._vocab, token, buffer, 64, 0, special)
            if n < 0:
                buffer = ctypes.create_string_buffer(-n)
                n = self._lib.llama_token_to_piece(self._vocab, token, buffer, -n, 0, special)
            piece = buffer.raw[:n]
            self._pieces[token] = piece
        return piece

    @functools.cached_property
    def preserved_markers(self) -> frozenset[int]:
        """Control tokens that mark tool calls or reasoning (``[TOOL_CALLS]``, ``<think>``, …):
        written into the text, where the parsers look for them, not dropped like other
        control tokens."""
        ids = set()
        for marker in (*PRESERVED_MARKERS, *REASONING_MARKERS):
            tokens = self.tokenize(marker, add_special=False, parse_special=True)
            if len(tokens) == 1:
                ids.add(tokens[0])
        return frozenset(ids)

    def detokenize(self, tokens: list[int]) -> str:
        return b"".join(self.token_bytes(t) for t in tokens).decode("utf-8", errors="replace")

    def is_end_of_generation(self, token: int) -> bool:
        return bool(self._lib.llama_vocab_is_eog(self._vocab, token))

    def cut_at_end(self, draft: list[int]) -> list[int]:
        """A draft up to and including its first end-of-generation token: nothing follows it."""
        for i, token in enumerate(draft):
            if self.is_end_of_generation(token):
                return draft[:i + 1]
        return draft

    def bounded_tokens(self, text: str, add_special: bool, parse_special: bool, limit: int,
                       cancel: threading.Event | None, too_long: Callable[[int], ContextLengthExceeded]) -> list[int]:
        """Tokenize in pieces: linear in the text however many special tokens it holds, and
        stopped (``too_long(count)`` raised) once more than ``limit`` tokens are counted, or on
        ``cancel``."""
        cutter = self.cutter(parse_special) if len(text) > TOKENIZE_PIECE_CHARS else None
        parts = cutter.pieces(text, TOKENIZE_PIECE_CHARS) if cutter is not None else iter([text])
        tokens: list[int] = []
        for i, piece in enumerate(parts):
            if cancel is not None and cancel.is_set():
                raise JobCancelled("the request was cancelled while its prompt was being prepared")
            tokens.extend(self.tokenize(piece, add_special=add_special and i == 0, parse_special=parse_special))
            if len(tokens) > limit:
                raise too_long(len(tokens))
        return tokens

    def cutter(self, parse_special: bool) -> PieceCutter | None:
        """Where this vocabulary's tokenizer splits text: the tokens it matches before
        tokenizing (without ``parse_special`` only the user-defined ones). None when pieces
        cannot tokenize like the whole (a vocabulary that appends EOS to every call)."""
        if parse_special not in self._cutters:
            lib, vocab = self._lib, self._vocab
            marked, skipped = _ATTR_USER_DEFINED | _ATTR_CONTROL | _ATTR_UNKNOWN, 0
            if not parse_special:
                skipped = _ATTR_CONTROL | _ATTR_UNKNOWN  # llama.cpp skips these then (the mask, not the type)
            texts, strips_left = [], []
            for token in range(self.n_vocab):
                attr = lib.llama_vocab_get_attr(vocab, token)
                if attr & marked and not attr & skipped:
                    text = lib.llama_vocab_get_text(vocab, token).decode("utf-8", errors="replace")
                    texts.append(text)
                    if attr & _ATTR_LSTRIP:
                        strips_left.append(text)
            add_eos = bool(lib.llama_vocab_get_add_eos(vocab))
            self._cutters[parse_special] = None if add_eos else PieceCutter(texts, strips_left)
        return self._cutters[parse_special]
