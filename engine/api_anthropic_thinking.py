"""Reasoning a model writes as ``<think>…</think>`` at the start of its answer -> thinking.

The Messages API returns reasoning as ``thinking`` blocks, never inside the answer's text.
This splitter recognises only the explicit form: an answer that opens with ``<think>``.
Templates that open the reasoning themselves (the tag is in the prompt, not the answer)
need the template-aware split of the engine's reasoning work; this class is the one place
to swap it in.
"""

from __future__ import annotations

from typing import Literal

OPEN = "<think>"
CLOSE = "</think>"

Kind = Literal["thinking", "text"]
Piece = tuple[Kind, str]


class ThinkSplit:
    """Streamed text in, ``(kind, text)`` pieces out, tags removed."""

    def __init__(self) -> None:
        self._state: Literal["undecided", "thinking", "text"] = "undecided"
        self._held = ""
        self._strip_next = False  # the whitespace right after a tag is layout, not content

    def feed(self, piece: str) -> list[Piece]:
        if self._state == "text":
            return self._text(piece)
        self._held += piece
        if self._state == "undecided":
            start = self._held.lstrip()
            if start.startswith(OPEN):
                self._state, self._held, self._strip_next = "thinking", start[len(OPEN):], True
            elif OPEN.startswith(start):
                return []  # maybe the opening tag, maybe not: wait for more
            else:
                self._state = "text"
                held, self._held = self._held, ""
                return self._text(held)
        return self._thinking()

    def finish(self) -> list[Piece]:
        held, self._held = self._held, ""
        if not held:
            return []
        if self._state == "thinking":
            return self._emit("thinking", held)  # cut off (max_tokens) while still reasoning
        return self._text(held)

    def _thinking(self) -> list[Piece]:
        end = self._held.find(CLOSE)
        if end >= 0:
            thought, rest = self._held[:end], self._held[end + len(CLOSE):]
            self._state, self._held = "text", ""
            out = self._emit("thinking", thought)
            self._strip_next = True
            return out + self._text(rest)
        keep = _partial_close(self._held)
        thought, self._held = self._held[: len(self._held) - keep], self._held[len(self._held) - keep:]
        return self._emit("thinking", thought)

    def _text(self, text: str) -> list[Piece]:
        return self._emit("text", text)

    def _emit(self, kind: Kind, text: str) -> list[Piece]:
        if self._strip_next:
            text = text.lstrip()
            if not text:
                return []
            self._strip_next = False
        return [(kind, text)] if text else []


def _partial_close(text: str) -> int:
    """How much of the end of ``text`` may be the start of the closing tag."""
    for length in range(min(len(CLOSE) - 1, len(text)), 0, -1):
        if CLOSE.startswith(text[-length:]):
            return length
    return 0
