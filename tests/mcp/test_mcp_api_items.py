"""MCP items of the Responses API without a model: how a chain's ``mcp_call`` and answered
``mcp_approval_request`` items replay as calls and results, which approvals run, and how
``require_approval`` and ``allowed_tools`` are read."""

from __future__ import annotations

import pytest

from inglenook.engine.api.responses.mcp_tools import _never, _tool_names, approved_calls
from inglenook.engine.api.responses.protocol import ResponseCreateRequest, translate
from inglenook.engine.api.shared import ApiError
from inglenook.engine.base import InvalidRequest
from inglenook.engine.tools import McpTool

ASKED = {"type": "mcp_approval_request", "id": "mcpr_1", "server_label": "time", "name": "get_current_time",
         "arguments": '{"timezone": "Asia/Tokyo"}'}
HISTORY = [
    {"type": "message", "role": "user", "content": "What time is it?"},
    {"type": "mcp_list_tools", "id": "mcpl_1", "server_label": "time", "tools": []},
    {"type": "mcp_call", "id": "mcp_1", "server_label": "time", "name": "get_current_time", "arguments": "{}",
     "output": '{"timezone": "UTC"}', "status": "completed"},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Tokyo too?"}]},
    ASKED,
]


def answer(approve: bool, **extra: object) -> ResponseCreateRequest:
    return ResponseCreateRequest.model_validate({"model": "m", "input": [
        {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": approve, **extra}]})


def test_a_chain_replays_calls_and_a_declined_approval_as_a_refusal() -> None:
    chat = translate(answer(False, reason="not now"), HISTORY).chat
    roles = [(m.role, bool(m.tool_calls)) for m in chat.messages]
    assert roles == [("user", False), ("assistant", True), ("tool", False), ("assistant", True), ("tool", False)]
    ran, declined = chat.messages[1], chat.messages[3]
    assert ran.tool_calls[0].id == "mcp_1" and chat.messages[2].content == '{"timezone": "UTC"}'
    assert declined.content == "Tokyo too?" and declined.tool_calls[0].function.name == "get_current_time"
    assert chat.messages[4].content == "The user declined this call: not now"
    assert approved_calls(translate(answer(False), HISTORY).input_items, HISTORY) == []


def test_an_approval_runs_once_and_must_name_a_request_of_the_chain() -> None:
    translated = translate(answer(True), HISTORY)
    assert [m.role for m in translated.chat.messages][-1] == "assistant"  # the call runs before the model
    assert approved_calls(translated.input_items, HISTORY) == [ASKED]
    ran = [*HISTORY, {"type": "mcp_call", "id": "mcp_2", "approval_request_id": "mcpr_1", "name": "x",
                      "server_label": "time", "arguments": "{}"}]
    assert approved_calls(translated.input_items, ran) == []  # already run: not again
    with pytest.raises(InvalidRequest, match="not in this response's chain"):
        translate(answer(True), HISTORY[:-1])


def test_require_approval_and_allowed_tools() -> None:
    tools = [McpTool("time", name, "", {}) for name in ("get_current_time", "convert_time")]
    assert _never(None, tools, 0) == frozenset() and _never("always", tools, 0) == frozenset()
    assert _never("never", tools, 0) == {"get_current_time", "convert_time"}
    assert _never({"never": {"tool_names": ["convert_time", "other"]}}, tools, 0) == {"convert_time"}
    assert _never({"never": {"tool_names": ["convert_time"]}, "always": {"tool_names": ["convert_time"]}},
                  tools, 0) == frozenset()
    assert _tool_names(["a"], "x") == {"a"} and _tool_names({"tool_names": ["b"]}, "x") == {"b"}
    assert _tool_names({"read_only": True}, "x") is None
    with pytest.raises(ApiError, match="always, never or a filter"):
        _never("sometimes", tools, 0)
