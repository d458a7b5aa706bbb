"""Tool turns that wait for the person hold no thread: six chats each with a call waiting for
approval (more than the answers lane has threads), and a new answer in a seventh chat, without
tools, still streams and ends. At shutdown, ``stop_all`` denies the waiting calls and each
turn saves them and ends."""

from __future__ import annotations

import pytest

from tests.mcp.conftest import time_server_command  # noqa: F401 — the fixture

from .conftest import ANSWER_TIMEOUT_MS, new_chat

pytestmark = pytest.mark.timeout(900)

WAITING_CHATS = 6


def _tool_chat(qtbot, window, command: list[str]) -> int:
    """A greedy chat whose first round must call mcp-server-time's get_current_time."""
    from inglenook.engine import McpServerConfig

    chats = window.engine.chats
    if chats.tools.servers.find("time") is None:
        chats.tools.servers.add(McpServerConfig("time", command=command[0], args=tuple(command[1:])))
    conversation = chats.new_conversation(sampling={"temperature": 0.0, "top_k": 1, "max_tokens": 40,
                                                    "tool_choice": "get_current_time", "tool_rounds": 2})
    chats.set_chat_tools(conversation.id, ["time"])
    return conversation.id


def test_six_chats_waiting_for_approval_leave_a_new_answer_streaming(qtbot, window, time_server_command) -> None:  # noqa: F811
    chat = window.chat
    assert chat.lane.threads < WAITING_CHATS  # more waiting chats than threads: parked turns would block it
    waiting = [_tool_chat(qtbot, window, time_server_command) for _ in range(WAITING_CHATS)]
    for cid in waiting:
        assert chat.send(cid, "What time is it in Tokyo?")
    qtbot.waitUntil(lambda: chat.approvals.waiting_conversations() == set(waiting), timeout=ANSWER_TIMEOUT_MS)

    local = new_chat(qtbot, window, max_tokens=12)
    streamed: list[str] = []
    chat.answer_text.connect(lambda cid, text: streamed.append(text) if cid == local else None)
    with qtbot.waitSignal(chat.answer_finished, timeout=ANSWER_TIMEOUT_MS,
                          check_params_cb=lambda cid, message: cid == local) as finished:
        assert chat.send(local, "Say hello.")
    message = finished.args[1]
    assert streamed and streamed[-1].strip()  # its text came in while the six chats waited
    assert message is not None and message.role == "assistant" and message.content.strip()
    assert chat.approvals.waiting_conversations() == set(waiting)  # still waiting, nothing decided for them
    assert all(chat.is_streaming(cid) for cid in waiting) and not chat.is_streaming(local)

    window.shutdown()  # stop_all: each waiting call is denied, saved, and its turn ends on a lane
    chats = window.engine.chats
    for cid in waiting:
        assert [c.status for c in chats.tool_calls(cid)] == ["denied"]
        assert [m.role for m in chats.open(cid)[1]] == ["user", "assistant", "tool"]
    assert chat.approvals.waiting_conversations() == set()
