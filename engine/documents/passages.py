"""A document cut into passages by its structure, for retrieval when it does not fit whole.

Sections start at the converted text's headings (``## Page 3``, ``## Slide 2``, ``# Clause 7``,
a recording's ``## 12:31``);
a section's paragraphs are joined into passages of at most ``max_chars``, never across a
section, so a passage belongs to one page or heading and can be cited by it. A paragraph
longer than a passage is cut at sentence ends where it can be.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .document import Document

MAX_PASSAGE_CHARS = 1200
_HEADING = re.compile(r"^(#{1,6})\s+(.+)$")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_CLOCK = re.compile(r"(?:\d+:)?\d{1,2}:\d{2}")


@dataclass(frozen=True)
class Passage:
    ordinal: int  # its place in the document, from 0
    label: str  # where it is: "page 3", "slide 2", or the heading it sits under ("" before any)
    text: str


def split_passages(document: Document, max_chars: int = MAX_PASSAGE_CHARS) -> list[Passage]:
    passages: list[Passage] = []
    for label, paragraphs in _sections(document.text):
        current: list[str] = []
        size = 0
        for paragraph in (piece for p in paragraphs for piece in _cut(p, max_chars)):
            if current and size + len(paragraph) + 2 > max_chars:
                passages.append(Passage(len(passages), label, "\n\n".join(current)))
                current, size = [], 0
            current.append(paragraph)
            size += len(paragraph) + 2
        if current:
            passages.append(Passage(len(passages), label, "\n\n".join(current)))
    return passages


def _sections(text: str) -> list[tuple[str, list[str]]]:
    sections: list[tuple[str, list[str]]] = [("", [])]
    paragraph: list[str] = []

    def end_paragraph() -> None:
        if paragraph:
            sections[-1][1].append("\n".join(paragraph).strip())
            paragraph.clear()

    for line in text.splitlines():
        heading = _HEADING.match(line.strip())
        if heading:
            end_paragraph()
            title = heading.group(2).strip()
            page = re.fullmatch(r"(Page|Slide) (\d+)", title)
            # A recording's sections are headed by the time they start ("12:31"): a label only.
            timed = _CLOCK.fullmatch(title)
            sections.append((f"{page.group(1).lower()} {page.group(2)}" if page else title, []))
            if not page and not timed:
                paragraph.append(line.strip())  # a heading is part of what its passage says
        elif not line.strip():
            end_paragraph()
        else:
            paragraph.append(line)
    end_paragraph()
    return [(label, [p for p in paragraphs if p]) for label, paragraphs in sections if any(paragraphs)]


def _cut(paragraph: str, max_chars: int) -> list[str]:
    if len(paragraph) <= max_chars:
        return [paragraph]
    pieces: list[str] = []
    current = ""
    for sentence in _SENTENCE_END.split(paragraph):
        while len(sentence) > max_chars:  # one sentence longer than a passage: cut it plainly
            if current:
                pieces.append(current)
                current = ""
            pieces.append(sentence[:max_chars])
            sentence = sentence[max_chars:]
        if current and len(current) + len(sentence) + 1 > max_chars:
            pieces.append(current)
            current = ""
        current = f"{current} {sentence}".strip()
    if current:
        pieces.append(current)
    return pieces
