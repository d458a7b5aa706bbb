"""The person decides: each call waits for a decision unless they allowed the tool before,
in this chat or always (``mcp_permissions``; conversation 0 is "always")."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..store import Store, table_named

APPROVE, DENY = "approve", "deny"
ONCE, IN_CHAT, ALWAYS = "once", "chat", "always"
ALWAYS_ID = 0


@dataclass(frozen=True)
class CallRequest:
    """A call the model wrote, waiting for the person."""

    call_id: str
    server: str
    tool: str
    arguments: dict[str, Any]
    description: str
    conversation_id: int


@dataclass(frozen=True)
class Decision:
    verdict: str = APPROVE  # approve | deny
    arguments: dict[str, Any] | None = None  # edited arguments, when the person changed them
    remember: str = ONCE  # once | chat | always (approvals only)
    reason: str = ""  # a denial's words, for the model

    @property
    def approved(self) -> bool:
        return self.verdict == APPROVE


#: What a front end supplies: called on the tool loop's thread, it may wait for the person.
Approver = Callable[[CallRequest], Decision]


def approve_all(_request: CallRequest) -> Decision:
    """For scripts and tests that have already decided."""
    return Decision()


class Permissions:
    def __init__(self, store: Store) -> None:
        self.store = store

    def allowed(self, server: str, tool: str, conversation_id: int) -> bool:
        with self.store.reading():
            row = self.store.db.conn.execute(
                "SELECT 1 FROM mcp_permissions WHERE server = ? AND tool = ? AND conversation_id IN (?, ?)",
                [server, tool, ALWAYS_ID, conversation_id]).fetchone()
        return row is not None

    def remember(self, server: str, tool: str, conversation_id: int, scope: str) -> None:
        if scope not in (IN_CHAT, ALWAYS):
            return
        row = {"server": server, "tool": tool, "conversation_id": ALWAYS_ID if scope == ALWAYS else conversation_id,
               "created_at": time.time()}
        with self.store.writing():
            table_named(self.store.db, "mcp_permissions").upsert(row, pk=("server", "tool", "conversation_id"))

    def forget(self, server: str, tool: str) -> None:
        with self.store.writing():
            self.store.db.conn.execute("DELETE FROM mcp_permissions WHERE server = ? AND tool = ?", [server, tool])
