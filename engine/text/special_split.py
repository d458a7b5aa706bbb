"""Cut a long prompt into pieces that tokenize exactly as the whole does.

Before tokenizing, llama.cpp splits text at every occurrence of its special tokens
(control tokens such as turn markers, and "user-defined" ones: gemma's whitespace runs),
and that split costs time that grows with the square of the number of occurrences: a chat
of 50,000 one-character messages took over a minute on SmolLM2 and six on gemma-3, on the
scheduler's thread. Tokenizing pieces of bounded size keeps the total linear, and lets the
caller stop as soon as the prompt is known not to fit.

A cut is placed only where llama.cpp's own split puts a boundary for certain: right
before an occurrence of a special token that no other special token of at least its
length overlaps (llama.cpp matches longer ones first); and, before a token that strips
the whitespace on its left, only after a character that is not whitespace.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

# How far past a piece's minimum size to look for a safe cut before trying further on.
_SEARCH_CHARS = 4096


class PieceCutter:
    """Finds safe cuts for one vocabulary's special tokens."""

    def __init__(self, specials: Iterable[str], strips_left: Iterable[str] = ()) -> None:
        self._specials = sorted({s for s in specials if s}, key=len, reverse=True)
        self._strips_left = set(strips_left)
        self._by_first: dict[str, list[str]] = {}
        for text in self._specials:
            self._by_first.setdefault(text[0], []).append(text)
        firsts = "".join(re.escape(c) for c in self._by_first)
        self._candidate = re.compile(f"[{firsts}]") if firsts else None

    def pieces(self, text: str, min_chars: int) -> Iterator[str]:
        """``text`` in consecutive pieces of at least ``min_chars`` characters wherever a
        safe cut exists (else longer; without one, the whole text)."""
        start = 0
        while len(text) - start > min_chars and self._candidate is not None:
            cut = self._find_cut(text, start + min_chars)
            if cut is None:
                break
            yield text[start:cut]
            start = cut
        yield text[start:]

    def _find_cut(self, text: str, frm: int) -> int | None:
        assert self._candidate is not None
        pos = frm
        while True:
            found = self._candidate.search(text, pos)
            if found is None:
                return None
            p = found.start()
            special = self._special_at(text, p)
            if special is not None and not (special in self._strips_left and text[p - 1].isspace()) \
                    and self._uncontested(text, p, len(special)):
                return p
            pos = p + 1

    def _special_at(self, text: str, p: int) -> str | None:
        for special in self._by_first.get(text[p], ()):
            if text.startswith(special, p):
                return special  # the longest, as llama.cpp would take it
        return None

    def _uncontested(self, text: str, p: int, length: int) -> bool:
        """No special token of at least ``length`` characters spans position ``p`` or
        overlaps the one at ``p`` (llama.cpp would match it first, moving the boundary)."""
        for other in self._specials:
            if len(other) < length:
                break  # sorted longest first: the rest cannot take precedence
            lo, hi = p - len(other) + 1, p + length + len(other) - 1
            i = text.find(other, max(lo, 0), hi)
            while i != -1:
                if i != p and i < p + length and i + len(other) > p:
                    return False
                i = text.find(other, i + 1, hi)
        return True
