"""Reasoning a model writes (``<think>…</think>`` and its relatives) -> thinking blocks.

The Messages API returns reasoning as ``thinking`` blocks, never inside the answer's text.
``inside`` names the closing marker when the template opened the block in the prompt.
"""

from __future__ import annotations

from typing import Literal

from ...text import ReasoningSplitter, Split

Kind = Literal["thinking", "text"]
Piece = tuple[Kind, str]


class ThinkSplit:
    """Streamed text in, ``(kind, text)`` pieces out, markers removed (engine/text/reasoning.py
    does the splitting, for every API alike)."""

    def __init__(self, inside: str | None = None) -> None:
        self._split = ReasoningSplitter(inside)

    def feed(self, piece: str) -> list[Piece]:
        return _pieces(self._split.feed(piece))

    def finish(self) -> list[Piece]:
        return _pieces(self._split.finish())


def _pieces(split: Split) -> list[Piece]:
    out: list[Piece] = []
    if split.reasoning:
        out.append(("thinking", split.reasoning))
    if split.answer:
        out.append(("text", split.answer))
    return out
