"""Documents in a prompt: whole, in one stable block before the conversation.

The block depends only on the documents (their order, names and text), never on the chat, so
every conversation with the same documents starts with the same tokens, and the prefix
cache's content-addressed entry for them (saved once, on disk) serves them all.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from .document import Document
from .recording import AUDIO_KIND

_TIME_HEADING = re.compile(r"^## ((?:\d+:)?\d{2}:\d{2})$", re.MULTILINE)

# Citations in one form for whole and searched documents alike ("[name, page N]"), which the
# window turns into links to the document's preview (app/markdown.link_citations).
PREAMBLE = ("The user has attached the documents below. Answer from them, and cite where an answer "
            "comes from in square brackets: the document's name and, where it has pages, the page, "
            "e.g. [report.pdf, page 3].")


# Said only when a recording is among the documents (its sections are headed by their times),
# so the block of documents without one keeps the tokens it always had.
RECORDING_PREAMBLE = ("A recording's transcript is headed every half minute by the time its words start: cite "
                      "a recording by its name and that time, e.g. [{name}, {time}].")


def documents_block(documents: Sequence[Document]) -> str:
    parts = [PREAMBLE]
    recording = next((d for d in documents if d.kind == AUDIO_KIND), None)
    if recording is not None:
        first = _TIME_HEADING.search(recording.text)
        parts[0] += " " + RECORDING_PREAMBLE.format(name=recording.name, time=first.group(1) if first else "00:00")
    for document in documents:
        pages = f", {document.page_count} pages" if document.page_count else ""
        parts.append(f'<document name="{document.name}" kind="{document.kind}"{pages}>\n{document.text}\n</document>')
    return "\n\n".join(parts)


def with_documents(messages: list[dict[str, Any]], documents: Sequence[Document]) -> tuple[list[dict[str, Any]], int]:
    """``messages`` with the documents placed first: (the messages, how many leading ones
    every chat with these documents shares — the job's ``shared_messages``).

    The documents go in a system message of their own, ahead of the chat's own system
    prompt, which follows in a second system message, so the chat's instructions never
    change the documents' tokens."""
    if not documents:
        return list(messages), 0
    return [{"role": "system", "content": documents_block(documents)}, *messages], 1
