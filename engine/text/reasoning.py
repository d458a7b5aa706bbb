"""Reasoning text apart from the answer: ``<think>…</think>`` and its relatives.

Reasoning models write their thinking between markers before the answer. The markers
differ by family: ``<think>``/``</think>`` (Qwen 3, QwQ, DeepSeek-R1 and its distills),
``[THINK]``/``[/THINK]`` (Magistral), ``<|START_THINKING|>``/``<|END_THINKING|>``
(Command R7B). Some templates open the block in the prompt itself (the prompt ends with
``<think>\\n``), so the answer starts inside it and only the closing marker appears.

`ReasoningSplitter` takes the answer as it streams and sorts it into reasoning and answer
text, holding back only what could be the start of a marker; the answer never contains
the markers or the text between them.
"""

from __future__ import annotations

from dataclasses import dataclass

from .textstream import longest_partial_match

MARKER_PAIRS = (("<think>", "</think>"), ("[THINK]", "[/THINK]"), ("<|START_THINKING|>", "<|END_THINKING|>"))
REASONING_MARKERS = tuple(m for pair in MARKER_PAIRS for m in pair)


@dataclass(frozen=True)
class Split:
    reasoning: str = ""
    answer: str = ""


def opened_in_prompt(prompt_text: str) -> str | None:
    """The closing marker to wait for when the prompt itself ends inside a reasoning block."""
    tail = prompt_text.rstrip()
    for opener, closer in MARKER_PAIRS:
        if tail.endswith(opener):
            return closer
    return None


class ReasoningSplitter:
    def __init__(self, inside: str | None = None) -> None:
        self._closer = inside  # the marker that ends the block we are in, or None
        self._held = ""
        self._at_start = inside is None
        self.seen = inside is not None  # whether any reasoning block was found
        self._after_block = False
        self._block_start = inside is not None

    def feed(self, text: str) -> Split:
        self._held += text
        return self._drain(final=False)

    def finish(self) -> Split:
        return self._drain(final=True)

    def _drain(self, final: bool) -> Split:
        reasoning, answer = [], []
        while self._held:
            if self._closer is not None:
                if self._block_start:  # the line break after the opening marker is layout
                    self._held = self._held.lstrip()
                    if not self._held:
                        break
                    self._block_start = False
                at = self._held.find(self._closer)
                if at >= 0:
                    reasoning.append(self._held[:at])
                    self._held = self._held[at + len(self._closer):]
                    self._closer, self._after_block = None, True
                    continue
                keep = 0 if final else longest_partial_match(self._held, (self._closer,))
                reasoning.append(self._held[: len(self._held) - keep])
                self._held = self._held[len(self._held) - keep:]
                break
            if self._after_block:  # the blank lines between reasoning and answer are neither
                self._held = self._held.lstrip()
                if not self._held:
                    break
                self._after_block = False
            if self._at_start:
                stripped = self._held.lstrip()
                pair = next((p for p in MARKER_PAIRS if stripped.startswith(p[0])), None)
                if pair is not None:
                    self._held = stripped[len(pair[0]):]
                    self._closer, self._at_start, self.seen = pair[1], False, True
                    self._block_start = True
                    continue
                if not final and (not stripped or any(p[0].startswith(stripped) for p in MARKER_PAIRS)):
                    break
                self._at_start = False
            # Reasoning comes first; once the answer has begun, markers are the answer's text.
            answer.append(self._held)
            self._held = ""
        return Split("".join(reasoning), "".join(answer))



def split_whole(text: str, inside: str | None = None) -> Split:
    """Reasoning and answer of a whole (not streamed) text."""
    splitter = ReasoningSplitter(inside)
    first, last = splitter.feed(text), splitter.finish()
    return Split(first.reasoning + last.reasoning, first.answer + last.answer)
