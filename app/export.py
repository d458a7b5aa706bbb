"""Exporting a conversation as Markdown or JSON (pure functions; the caller writes atomically)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from inglenook.engine import CallRecord, Conversation, Message


def to_markdown(conversation: Conversation, messages: list[Message], calls: Sequence[CallRecord] = ()) -> str:
    lines = [f"# {conversation.title or 'Conversation'}", ""]
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(conversation.created_at))
    lines += [f"*Exported from Inglenook · started {when}*", ""]
    if conversation.system_prompt:
        lines += ["> **System:** " + conversation.system_prompt.replace("\n", "\n> "), ""]
    answered = {c.result_message_id: c for c in calls}
    for message in messages:
        call = answered.get(message.id)
        if message.role == "tool" and call is not None:
            # A tool call: what ran, with which arguments, and what came back.
            arguments = json.dumps(call.arguments, indent=2, ensure_ascii=False)
            lines += [f"### Tool: {call.server}/{call.tool} ({call.status})", "", "```json", arguments, "```", "",
                      "```", message.content.rstrip(), "```", ""]
            continue
        who = "You" if message.role == "user" else (message.model_id or "Assistant")
        note = " *(stopped)*" if message.status == "partial" else ""
        lines += [f"## {who}{note}", "", message.content.rstrip(), ""]
    return "\n".join(lines)


def to_json(conversation: Conversation, messages: list[Message], calls: Sequence[CallRecord] = ()) -> str:
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
        # Each tool call: the message that asked (message_id), the tool message that holds its
        # result (result_message_id), and what ran.
        "tool_calls": [
            {"call_id": c.call_id, "server": c.server, "tool": c.tool, "arguments": c.arguments, "status": c.status,
             "message_id": c.message_id, "result_message_id": c.result_message_id, "duration_s": c.duration_s,
             "result": c.result.to_json()}
            for c in calls
        ],
    }
    return json.dumps(body, indent=2, ensure_ascii=False) + "\n"
