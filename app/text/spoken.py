"""An answer as a voice should read it: Markdown out, whole sentences, as the answer streams.

``Sentences`` is fed the whole answer so far (what ``ChatController.answer_text`` says) and
hands out each sentence once it is complete, so reading starts when the first sentence ends,
not when the answer does. A sentence is complete at ., ! or ? followed by a space or a line
break (so "3.5" and "e.g." wait), or at a line's end (a heading, a list item, a paragraph). Code
blocks are not read (a voice reading code helps nobody), and neither is reasoning.
"""

from __future__ import annotations

import re

from inglenook.engine import split_whole

_FENCE = re.compile(r"```.*?(```|$)", re.DOTALL)
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_MARKS = re.compile(r"(\*\*|__|\*|`|~~|^#{1,6}\s*|^\s*[-*+]\s+|^\s*\d+[.)]\s+|^>\s*)", re.MULTILINE)
_END = re.compile(r"(?<=[.!?…])[\"')\]]*\s+|\s*\n\s*")
# Words that end in a full stop but rarely end a sentence.
_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "mr.", "mrs.", "ms.", "dr.", "st.", "no.")
MAX_SENTENCE = 400  # a sentence longer than this is cut at a comma or space (Piper reads it in one breath)


def speakable(text: str) -> str:
    """Markdown as words: no code blocks, no emphasis marks, links as their text."""
    text = _FENCE.sub(" ", text)
    text = _LINK.sub(r"\1", text)
    return _MARKS.sub("", text)


def _long_cut(sentence: str) -> list[str]:
    pieces = []
    while len(sentence) > MAX_SENTENCE:
        cut = max(sentence.rfind(", ", 0, MAX_SENTENCE), sentence.rfind(" ", 0, MAX_SENTENCE))
        cut = cut if cut > 0 else MAX_SENTENCE
        pieces.append(sentence[:cut + 1].strip())
        sentence = sentence[cut + 1:]
    return [*pieces, sentence.strip()]


class Sentences:
    """The complete sentences of a growing answer, each handed out once."""

    def __init__(self) -> None:
        self._done = 0  # characters of the speakable text already handed out

    def _text(self, answer: str) -> str:
        # An open code fence hides everything after it until it closes: never read half a block.
        return speakable(split_whole(answer).answer)

    def feed(self, answer: str) -> list[str]:
        """The sentences completed since the last call (``answer``: the whole answer so far)."""
        text = self._text(answer)
        found: list[str] = []
        position = self._done
        for match in _END.finditer(text, self._done):
            candidate = text[position:match.start() + 1 if text[match.start()] in ".!?…" else match.start()]
            if candidate.rstrip().lower().endswith(_ABBREVIATIONS) and "\n" not in match.group():
                continue
            position = match.end()
            found.extend(piece for piece in _long_cut(" ".join(text[self._done:position].split())) if piece)
            self._done = position
        return found

    def finish(self, answer: str) -> list[str]:
        """The rest, once the answer has ended (its last sentence may lack a full stop)."""
        found = self.feed(answer)
        rest = " ".join(self._text(answer)[self._done:].split())
        self._done = len(self._text(answer))
        return [*found, *(piece for piece in _long_cut(rest) if piece)] if rest else found


def sentences_of(answer: str) -> list[str]:
    """A whole answer's sentences (Read aloud on a finished answer)."""
    return Sentences().finish(answer)
