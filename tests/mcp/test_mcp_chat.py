"""The tool loop with the real SmolLM2 and the real mcp-server-time: the model's call (forced
with ``tool_choice``, tiny models do not choose tools reliably) → the person's approval (with
edited arguments) → the server → the result → the model answers; round 2's prompt comes from
the prefix cache. Denials go back as refusals, "allow in this chat" is remembered, and the
calls are saved with the chat."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from inglenook.app.text import export
from inglenook.engine import Engine
from inglenook.engine.tools import DENY, IN_CHAT, CallRequest, Decision, McpServerConfig

from .conftest import ROOT, served

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

SETTINGS = {"temperature": 0.0, "seed": 7, "max_tokens": 48}


def time_config(command: list[str]) -> McpServerConfig:
    return McpServerConfig("time", command=command[0], args=tuple(command[1:]))


def test_model_calls_a_tool_the_person_approves_and_answers(home: Path, time_server_command: list[str]) -> None:
    asked: list[CallRequest] = []

    def approver(request: CallRequest) -> Decision:
        asked.append(request)
        return Decision(arguments={"timezone": "Asia/Tokyo"})  # the person corrects the model's guess

    with Engine() as engine:
        engine.chats.tools.servers.add(time_config(time_server_command))
        chat = engine.chats.new_conversation(system_prompt="You are a helpful assistant.")
        engine.chats.set_chat_tools(chat.id, ["time"])
        turn = engine.chats.send_with_tools(chat.id, "What time is it in Tokyo?", approver,
                                            tool_choice="get_current_time", max_rounds=2, **SETTINGS)
        answer = turn.run()

        assert [r.tool for r in asked] == ["get_current_time"] and asked[0].server == "time"
        assert len(turn.calls) == 1
        call = turn.calls[0]
        assert call.status == "ran" and call.arguments == {"timezone": "Asia/Tokyo"}
        assert json.loads(call.result.text)["timezone"] == "Asia/Tokyo"
        assert answer is not None and answer.role == "assistant" and answer.content.strip()
        roles = [m.role for m in engine.chats.open(chat.id)[1]]
        assert roles == ["user", "assistant", "tool", "assistant"]
        assert [c.call_id for c in engine.chats.tool_calls(chat.id)] == [call.call_id]  # saved with the chat
        conversation, messages = engine.chats.open(chat.id)
        exported = json.loads(export.to_json(conversation, messages, engine.chats.tool_calls(chat.id)))
        assert exported["tool_calls"][0]["arguments"] == {"timezone": "Asia/Tokyo"}
        assert "Asia/Tokyo" in exported["tool_calls"][0]["result"]["text"]
        markdown = export.to_markdown(conversation, messages, engine.chats.tool_calls(chat.id))
        assert "### Tool: time/get_current_time (ran)" in markdown
        first, second = turn.rounds
        assert first.calls == 1 and second.prompt_tokens > first.prompt_tokens
        # Round 2 reads round 1's prompt again from the cache: the tools and the question.
        assert second.cached_tokens >= first.prompt_tokens * 0.9, turn.rounds
        print(f"\nround 2 cached share: {second.cached_share:.3f} "
              f"({second.cached_tokens}/{second.prompt_tokens} tokens)")


def test_a_denied_call_goes_back_as_a_refusal_and_chat_permission_is_remembered(
        home: Path, time_server_command: list[str]) -> None:
    decisions = iter([Decision(verdict=DENY, reason="not now"), Decision(remember=IN_CHAT)])
    asked: list[CallRequest] = []

    def approver(request: CallRequest) -> Decision:
        asked.append(request)
        return next(decisions)

    with Engine() as engine:
        engine.chats.tools.servers.add(time_config(time_server_command))
        chat = engine.chats.new_conversation()
        engine.chats.set_chat_tools(chat.id, ["time"])
        denied = engine.chats.send_with_tools(chat.id, "Time in UTC?", approver, tool_choice="required",
                                              max_rounds=2, **SETTINGS)
        denied.run()
        assert denied.calls[0].status == "denied" and "declined" in denied.calls[0].result.text
        tool_message = [m for m in engine.chats.open(chat.id)[1] if m.role == "tool"][0]
        assert "not now" in tool_message.content
        for _ in range(2):  # approved "in this chat" once, then not asked again
            engine.chats.send_with_tools(chat.id, "And now?", approver, tool_choice="required", max_rounds=1,
                                         **SETTINGS).run()
        assert len(asked) == 2
        other = engine.chats.new_conversation()
        engine.chats.set_chat_tools(other.id, ["time"])
        with pytest.raises(StopIteration):  # another chat asks again (and the iterator is spent)
            engine.chats.send_with_tools(other.id, "Time?", approver, tool_choice="required", max_rounds=1,
                                         **SETTINGS).run()


def test_stop_ends_a_running_call(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the test server runs as python -m tests.mcp.servers
    turns = []

    def approver(_request: CallRequest) -> Decision:
        threading.Timer(1.0, turns[0].cancel).start()  # the person presses Stop while the call runs
        return Decision()

    with Engine() as engine:
        engine.chats.tools.servers.add(served("tests", "ok"))
        chat = engine.chats.new_conversation()
        engine.chats.set_chat_tools(chat.id, ["tests"])
        turn = engine.chats.send_with_tools(chat.id, "Wait for me.", approver, tool_choice="hang", **SETTINGS)
        turns.append(turn)
        turn.run()
        assert turn.cancelled and len(turn.rounds) == 1
        assert turn.calls[0].status == "failed" and "stopped" in turn.calls[0].result.text
