"""Exporting a conversation as Markdown or JSON (pure functions; the caller writes atomically)."""

from __future__ import annotations

import json
import time
from typing import Any

from inglenook.engine import Conversation, Message


def to_markdown(conversation: Conversation, messages: list[Message]) -> str:
    lines = [f"# {conversation.title or 'Conversation'}", ""]
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(conversation.created_at))
    lines += [f"*Exported from Inglenook · started {when}*", ""]
    if conversation.system_prompt:
        lines += ["> **System:** " + conversation.system_prompt.replace("\n", "\n> "), ""]
    for message in messages:
        who = "You" if message.role == "user" else (message.model_id or "Assistant")
        note = " *(stopped)*" if message.status == "partial" else ""
        lines += [f"## {who}{note}", "", message.content.rstrip(), ""]
    return "\n".join(lines)


def to_json(conversation: Conversation, messages: list[Message]) -> str:
    body: dict[str, Any] = {
        "format": "inglenook.conversation",
        "version": 1,
        "conversation": {
            "id": conversation.id,
            "title": conversation.title,
            "model_id": conversation.model_id,
            "system_prompt": conversation.system_prompt,
            "sampling": conversation.sampling,
            "created_at": conversation.created_at,
            "updated_at": conversation.updated_at,
        },
        "messages": [
            {k: getattr(m, k) for k in m.__dataclass_fields__ if k != "conversation_id"} for m in messages
        ],
    }
    return json.dumps(body, indent=2, ensure_ascii=False) + "\n"
