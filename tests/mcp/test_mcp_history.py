"""What a model reads of a conversation that made tool calls: with tools, the calls and
results in the OpenAI shape its template renders; without them, plain text."""

from __future__ import annotations

import json
from pathlib import Path

from inglenook.engine import Paths, Store
from inglenook.engine.chat import ChatService
from inglenook.engine.chat.tool_turn import chat_messages
from inglenook.engine.store import table_named


def test_tool_messages_with_and_without_tools(home: Path) -> None:
    store = Store(Paths.default().ensure().database)
    try:
        chats = ChatService(store, None, lambda: "m")  # type: ignore[arg-type] — history needs no scheduler
        chat = chats.new_conversation(system_prompt="Be brief.")
        store.add_message(chat.id, "user", "Time in Tokyo?")
        asked = store.add_message(chat.id, "assistant", "")
        answered = store.add_message(chat.id, "tool", '{"datetime": "09:00"}')
        store.add_message(chat.id, "assistant", "It is nine.")
        with store.writing():
            table_named(store.db, "mcp_tool_calls").insert({
                "conversation_id": chat.id, "message_id": asked.id, "result_message_id": answered.id,
                "call_id": "call_1", "server": "time", "tool": "get_current_time",
                "arguments": json.dumps({"timezone": "Asia/Tokyo"}), "status": "ran",
                "result": json.dumps({"text": '{"datetime": "09:00"}'}), "duration_s": 0.1, "created_at": 0.0})
        store.add_message(chat.id, "user", "Thanks")
        shaped = chat_messages(store, store.get_conversation(chat.id))
        assert [m.role for m in shaped] == ["system", "user", "assistant", "tool", "assistant", "user"]
        call = shaped[2].tool_calls[0]
        assert call.id == "call_1" and json.loads(call.function.arguments) == {"timezone": "Asia/Tokyo"}
        assert shaped[3].tool_call_id == "call_1" and shaped[3].name == "get_current_time"
        plain = chats.history(store.get_conversation(chat.id))
        assert "tool" not in [m["role"] for m in plain]
        assert plain[3] == {"role": "user", "content": 'Result of a tool call: {"datetime": "09:00"}'}
        store.delete_messages_from(chat.id, asked.id)  # regenerate: the call goes with its message
        assert chats.tool_calls(chat.id) == []
    finally:
        store.close()


def test_permissions_in_a_chat_and_always(home: Path) -> None:
    from inglenook.engine.tools import ALWAYS, IN_CHAT, ONCE, Permissions

    store = Store(Paths.default().ensure().database)
    try:
        permissions = Permissions(store)
        permissions.remember("time", "get_current_time", 7, ONCE)  # nothing to remember
        assert not permissions.allowed("time", "get_current_time", 7)
        permissions.remember("time", "get_current_time", 7, IN_CHAT)
        assert permissions.allowed("time", "get_current_time", 7)
        assert not permissions.allowed("time", "get_current_time", 8)  # another chat asks again
        permissions.remember("time", "convert_time", 7, ALWAYS)
        assert permissions.allowed("time", "convert_time", 8)
        permissions.forget("time", "convert_time")
        assert not permissions.allowed("time", "convert_time", 8)
    finally:
        store.close()
