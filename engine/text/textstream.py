"""Turn a stream of token bytes into text chunks: valid UTF-8, with stop strings cut out.

A character can span several tokens (emoji, CJK), so bytes go through an incremental
decoder. Text that could be the start of a stop string is held back until it is known
not to be one, so a stop string never leaks into the output.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass


@dataclass
class StreamResult:
    text: str  # text safe to emit now
    stopped: bool = False  # a stop string was found; emit ``text`` and finish


class TextStream:
    def __init__(self, stop: tuple[str, ...] = ()) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._stop = tuple(s for s in stop if s)
        self._held = ""

    def feed(self, data: bytes) -> StreamResult:
        text = self._held + self._decoder.decode(data)
        if not self._stop:
            self._held = ""
            return StreamResult(text)
        cut = _first_stop(text, self._stop)
        if cut is not None:
            self._held = ""
            return StreamResult(text[:cut], stopped=True)
        keep = longest_partial_match(text, self._stop)
        self._held = text[len(text) - keep :] if keep else ""
        return StreamResult(text[: len(text) - keep])

    def flush(self) -> str:
        """Whatever is still held back at the end of generation.

        An incomplete character left when generation stops (by a token limit) is dropped
        rather than shown as a replacement character."""
        text = self._held
        self._held = ""
        self._decoder.reset()
        return text


def _first_stop(text: str, stops: tuple[str, ...]) -> int | None:
    positions = [i for i in (text.find(s) for s in stops) if i >= 0]
    return min(positions) if positions else None


def longest_partial_match(text: str, stops: tuple[str, ...]) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of one of ``stops``:
    how much of a stream to hold back because it may be the start of a stop string or marker."""
    best = 0
    for stop in stops:
        for length in range(min(len(stop) - 1, len(text)), best, -1):
            if stop.startswith(text[-length:]):
                best = length
                break
    return best
