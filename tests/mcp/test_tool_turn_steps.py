"""A tool turn as a state machine (``ToolTurn.advance``), with the real SmolLM2 and the real
mcp-server-time: it stops at the call it puts to the person and holds no thread while the
person decides; the decision resumes it, on whatever thread calls. Approved, the call runs;
refused, it goes back as a refusal; stopped while waiting, it saves the call as denied and
ends without another round."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from inglenook.engine import Engine
from inglenook.engine.tools import DENY, CallRequest, Decision

from .test_mcp_chat import SETTINGS, time_config

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def _never_asked(request: CallRequest) -> Decision:
    raise AssertionError(f"advance asks nobody in place: {request}")


def _waiting_turn(engine: Engine, command: list[str], rounds: int = 2):
    engine.chats.tools.servers.add(time_config(command))
    chat = engine.chats.new_conversation()
    engine.chats.set_chat_tools(chat.id, ["time"])
    turn = engine.chats.send_with_tools(chat.id, "What time is it in Tokyo?", _never_asked,
                                        tool_choice="get_current_time", max_rounds=rounds, **SETTINGS)
    request = turn.advance()
    assert request is not None and request.tool == "get_current_time" and turn.waiting is request
    assert not turn.done and turn.calls == [] and len(turn.rounds) == 0  # the round's stats come with its calls
    return chat, turn


def test_approved_the_turn_resumes_on_another_thread_and_answers(home: Path, time_server_command: list[str]) -> None:
    with Engine() as engine:
        chat, turn = _waiting_turn(engine, time_server_command)
        ended: list[CallRequest | None] = []
        resumer = threading.Thread(target=lambda: ended.append(turn.advance(Decision(arguments={"timezone": "Asia/Tokyo"}))))
        resumer.start()  # not the thread that began it: nothing waited for the decision
        resumer.join(240)
        assert ended == [None] and turn.done and turn.waiting is None
        assert [c.status for c in turn.calls] == ["ran"]
        assert json.loads(turn.calls[0].result.text)["timezone"] == "Asia/Tokyo"
        assert turn.message is not None and turn.message.content.strip()
        assert [m.role for m in engine.chats.open(chat.id)[1]] == ["user", "assistant", "tool", "assistant"]
        with pytest.raises(RuntimeError):
            turn.advance(Decision())  # ended: nothing waits for a decision


def test_refused_the_call_goes_back_as_a_refusal(home: Path, time_server_command: list[str]) -> None:
    with Engine() as engine:
        chat, turn = _waiting_turn(engine, time_server_command)
        with pytest.raises(RuntimeError):
            turn.advance()  # waiting: only a decision resumes it
        assert turn.advance(Decision(verdict=DENY, reason="not now")) is None and turn.done
        assert [c.status for c in turn.calls] == ["denied"] and "not now" in turn.calls[0].result.text
        assert len(turn.rounds) == 2  # the model read the refusal and answered
        assert [c.status for c in engine.chats.tool_calls(chat.id)] == ["denied"]


def test_stopped_while_waiting_it_saves_the_call_and_ends(home: Path, time_server_command: list[str]) -> None:
    with Engine() as engine:
        chat, turn = _waiting_turn(engine, time_server_command, rounds=3)
        turn.cancel()  # Stop, or stop_all at shutdown: then the waiting call is denied
        assert turn.advance(Decision(verdict=DENY, reason="the person stopped the answer")) is None
        assert turn.done and len(turn.rounds) == 1  # no round after the stop
        assert [c.status for c in engine.chats.tool_calls(chat.id)] == ["denied"]
        roles = [m.role for m in engine.chats.open(chat.id)[1]]
        assert roles == ["user", "assistant", "tool"]


def test_run_is_the_blocking_way_with_the_same_steps(home: Path, time_server_command: list[str]) -> None:
    with Engine() as engine:
        engine.chats.tools.servers.add(time_config(time_server_command))
        chat = engine.chats.new_conversation()
        engine.chats.set_chat_tools(chat.id, ["time"])
        asked: list[CallRequest] = []

        def approver(request: CallRequest) -> Decision:
            asked.append(request)
            return Decision(verdict=DENY)

        turn = engine.chats.send_with_tools(chat.id, "Time?", approver, tool_choice="required", max_rounds=1,
                                            **SETTINGS)
        turn.run()
        assert len(asked) == 1 and turn.done and [c.status for c in turn.calls] == ["denied"]
