"""Responses API requests -> chat requests: items, tools, tool_choice and text formats."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from inglenook.engine.api.responses.protocol import ResponseCreateRequest, translate
from inglenook.engine.base.errors import InvalidRequest

FUNCTION = {"type": "function", "name": "get_weather", "parameters": {"type": "object", "properties": {}}}


def chat_of(history: list[dict[str, Any]] | None = None, **body: Any) -> Any:
    return translate(ResponseCreateRequest.model_validate(body), history or []).chat


def roles(chat: Any) -> list[str]:
    return [m.role for m in chat.messages]


def test_a_string_input_is_one_user_message_after_the_instructions() -> None:
    translated = translate(ResponseCreateRequest.model_validate({"input": "Hi.", "instructions": "Be brief."}), [])
    assert roles(translated.chat) == ["system", "user"]
    assert translated.chat.messages[0].content == "Be brief." and translated.chat.messages[1].content == "Hi."
    # What a store keeps is this request's input as items, not the instructions.
    assert translated.input_items == [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi."}]}]


def test_calls_join_the_answer_before_them_and_outputs_become_tool_messages() -> None:
    chat = chat_of(input=[
        {"role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me look."}]},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": '{"city": "Oslo"}'},
        {"type": "function_call", "call_id": "c2", "name": "get_weather", "arguments": '{"city": "Rome"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "cold"},
        {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "warm"}]},
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "opaque"},
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
    ])
    assert roles(chat) == ["user", "assistant", "tool", "tool"]
    answer = chat.messages[1]
    assert answer.content == "Let me look."
    assert [(c.id, c.function.name, c.function.arguments) for c in answer.tool_calls] == [
        ("c1", "get_weather", '{"city": "Oslo"}'), ("c2", "get_weather", '{"city": "Rome"}'),
    ]
    assert [(m.tool_call_id, m.content) for m in chat.messages[2:]] == [("c1", "cold"), ("c2", "warm")]


def test_a_call_after_a_tool_result_starts_a_new_assistant_turn() -> None:
    chat = chat_of(input=[
        {"role": "user", "content": "Go."},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "done"},
        {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "*** Begin Patch"},
        {"type": "custom_tool_call_output", "call_id": "c2", "output": "applied"},
    ])
    assert roles(chat) == ["user", "assistant", "tool", "assistant", "tool"]
    assert chat.messages[3].tool_calls[0].function.arguments == "*** Begin Patch"


def test_history_comes_before_the_input_and_keeps_no_old_instructions() -> None:
    history = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "I am Ada."}]},
        {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Hello Ada.", "annotations": [], "logprobs": []}]},
    ]
    chat = chat_of(history, input="Who am I?", instructions="New rules.")
    assert [(m.role, m.content) for m in chat.messages] == [
        ("system", "New rules."), ("user", "I am Ada."), ("assistant", "Hello Ada."), ("user", "Who am I?"),
    ]


def test_only_function_tools_reach_the_model_and_the_rest_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    tools = [{"type": "web_search"}, FUNCTION, {"type": "local_shell"}, {"type": "mcp", "server_label": "x"},
             {"type": "custom", "name": "apply_patch"}]
    with caplog.at_level(logging.INFO, logger="inglenook.engine.api.responses.protocol"):
        chat = chat_of(input="Hi.", tools=tools, tool_choice="required", parallel_tool_calls=False)
    assert [t.function.name for t in chat.tools] == ["get_weather"]
    assert chat.tool_choice == "required" and chat.parallel_tool_calls is False
    assert "web_search, local_shell, mcp, custom" in caplog.text
    assert chat_of(input="Hi.", tools=[{"type": "web_search"}]).tools is None  # nothing left to offer


def test_tool_choice_forms() -> None:
    named = chat_of(input="Hi.", tools=[FUNCTION], tool_choice={"type": "function", "name": "get_weather"})
    assert named.tool_choice.function.name == "get_weather"
    other = {**FUNCTION, "name": "other"}
    allowed = chat_of(input="Hi.", tools=[FUNCTION, other], tool_choice={
        "type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "other"}],
    })
    assert [t.function.name for t in allowed.tools] == ["other"] and allowed.tool_choice == "required"
    assert chat_of(input="Hi.", tools=[FUNCTION], tool_choice={"type": "web_search_preview"}).tool_choice == "auto"
    with pytest.raises(InvalidRequest) as caught:
        chat_of(input="Hi.", tool_choice="sometimes")
    assert caught.value.param == "tool_choice"


def test_text_formats_become_response_formats() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    chat = chat_of(input="Hi.", text={"format": {"type": "json_schema", "name": "thing", "schema": schema, "strict": True}})
    assert chat.response_format.type == "json_schema"
    assert chat.response_format.json_schema.name == "thing" and chat.response_format.json_schema.schema_ == schema
    assert chat_of(input="Hi.", text={"format": {"type": "json_object"}}).response_format.type == "json_object"
    assert chat_of(input="Hi.", text={"format": {"type": "text"}, "verbosity": "low"}).response_format is None
    sampled = chat_of(input="Hi.", max_output_tokens=7, temperature=0.5, top_p=0.9, reasoning={"effort": "low"})
    assert (sampled.max_tokens, sampled.temperature, sampled.top_p) == (7, 0.5, 0.9)
    assert (sampled.logprobs, sampled.top_logprobs) == (False, None)  # computed only when asked back
    asked = chat_of(input="Hi.", include=["message.output_text.logprobs"], top_logprobs=3)
    assert (asked.logprobs, asked.top_logprobs) == (True, 3)


@pytest.mark.parametrize(
    "body",
    [
        {"input": ""},
        {"input": [], "instructions": "Only instructions."},
        {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
        {"input": [{"role": "tool", "content": "x"}]},
        {"input": [{"type": "function_call_output", "output": "x"}]},
        {"input": "Hi.", "tools": [{"type": "function"}]},
        {"input": "Hi.", "tools": [{"type": "function", "name": "has space"}]},
        {"input": "Hi.", "text": {"format": {"type": "json_schema"}}},
        {"input": "Hi.", "background": True},
    ],
)
def test_bad_requests_name_their_parameter(body: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequest) as caught:
        chat_of(**body)
    assert caught.value.param in ("input", "tools", "text.format", "background")


_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=8)
_json = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=10)
_item_keys = st.sampled_from(["type", "role", "content", "call_id", "name", "arguments", "output", "input", "id"])
_items = st.dictionaries(_item_keys, _json | st.sampled_from(["message", "user", "function_call", "function_call_output", "assistant"]), max_size=6)


@settings(max_examples=50, deadline=None)
@given(st.lists(_items, max_size=4), st.lists(st.dictionaries(st.sampled_from(["type", "name", "parameters"]), _json, max_size=3), max_size=3))
def test_any_input_either_translates_or_is_refused_cleanly(items: list[dict[str, Any]], tools: list[dict[str, Any]]) -> None:
    try:
        request = ResponseCreateRequest.model_validate({"input": items, "tools": tools})
        translate(request, [])
    except (InvalidRequest, ValidationError):
        pass  # both become 400s in the API's shape
