"""Conversations: the chat service a front end talks to, background work (titles, summaries,
the meaning index) and conversation search.

May import: base, documents, models, remote, runtime, scheduling, store, text, tools, usage.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..base import lazy_door

# Which module defines each name other packages (or the front door) use. Keep in step with
# the TYPE_CHECKING block below, which is what type checkers read (a test compares them).
_EXPORTS: dict[str, tuple[str, ...]] = {
    "assistants": ("Assistant", "AssistantApplied", "AssistantLibrary"),
    "background": ("BackgroundWork",),
    "chat": ("ChatService", "ConversationSearch"),
    "titles": ("title_from",),
    "tool_turn": ("CallFinished", "CallProposed", "CallRecord", "RoundFinished", "RoundStats", "TextPiece",
                  "ToolTurn", "ToolTurnEvent"),
    "turn": ("Turn",),
}

__all__, __getattr__, __dir__ = lazy_door(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .assistants import Assistant as Assistant, AssistantApplied as AssistantApplied, AssistantLibrary as AssistantLibrary
    from .background import BackgroundWork as BackgroundWork
    from .chat import ChatService as ChatService, ConversationSearch as ConversationSearch
    from .titles import title_from as title_from
    from .tool_turn import (
        CallFinished as CallFinished, CallProposed as CallProposed, CallRecord as CallRecord,
        RoundFinished as RoundFinished, RoundStats as RoundStats, TextPiece as TextPiece, ToolTurn as ToolTurn,
        ToolTurnEvent as ToolTurnEvent,
    )
    from .turn import Turn as Turn
