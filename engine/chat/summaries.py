"""Summaries of long conversations, for the sidebar (table ``conversation_summaries``, m009).

The background room writes them (``background.py``); the window reads them all at once
when it lists conversations. A row whose conversation was deleted is never shown (reads
join on the conversations that exist) and is removed the next time one is written.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ..store import Store

TABLE = "conversation_summaries"


@dataclass(frozen=True)
class Summary:
    text: str
    messages: int  # the conversation's length when it was summarised


class ConversationSummaries:
    def __init__(self, store: Store) -> None:
        self.store = store

    def get(self, conversation_id: int) -> Summary | None:
        with self.store.reading() as conn:
            row = conn.execute(f"SELECT summary, messages FROM {TABLE} WHERE conversation_id = ?",
                               [conversation_id]).fetchone()
        return Summary(row[0], row[1]) if row is not None else None

    def all(self) -> dict[int, str]:
        """conversation id -> summary, for the conversations that still exist."""
        with self.store.reading() as conn:
            rows = conn.execute(f"SELECT s.conversation_id, s.summary FROM {TABLE} AS s "
                                "JOIN conversations AS c ON c.id = s.conversation_id").fetchall()
        return {int(cid): str(text) for cid, text in rows}

    def put(self, conversation_id: int, text: str, messages: int) -> None:
        with self.store.writing() as conn:
            conn.execute(
                f"INSERT OR REPLACE INTO {TABLE} (conversation_id, summary, messages, updated_at) VALUES (?, ?, ?, ?)",
                [conversation_id, text, messages, time.time()],
            )
            conn.execute(f"DELETE FROM {TABLE} WHERE conversation_id NOT IN (SELECT id FROM conversations)")
