"""A conversation's title: its first message, cut to fit the sidebar.

The chat service names a new conversation with it at once; the background room replaces
it with a small model's title later, and falls back to it.
"""

from __future__ import annotations

TITLE_LENGTH = 48


def title_from(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= TITLE_LENGTH else line[: TITLE_LENGTH - 1].rstrip() + "…"
