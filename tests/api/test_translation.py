"""The server's pure translation pieces: tool-call parsing, message shapes, error mapping."""

from __future__ import annotations

import json

import pytest

from inglenook.engine.api.shared.errors import error_for, scrub
from inglenook.engine.api.shared.security import is_loopback_host, split_host
from inglenook.engine.base.errors import (
    ContextLengthExceeded, InvalidRequest, ModelLoadError, ModelNotFound, QueueFull,
)
from inglenook.engine.base.protocol import ChatCompletionRequest, NamedToolChoice, Tool
from inglenook.engine.text.json_grammar import grammar_for_schema
from inglenook.engine.text.tool_calls import (
    TemplateAbilities, ToolCallFilter, engine_messages, parse_calls, plan_tools,
)

TOOLS = [Tool.model_validate({"type": "function", "function": {"name": "add", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}}})]


def auto_plan():
    return plan_tools(TOOLS, "auto", TemplateAbilities())


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "add", "arguments": {"a": 1, "b": 2}}',
        '  ```json\n{"name": "add", "parameters": {"a": 1, "b": 2}}\n```',
        '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": 2}}\n</tool_call>',
        '[{"type": "function", "function": {"name": "add", "arguments": "{\\"a\\": 1, \\"b\\": 2}"}}]',
    ],
)
def test_calls_are_recognised_in_the_shapes_models_write(text: str) -> None:
    [call] = parse_calls(text, auto_plan())
    assert call.function.name == "add" and json.loads(call.function.arguments) == {"a": 1, "b": 2}


def test_text_and_unknown_functions_are_not_calls() -> None:
    assert parse_calls("The answer is 3.", auto_plan()) == []
    assert parse_calls('{"name": "rm_rf", "arguments": {}}', auto_plan()) == []
    assert parse_calls('{"a": 1}', auto_plan()) == []


def test_streaming_holds_back_only_what_may_be_a_call() -> None:
    held = ToolCallFilter(auto_plan(), parallel=True)
    assert held.feed("  ") == "" and held.feed("<tool") == "", "undecided: could be a call"
    assert held.feed("kit> is a word") == "  <toolkit> is a word"
    held = ToolCallFilter(auto_plan(), parallel=True)
    assert held.feed("Sure. <tool_call>{") == "Sure. "
    assert held.feed('"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call> Done.') == " Done."
    calls, rest = held.finish()
    assert [c.function.name for c in calls] == ["add"] and rest == ""


def test_messages_for_a_template_without_tools() -> None:
    request = ChatCompletionRequest.model_validate({"messages": [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Add"}, {"type": "text", "text": "1 and 2"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "3"},
    ]})
    plan = plan_tools(TOOLS, "required", TemplateAbilities())
    messages = engine_messages(request.messages, TemplateAbilities(), plan)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[0]["content"].startswith("Be brief.") and '"add"' in messages[0]["content"]
    assert messages[1]["content"] == "Add\n1 and 2"
    assert json.loads(messages[2]["content"]) == {"name": "add", "arguments": {"a": 1, "b": 2}}
    assert messages[3]["content"] == "Result of calling add: 3"
    native = engine_messages(request.messages, TemplateAbilities(tools=True, tool_calls=True), None)
    assert native[2]["tool_calls"][0]["function"]["arguments"] == {"a": 1, "b": 2}
    assert native[3] == {"role": "tool", "content": "3", "tool_call_id": "call_1", "name": "add"}


def test_forced_calls_get_a_grammar_and_bad_choices_are_refused() -> None:
    named = NamedToolChoice.model_validate({"type": "function", "function": {"name": "add"}})
    grammar = plan_tools(TOOLS, named, TemplateAbilities()).grammar()
    assert "root" in grammar and "add" in grammar
    assert auto_plan().grammar() is None
    assert plan_tools(TOOLS, "none", TemplateAbilities()) is None
    with pytest.raises(InvalidRequest):
        plan_tools(TOOLS, NamedToolChoice.model_validate({"function": {"name": "nope"}}), TemplateAbilities())
    with pytest.raises(InvalidRequest):
        grammar_for_schema({"type": "object", "properties": {"x": {"$ref": "https://example.com/s.json"}}})


def test_errors_map_by_type_and_never_carry_paths() -> None:
    assert error_for(InvalidRequest("bad", param="top_p")).status == 400
    overflow = error_for(ContextLengthExceeded("too long", 5000, 1024))
    assert (overflow.status, overflow.code, overflow.param) == (400, "context_length_exceeded", "messages")
    assert error_for(ModelNotFound("no")).status == 404
    busy = error_for(QueueFull("busy", retry_after_s=3))
    assert busy.status == 503 and busy.headers == {"Retry-After": "3"}
    hidden = error_for(ModelLoadError("could not load /home/ann/models/x.gguf: bad"))
    assert hidden.status == 500 and "/home" not in hidden.message
    assert scrub(r"open C:\Users\ann\m.gguf failed") == "open <path> failed"
    unexpected = error_for(RuntimeError("/secret/place exploded"))
    assert unexpected.status == 500 and "secret" not in unexpected.message


def test_host_parsing() -> None:
    assert split_host("[::1]:8484") == "[::1]" and split_host("LocalHost:80") == "localhost"
    assert split_host("example.com") == "example.com"
    assert is_loopback_host("127.0.0.2") and is_loopback_host("[::1]") and is_loopback_host("app.localhost")
    assert not is_loopback_host("localhost.evil.com") and not is_loopback_host("10.0.0.1")
